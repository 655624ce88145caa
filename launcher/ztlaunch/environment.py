"""What the launching machine looks like (cores, GPUs, host names) and which variables reach ranks."""
import ctypes
import errno
import os
import re
import shutil
import socket
import subprocess

from .errors import LaunchError, read_text_file

# Variables passed to every rank when set here: exact names, then name prefixes. OMPI_* are left
# out on purpose: mpirun reads OMPI_MCA_* itself and sets OMPI_COMM_WORLD_* per rank.
PASS_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
              "CUDA_LAUNCH_BLOCKING", "TMPDIR")
PASS_PREFIXES = ("NCCL_", "ZT_", "OMP_", "OPENBLAS_", "UCX_", "GOMP_")

# Thread variables the launcher sets when the user did not.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def passthrough_names(env):
    return sorted(k for k in env if k in PASS_NAMES or k.startswith(PASS_PREFIXES))


def _cgroup_cpu_limit():
    """CPUs allowed by a cgroup quota (v2 cpu.max or v1 cfs), rounded up; None when unlimited."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            return max(1, -(-int(quota) // int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        return max(1, -(-quota // period)) if quota > 0 else None
    except (OSError, ValueError):
        return None


def local_cores():
    """Cores this process may use: CPU affinity, capped by a cgroup quota (containers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    limit = _cgroup_cpu_limit()
    return max(1, min(cores, limit) if limit else cores)


def parse_visible_devices(value):
    """CUDA_VISIBLE_DEVICES entries as CUDA reads them: up to the first invalid one ('' -> none)."""
    out = []
    for tok in value.split(","):
        tok = tok.strip()
        if not re.fullmatch(r"[0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9A-Za-z/-]+", tok):
            break
        out.append(tok)
    return out


def visible_gpus(env):
    """Device ids (as CUDA_VISIBLE_DEVICES would name them) visible on this machine.

    CUDA_VISIBLE_DEVICES wins when set; otherwise `nvidia-smi -L` counts GPUs; none without it.
    """
    if "CUDA_VISIBLE_DEVICES" in env:
        return parse_visible_devices(env["CUDA_VISIBLE_DEVICES"])
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10,
                             universal_newlines=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return [str(i) for i in range(count)]


def is_local_host(host):
    name = socket.gethostname()
    return host in ("localhost", "127.0.0.1", "::1", name, name.split(".")[0])


def cma_blocked():
    """True when process_vm_readv is refused (seccomp in containers), which breaks OpenMPI's vader
    single-copy transfers ("Read -1, expected N, errno = 1"). Probed on this process itself: a
    refusal here can only come from the syscall being filtered, not from ptrace permissions."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.process_vm_readv
    except (OSError, AttributeError):
        return False

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    src = ctypes.create_string_buffer(b"zt", 2)
    dst = ctypes.create_string_buffer(2)
    local = IoVec(ctypes.cast(dst, ctypes.c_void_p), 2)
    remote = IoVec(ctypes.cast(src, ctypes.c_void_p), 2)
    fn.restype = ctypes.c_ssize_t
    got = fn(os.getpid(), ctypes.byref(local), ctypes.c_ulong(1), ctypes.byref(remote), ctypes.c_ulong(1),
             ctypes.c_ulong(0))
    return got < 0 and ctypes.get_errno() in (errno.EPERM, errno.ENOSYS, errno.EACCES)


def parse_env_assignment(text, flag):
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise LaunchError("%s '%s': expected NAME=VALUE with NAME a shell variable name" % (flag, text))
    return name, value


def read_env_file(path):
    """KEY=VALUE lines ('#' comments, blank lines, optional 'export ' prefix) like .deepspeed_env."""
    lines = read_text_file(path, "--env-file").splitlines()
    out = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        out.append(parse_env_assignment(line, "--env-file %s:%d" % (path, lineno)))
    return out
