"""The one error type of the launcher: bad user input (flag, hostfile, environment)."""
import os
import stat

EXIT_BAD_INPUT = 2  # same code as zerotrain's zt::kExitBadInput


class LaunchError(Exception):
    """A message naming the input and what was expected; main() prints it and exits 2."""


MAX_TEXT_FILE_BYTES = 1 << 20  # hostfiles and env files are small; anything larger is refused
MAX_SLOTS_PER_HOST = 4096      # a bound on a count read from input


def read_text_file(path, flag, max_bytes=MAX_TEXT_FILE_BYTES):
    """The text of a regular UTF-8 file of at most max_bytes; LaunchError naming `flag` otherwise.

    FIFOs and devices are refused before reading (opened non-blocking, so a FIFO cannot block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise LaunchError("%s %s: cannot read it (%s)" % (flag, path, e.strerror or e))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LaunchError("%s %s: not a regular file; expected a text file" % (flag, path))
        if st.st_size > max_bytes:
            raise LaunchError("%s %s: %d bytes; expected a text file of at most %d bytes"
                              % (flag, path, st.st_size, max_bytes))
        data = os.read(fd, max_bytes + 1)
    except OSError as e:
        raise LaunchError("%s %s: cannot read it (%s)" % (flag, path, e.strerror or e))
    finally:
        os.close(fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LaunchError("%s %s: not a UTF-8 text file (invalid byte at offset %d)" % (flag, path, e.start))
    if "\0" in text:
        raise LaunchError("%s %s: contains a NUL byte; expected a text file" % (flag, path))
    return text
