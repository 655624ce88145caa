"""benchmarks/trace/render_trace.py on a freshly produced trace: a 1-step, 2-rank stage-2 run with
--trace; the PNG is written and is a PNG when matplotlib is importable (otherwise the script exits
2 saying so, and the PNG part is skipped with a printed message). Malformed traces, a step the
trace does not hold and a missing file exit 2 with a message naming the input, never a traceback."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.environ.get("ZT_REPO", ".")
BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]
SCRIPT = os.path.join(REPO, "benchmarks", "trace", "render_trace.py")
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


def render(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=120)


class RenderTrace(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.d = tmp.name

    def write(self, name, text):
        path = os.path.join(self.d, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def assert_bad_input(self, p, names):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(names, p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_renders_a_fresh_trace(self):
        model = self.write("gpt.json", json.dumps({"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 2,
                                                   "n_head": 2, "n_embd": 32}))
        cfg = self.write("ds.json", json.dumps({
            "train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
            "zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 3000},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}))
        tdir = os.path.join(self.d, "trace")
        p = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", cfg, "--model", model,
                                                    "--data", "markov:vocab=64,order=1,seed=3", "--steps", "1",
                                                    "--trace", tdir], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        trace = os.path.join(tdir, "trace.json")
        png = os.path.join(self.d, "trace.png")
        r = render(trace, "--steps", "1", "--out", png)
        if not HAVE_MPL:
            self.assert_bad_input(r, "matplotlib not found")
            self.assertFalse(os.path.exists(png))
            print("matplotlib absent: PNG part skipped (apt-get install python3-matplotlib)")
            return
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        # 2 ranks x 3 lanes, and at least one grads-ready arrow (stage 2 reduces buckets in backward).
        self.assertRegex(r.stdout, r"\d+ slices, [1-9]\d* flow arrows, 6 rows")
        # A step the trace does not hold: exit 2 naming the trace.
        self.assert_bad_input(render(trace, "--steps", "5:6", "--out", png), trace)

    def test_malformed_traces_exit_2(self):
        truncated = self.write("truncated.json", '{"traceEvents": [{"ph": "X", "name": "fwd u0", "ts": 1')
        self.assert_bad_input(render(truncated, "--out", os.path.join(self.d, "a.png")), truncated)
        no_ts = self.write("no_ts.json", json.dumps({"traceEvents": [{"ph": "X", "name": "fwd u0", "dur": 3,
                                                                      "pid": 0, "tid": 0}]}))
        self.assert_bad_input(render(no_ts), no_ts)
        not_trace = self.write("not_trace.json", json.dumps({"rows": [1, 2]}))
        self.assert_bad_input(render(not_trace), not_trace)
        missing = os.path.join(self.d, "missing.json")
        self.assert_bad_input(render(missing), missing)
        self.assert_bad_input(render(no_ts, "--steps", "x"), "--steps")


if __name__ == "__main__":
    unittest.main()
