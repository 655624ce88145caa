"""A CPU-backend run's resident memory: each rank of a 2-rank tiny-GPT run peaks (VmHWM, read
from /proc/<pid>/status while it runs) at no more than 64 MiB, and never maps cuBLAS — the CUDA
libraries a CPU run does not use are not loaded (cuBLASLt's initialisation alone is ~140 MiB).
The memory report's rows of the process's resident memory (libraries, MPI shared memory, heap
and anonymous, stack, other) add up to within 10% of the peak observed from outside."""
import json
import os
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")
LIMIT_KIB = 64 * 1024


def children_named(ppid, name):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # the executable, not comm: a rank that re-executes itself (OpenBLAS core choice) is "exe"
            comm = os.path.basename(os.readlink("/proc/%s/exe" % pid))
        except OSError:
            continue
        if int(fields[1]) == ppid and comm == name:
            out.append(int(pid))
    return out


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Rss(unittest.TestCase):
    def test_tiny_gpt_ranks_stay_under_64_mib(self):
        with tempfile.TemporaryDirectory() as d:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", BIN, "train", "--device", "cpu",
                   "--config", os.path.join(REPO, "configs/ds/stage2.json"),
                   "--model", os.path.join(REPO, "configs/models/gpt-tiny.json"), "--data", "markov:", "--steps", "300",
                   "--save-weights", os.path.join(d, "w.safetensors"), "--memory-report", os.path.join(d, "mem.json")]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            peak, maps_cublas, seen = {}, set(), set()
            while p.poll() is None:
                for pid in children_named(p.pid, "zerotrain"):
                    try:
                        peak[pid] = max(peak.get(pid, 0), status_kib(pid, "VmHWM"))
                        with open("/proc/%d/maps" % pid) as f:
                            if "libcublas" in f.read():
                                maps_cublas.add(pid)
                        seen.add(pid)
                    except OSError:
                        pass
                time.sleep(0.02)
            out = p.stdout.read()
            self.assertEqual(p.returncode, 0, out)
            with open(os.path.join(d, "mem.json")) as f:
                ranks = json.load(f)["ranks"]
        self.assertEqual(len(seen), 2, "did not find both ranks")
        print("VmHWM per rank: %s KiB (limit %d KiB)" % (sorted(peak.values()), LIMIT_KIB))
        self.assertFalse(maps_cublas, "a CPU run mapped cuBLAS")
        for pid, kib in peak.items():
            self.assertLessEqual(kib, LIMIT_KIB, "rank pid %d peaked at %d KiB" % (pid, kib))
        observed = max(peak.values()) * 1024
        for r in ranks:
            proc = r["process"]
            self.assertEqual(sum(proc["rows"].values()), proc["resident_bytes"])
            self.assertGreater(proc["rows"]["libraries"], 0)
            print("rank %d rows: %s" % (r["rank"], proc["rows"]))
            self.assertLess(abs(proc["resident_bytes"] - observed), 0.1 * observed,
                            "report rows %d B vs observed peak %d B" % (proc["resident_bytes"], observed))


if __name__ == "__main__":
    unittest.main()
