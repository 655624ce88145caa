"""Turns a launch plan into the exact mpirun or srun argv.

mpirun (OpenMPI 4): one app context, or one per host ("prog : prog", MPMD) when hosts need different
CUDA_VISIBLE_DEVICES. OpenMPI applies `-x` per app context, so every context repeats the common
`-x` list; global options (--allow-run-as-root, --oversubscribe, --bind-to, --mca) go once, first.
srun: --export=ALL,NAME=VALUE,...; values containing ',' cannot be written inside --export, so they
go in front as `env NAME=VALUE` (srun passes the whole environment with ALL).
"""


class Plan:
    """Everything the command depends on. env is an ordered list of (name, value); value None means
    "pass this variable's current value". host_cvd maps host -> CUDA_VISIBLE_DEVICES for that host
    (empty when the launching environment's value, if any, is passed unchanged)."""

    def __init__(self):
        self.launcher = "mpirun"
        self.launcher_exe = "mpirun"
        self.program = []
        self.nprocs = 1
        self.selection = None  # None: one local node, no --host; else [(host, [slot indices])]
        self.nodes = None  # srun --nodes when no hostfile
        self.ntasks_per_node = None  # srun --ntasks-per-node when no hostfile
        self.local_only = True
        self.env = []
        self.host_cvd = {}
        self.mca = []
        self.extra_args = []
        self.as_root = False
        self.no_cma = False


def _x_args(env):
    out = []
    for name, value in env:
        out += ["-x", name if value is None else "%s=%s" % (name, value)]
    return out


def mpirun_argv(plan):
    argv = [plan.launcher_exe]
    if plan.as_root:
        argv.append("--allow-run-as-root")
    if plan.local_only:
        argv.append("--oversubscribe")
    argv += ["--bind-to", "none"]
    mca = list(plan.mca)
    if plan.no_cma and not any(k == "btl_vader_single_copy_mechanism" for k, _ in mca):
        mca.append(("btl_vader_single_copy_mechanism", "none"))
    for key, value in mca:
        argv += ["--mca", key, value]
    argv += plan.extra_args

    cvd_values = {plan.host_cvd.get(h) for h, _ in plan.selection} if plan.selection else {None}
    if plan.selection is None or len(cvd_values) == 1:
        env = list(plan.env)
        cvd = cvd_values.pop()
        if cvd is not None:
            env.append(("CUDA_VISIBLE_DEVICES", cvd))
        argv += ["-np", str(plan.nprocs)]
        if plan.selection is not None:
            argv += ["--host", ",".join("%s:%d" % (h, len(s)) for h, s in plan.selection)]
        return argv + _x_args(env) + plan.program

    for i, (host, slots) in enumerate(plan.selection):
        if i:
            argv.append(":")
        env = list(plan.env) + [("CUDA_VISIBLE_DEVICES", plan.host_cvd[host])]
        argv += ["-np", str(len(slots)), "--host", "%s:%d" % (host, len(slots))] + _x_args(env) + plan.program
    return argv


def srun_argv(plan):
    """Raises ValueError (the caller words it) when the selection cannot be written for srun."""
    prefix = []
    exports = ["ALL"]
    env = [(n, v) for n, v in plan.env if v is not None]
    cvds = {plan.host_cvd.get(h) for h, _ in plan.selection} if plan.selection else {None}
    if len(cvds) > 1:
        raise ValueError("hosts need different CUDA_VISIBLE_DEVICES")
    cvd = cvds.pop()
    if cvd is not None:
        env.append(("CUDA_VISIBLE_DEVICES", cvd))
    for name, value in env:
        if "," in value:
            prefix.append("%s=%s" % (name, value))
        else:
            exports.append("%s=%s" % (name, value))
    argv = (["env"] + prefix if prefix else []) + [plan.launcher_exe, "--ntasks", str(plan.nprocs)]
    if plan.selection is not None:
        counts = {len(s) for _, s in plan.selection}
        if len(counts) > 1:
            raise ValueError("hosts have different numbers of ranks")
        argv += ["--nodes", str(len(plan.selection)), "--nodelist", ",".join(h for h, _ in plan.selection),
                 "--ntasks-per-node", str(counts.pop())]
    else:
        if plan.nodes is not None:
            argv += ["--nodes", str(plan.nodes)]
        if plan.ntasks_per_node is not None:
            argv += ["--ntasks-per-node", str(plan.ntasks_per_node)]
    argv += plan.extra_args
    argv.append("--export=" + ",".join(exports))
    return argv + plan.program
