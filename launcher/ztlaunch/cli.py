"""zt-launch command line: parse flags, choose ranks and hosts, print or exec mpirun/srun."""
import argparse
import os
import shlex
import shutil
import subprocess
import sys

from . import commands, environment, hostfile
from .errors import EXIT_BAD_INPUT, LaunchError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KNOWN_SUBCOMMANDS = ("train", "check-config", "version")

USAGE = "zt-launch [options] [--] PROGRAM|ZEROTRAIN_COMMAND [ARGS...]"
EPILOG = """examples:
  zt-launch -n 2 train --config configs/ds/stage2.json --model configs/models/gpt-tiny.json \\
            --data markov:vocab=64,order=1,seed=3 --steps 20
  zt-launch --hostfile hosts --include 'node1:0,1@node2' train ...
  zt-launch -n 4 --dry-run -- python3 my_script.py
See docs/launcher.md."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        raise LaunchError(message)


def build_parser():
    p = _Parser(prog="zt-launch", usage=USAGE, epilog=EPILOG, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Start zerotrain (or any program) on several ranks with mpirun, or srun under Slurm.")
    p.add_argument("-n", "--num-procs", type=int, metavar="N",
                   help="ranks on this machine (default: visible GPUs, else 1)")
    p.add_argument("-H", "--hostfile", metavar="FILE", help="DeepSpeed hostfile: 'HOST slots=N' per line")
    p.add_argument("-i", "--include", default="", metavar="SPEC", help="only these hosts/slots: 'h1@h2:0,2'")
    p.add_argument("-e", "--exclude", default="", metavar="SPEC", help="all but these hosts/slots: 'h1@h2:0,2'")
    p.add_argument("--num-nodes", "--num_nodes", type=int, metavar="N", help="use the first N hosts")
    p.add_argument("--num-gpus", "--num_gpus", type=int, metavar="K", help="use the first K slots of each host")
    p.add_argument("--launcher", choices=("mpirun", "srun"),
                   help="default: srun when SLURM_JOB_ID is set, else mpirun")
    p.add_argument("--launcher-args", "--launcher_args", default="", metavar="'ARGS'",
                   help="extra arguments for mpirun/srun (one string, shell-split)")
    p.add_argument("--mca", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="OpenMPI MCA parameter (repeatable)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="set a variable on every rank (repeatable)")
    p.add_argument("--export", action="append", default=[], metavar="NAME",
                   help="pass this variable's current value to every rank (repeatable)")
    p.add_argument("--env-file", metavar="FILE", help="NAME=VALUE lines to set on every rank")
    p.add_argument("--dry-run", action="store_true", help="print the command (one shell-quoted line) and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="do not echo the command to stderr before running")
    p.add_argument("program", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return p


def _zerotrain_bin(env):
    path = env.get("ZT_BIN") or os.path.join(REPO_ROOT, "build", "zerotrain")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        where = "ZT_BIN=%s" % path if env.get("ZT_BIN") else path
        raise LaunchError("zerotrain binary not found at %s: build it (cmake -S . -B build && cmake --build build) "
                          "or set ZT_BIN to the built binary" % where)
    return os.path.abspath(path)


def _zerotrain_subcommands(binary):
    """The commands `zerotrain --help` lists (so new ones need no launcher change)."""
    try:
        out = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30,
                             universal_newlines=True).stdout
    except (OSError, subprocess.SubprocessError):
        return set(KNOWN_SUBCOMMANDS)
    names = set(KNOWN_SUBCOMMANDS)
    in_list = False
    for line in out.splitlines():
        if line.strip() == "commands:":
            in_list = True
        elif in_list and line.startswith("  ") and line.split():
            names.add(line.split()[0])
    return names


def resolve_program(words, env):
    """After `--`: a program. Otherwise a zerotrain command runs the built binary; anything else must
    be a path or a program on PATH."""
    if not words or words == ["--"]:
        raise LaunchError("no program: expected a zerotrain command (e.g. 'train ...') or '-- PROGRAM ARGS'")
    if words[0] == "--":
        return words[1:]
    first = words[0]
    if first in KNOWN_SUBCOMMANDS:
        return [_zerotrain_bin(env)] + words
    if first.startswith("-"):
        raise LaunchError("unknown zt-launch option '%s' (put the program after '--' to pass it on)" % first)
    if "/" in first or shutil.which(first, path=env.get("PATH")):
        return words
    binary = _zerotrain_bin(env)
    if first in _zerotrain_subcommands(binary):
        return [binary] + words
    raise LaunchError("'%s' is neither a zerotrain command (%s) nor a program on PATH"
                      % (first, ", ".join(sorted(_zerotrain_subcommands(binary)))))


def _user_env(args, env):
    """--env-file, --env and --export as an ordered list of (name, value-or-None)."""
    out = []
    if args.env_file:
        out += environment.read_env_file(args.env_file)
    out += [environment.parse_env_assignment(e, "--env") for e in args.env]
    for name in args.export:
        if name not in env:
            raise LaunchError("--export %s: %s is not set in this environment" % (name, name))
        out.append((name, None))
    return out


def _team_size(env, user_env, threads):
    """OpenMP threads per rank: the user's OMP_NUM_THREADS (--env first, then the environment;
    its first level where it lists several), else the launcher's own."""
    value = dict(user_env).get("OMP_NUM_THREADS") or env.get("OMP_NUM_THREADS") or threads
    first = str(value).split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else int(threads)


def _merge_env(layers):
    """Later layers override earlier ones; first-seen order is kept."""
    merged = {}
    for layer in layers:
        for name, value in layer:
            merged[name] = value
    return list(merged.items())


def make_plan(args, env):
    plan = commands.Plan()
    plan.program = resolve_program(args.program, env)
    plan.launcher = args.launcher or ("srun" if env.get("SLURM_JOB_ID") else "mpirun")
    plan.launcher_exe = env.get("ZT_MPIRUN", "mpirun") if plan.launcher == "mpirun" else "srun"
    plan.as_root = plan.launcher == "mpirun" and os.getuid() == 0
    try:
        plan.extra_args = shlex.split(args.launcher_args)
    except ValueError as e:  # an unbalanced quote
        raise LaunchError("--launcher-args '%s': %s; expected shell words with balanced quotes"
                          % (args.launcher_args, e))
    plan.mca = [tuple(kv) for kv in args.mca]
    user_env = _user_env(args, env)
    user_names = {n for n, _ in user_env}

    # Under srun without a hostfile, --num-nodes/--num-gpus shape the allocation (srun --nodes,
    # --ntasks-per-node) instead of choosing slots of this machine.
    srun_shape = plan.launcher == "srun" and not args.hostfile
    selecting = bool(args.hostfile or args.include or args.exclude
                     or (not srun_shape and (args.num_gpus is not None or args.num_nodes is not None)))
    if args.num_procs is not None and args.num_procs < 1:
        raise LaunchError("-n %d: expected a number of ranks >= 1" % args.num_procs)
    if args.num_procs is not None and selecting:
        raise LaunchError("-n with --hostfile/--include/--exclude/--num-gpus/--num-nodes: -n is for one node; "
                          "choose slots with the selection flags instead")

    local_cvd = None  # CUDA_VISIBLE_DEVICES for the one local node, when a selection sets it
    ranks_per_node = None
    if args.hostfile:
        if "CUDA_VISIBLE_DEVICES" in env:
            print("zt-launch: note: CUDA_VISIBLE_DEVICES=%s in this shell is replaced on each host by the selected "
                  "slots; choose devices with --include" % env["CUDA_VISIBLE_DEVICES"], file=sys.stderr)
        pool = hostfile.parse_hostfile(args.hostfile)
        plan.selection = hostfile.select_slots(pool, args.include, args.exclude, args.num_nodes, args.num_gpus)
        plan.host_cvd = {h: ",".join(str(i) for i in s) for h, s in plan.selection}
        plan.nprocs = sum(len(s) for _, s in plan.selection)
        plan.local_only = all(environment.is_local_host(h) for h, _ in plan.selection)
        ranks_per_node = max(len(s) for _, s in plan.selection)
    elif selecting:
        # The implicit pool: this machine, one slot per visible GPU (slot i = i-th entry of
        # CUDA_VISIBLE_DEVICES when set), or one per core when there is no GPU.
        gpus = environment.visible_gpus(env)
        pool = [("localhost", len(gpus) or environment.local_cores())]
        num_nodes, num_gpus = (None, None) if srun_shape else (args.num_nodes, args.num_gpus)
        chosen = hostfile.select_slots(pool, args.include, args.exclude, num_nodes, num_gpus)[0][1]
        local_cvd = ",".join(gpus[i] if gpus else str(i) for i in chosen)
        plan.nprocs = len(chosen)
        ranks_per_node = plan.nprocs
    else:
        if args.num_procs is not None:
            plan.nprocs = args.num_procs
        elif plan.launcher == "srun" and env.get("SLURM_NTASKS", "").isdigit():
            plan.nprocs = int(env["SLURM_NTASKS"])
        else:
            plan.nprocs = max(1, len(environment.visible_gpus(env)))
        ranks_per_node = plan.nprocs

    if srun_shape and (args.num_nodes is not None or args.num_gpus is not None):
        for flag, value in (("--num-nodes", args.num_nodes), ("--num-gpus", args.num_gpus)):
            if value is not None and value < 1:
                raise LaunchError("%s %d: expected >= 1" % (flag, value))
        if args.num_gpus is not None and (args.num_procs is not None or args.include or args.exclude):
            raise LaunchError("--num-gpus with -n/--include/--exclude: give the ranks one way")
        plan.nodes = args.num_nodes
        if args.num_gpus is not None:
            plan.ntasks_per_node = args.num_gpus
            plan.nodes = args.num_nodes or 1
            plan.nprocs = plan.nodes * args.num_gpus
        ranks_per_node = -(-plan.nprocs // (plan.nodes or 1))
    if "CUDA_VISIBLE_DEVICES" in user_names and (plan.host_cvd or local_cvd is not None):
        raise LaunchError("--env/--export CUDA_VISIBLE_DEVICES together with a slot selection: choose devices "
                          "with --include/--exclude, or set CUDA_VISIBLE_DEVICES, not both")

    cores = environment.local_cores()
    if plan.launcher == "srun" and env.get("SLURM_CPUS_ON_NODE", "").isdigit():
        cores = int(env["SLURM_CPUS_ON_NODE"])
    threads = str(max(1, cores // max(1, ranks_per_node)))
    passed = [(n, None) for n in environment.passthrough_names(env)
              if not (n == "CUDA_VISIBLE_DEVICES" and (plan.host_cvd or local_cvd is not None))]
    defaults = [(n, threads) for n in environment.THREAD_VARS if n not in env]
    team = _team_size(env, user_env, threads)
    if "OMP_WAIT_POLICY" not in env and "OMP_WAIT_POLICY" not in user_names and team * max(1, ranks_per_node) > cores:
        defaults.append(("OMP_WAIT_POLICY", "PASSIVE"))
    if local_cvd is not None:
        defaults.append(("CUDA_VISIBLE_DEVICES", local_cvd))
    plan.env = _merge_env([passed, defaults, user_env])
    plan.no_cma = plan.launcher == "mpirun" and environment.cma_blocked()
    return plan


def build_argv(plan):
    if plan.launcher == "mpirun":
        return commands.mpirun_argv(plan)
    try:
        return commands.srun_argv(plan)
    except ValueError as e:
        raise LaunchError("--launcher srun: %s in this selection; srun gives every node the same layout "
                          "(use --launcher mpirun, or --num-gpus to even it out)" % e)


_VALUE_OPTIONS = {"-n": 1, "--num-procs": 1, "-H": 1, "--hostfile": 1, "-i": 1, "--include": 1, "-e": 1,
                  "--exclude": 1, "--num-nodes": 1, "--num_nodes": 1, "--num-gpus": 1, "--num_gpus": 1,
                  "--launcher": 1, "--env": 1, "--export": 1, "--env-file": 1, "--mca": 2}


def _join_launcher_args(argv):
    """'--launcher-args --tag-output' -> '--launcher-args=--tag-output': argparse would otherwise read a
    value starting with '-' as an option. Stops at the program (first word that is not an option or
    an option's value) or at '--', so the program's own arguments are never touched."""
    out = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-"):
            return out + argv[i:]
        if word in ("--launcher-args", "--launcher_args") and i + 1 < len(argv):
            out.append("%s=%s" % (word, argv[i + 1]))
            i += 2
            continue
        take = _VALUE_OPTIONS.get(word, 0)
        out += argv[i:i + 1 + take]
        i += 1 + take
    return out


def main(argv=None, env=None):
    """Returns the exit code when it does not exec (dry run, bad input); argv/env default to the process's."""
    env = dict(os.environ) if env is None else env
    try:
        args = build_parser().parse_args(_join_launcher_args(sys.argv[1:] if argv is None else argv))
        plan = make_plan(args, env)
        cmd = build_argv(plan)
    except LaunchError as e:
        print("zt-launch: error: %s" % e, file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 -- never a traceback: a clean line and exit 1 (internal error)
        print("zt-launch: internal error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 1
    line = " ".join(shlex.quote(w) for w in cmd)
    if args.dry_run:
        print(line)
        return 0
    if not shutil.which(plan.launcher_exe, path=env.get("PATH")):
        print("zt-launch: error: '%s' not found on PATH (%s)" % (plan.launcher_exe, "install OpenMPI, or set ZT_MPIRUN "
              "to mpirun's path" if plan.launcher == "mpirun" else "srun runs inside a Slurm allocation"),
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.quiet:
        print("zt-launch: %s" % line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execvp(cmd[0], cmd)  # mpirun/srun replaces us: its exit code and signals are the job's
