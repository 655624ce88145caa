"""Every ```sh block of README.md and docs/*.md runs as written, as root, on this machine.

Each block runs as one `bash -e` script in a fresh directory where the repository's folders are
linked in (so relative paths work and outputs stay out of the checkout), with Open MPI's
run-as-root variables removed: a documented `mpirun` without `--allow-run-as-root` fails here as
it would for a user who is root.

Smoke mode (the only changes made to a command): sweep and benchmark repeat counts drop to 1,
rank lists to their first entry, stage lists to stage 2, message sizes to at most 1M, and
`apt-get install` lines are not run (they would install packages; the blocks say what for).
A block is skipped only when the line just above its fence says why:
    <!-- docs-test: skip: REASON -->
or when it needs an optional tool that is absent (the test prints which):
    <!-- docs-test: needs: torch|perf|matplotlib|gpu|netns -->
(netns: the privilege to build tests/multinode's emulated cluster)
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.environ.get("ZT_REPO", "."))
LINKED = ["build", "configs", "launcher", "benchmarks", "scripts", "tests", "docs", "include", "csrc"]
FENCE = re.compile(r"^( *)```sh\n(.*?)^\1```", re.S | re.M)
MARK = re.compile(r"<!-- docs-test: (skip|needs): (.*?) -->\s*$")
SMOKE = [
    (re.compile(r"--(repeats|rounds) \d+"), r"--\1 1"),
    (re.compile(r"--ranks (\d+)(,\d+)+"), r"--ranks \1"),
    (re.compile(r"--stages [0-3](,[0-3])+"), "--stages 2"),
    (re.compile(r"--max-bytes \d+[KMG]?"), "--max-bytes 1M"),
    (re.compile(r"for np in [0-9 ]+;"), "for np in 2 3;"),
    (re.compile(r"for run in [0-9 ]+;"), "for run in 1;"),
]


def blocks():
    docs = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
    for path in ["README.md"] + docs:
        with open(os.path.join(REPO, path)) as f:
            text = f.read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            above = text[:m.start()].rstrip("\n").splitlines()
            mark = MARK.search(above[-1]) if above else None
            body = "\n".join(ln[len(m.group(1)):] for ln in m.group(2).splitlines())
            yield f"{path}:{line}", body, mark


def available(tool):
    if tool == "torch":
        return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    if tool == "matplotlib":  # the python3 on PATH, which the documented command runs
        return subprocess.run(["python3", "-c", "import matplotlib"], capture_output=True).returncode == 0
    if tool == "gpu":
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0 if shutil.which(
            "nvidia-smi") else False
    if tool == "netns":
        probe = [os.path.join(REPO, "tests", "multinode", "emulated-cluster.sh"), "--probe"]
        return subprocess.run(probe, capture_output=True).returncode == 0
    return shutil.which(tool) is not None


def smoke(body):
    lines = []
    for ln in body.splitlines():
        if re.match(r"\s*(sudo )?apt-get install", ln):
            lines.append("# (docs test: not run) " + ln)
            continue
        for pattern, repl in SMOKE:
            ln = pattern.sub(repl, ln)
        lines.append(ln)
    return "\n".join(lines) + "\n"


class DocsCommands(unittest.TestCase):
    def test_every_sh_block_runs(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
        env.pop("OMPI_MCA_mpi_yield_when_idle", None)
        failures, ran = [], 0
        for where, body, mark in blocks():
            if mark and mark.group(1) == "skip":
                print(f"skip {where}: {mark.group(2)}", flush=True)
                continue
            if mark and mark.group(1) == "needs":
                missing = [t for t in mark.group(2).split("|") if not available(t.strip())]
                if missing:
                    print(f"skip {where}: needs {', '.join(missing)}, which this machine lacks", flush=True)
                    continue
            with tempfile.TemporaryDirectory() as d:
                for name in LINKED:
                    os.symlink(os.path.join(REPO, name), os.path.join(d, name))
                script = smoke(body)
                # Own process group: a block that runs past the limit is killed with everything it started.
                p = subprocess.Popen(["bash", "-e", "-c", script], cwd=d, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    out = p.communicate(timeout=400)[0].decode("utf-8", "replace")
                    rc = p.returncode
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    out = p.communicate()[0].decode("utf-8", "replace")
                    rc = "timeout (400 s)"
                ran += 1
                print(f"ran  {where}: exit {rc}", flush=True)
                if rc != 0:
                    failures.append(f"{where} exited {rc}:\n{script}\n--- output (tail) ---\n{out[-1500:]}")
        self.assertGreater(ran, 5)
        self.assertEqual(failures, [], "\n\n".join(failures))

    def test_no_block_forces_an_instruction_set(self):
        # OPENBLAS_CORETYPE=SkylakeX dies with SIGILL on an AVX2-only CPU: never in a command.
        for where, body, _ in blocks():
            self.assertNotRegex(body, r"OPENBLAS_CORETYPE=(SkylakeX|Cooperlake|SapphireRapids)", where)
            self.assertNotIn("-march=native", body, where)


if __name__ == "__main__":
    unittest.main(verbosity=2)
