"""The one error type of the launcher: bad user input (flag, hostfile, environment)."""

EXIT_BAD_INPUT = 2  # same code as zerotrain's zt::kExitBadInput


class LaunchError(Exception):
    """A message naming the input and what was expected; main() prints it and exits 2."""
