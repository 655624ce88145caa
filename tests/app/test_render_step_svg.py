"""scripts/render_step_svg.py on a freshly produced trace: a 2-step, 2-rank stage-2 overlap_comm run
with --trace. The SVG must parse (xml.etree), hold one lane per rank x stream (compute, comm,
copy), one box per slice of the drawn step and one arrow per `grads ready` flow, all inside the
picture; --fastest draws exactly one of the traced steps. Malformed traces, a step the trace does
not hold and an unwritable --out exit 2 with a message naming the input, never a traceback."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

REPO = os.environ.get("ZT_REPO", ".")
BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]
SCRIPT = os.path.join(REPO, "scripts", "render_step_svg.py")
SVG = "{http://www.w3.org/2000/svg}"


def render(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=120)


class RenderStepSvg(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        model, cfg = os.path.join(d, "gpt.json"), os.path.join(d, "ds.json")
        with open(model, "w") as f:
            json.dump({"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}, f)
        with open(cfg, "w") as f:
            json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
                       "zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 3000},
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
        p = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", cfg, "--model", model,
                                                    "--data", "markov:vocab=64,order=1,seed=3", "--steps", "2",
                                                    "--trace", os.path.join(d, "trace")],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        cls.trace = os.path.join(d, "trace", "trace.json")
        with open(cls.trace) as f:
            doc = json.load(f)
        cls.events = doc["traceEvents"] if isinstance(doc, dict) else doc

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_bad_input(self, p, names):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(names, p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def parse(self, path):
        root = ET.parse(path).getroot()
        self.assertEqual(root.tag, SVG + "svg")
        return root

    def slices_per_lane(self, step):
        """{(rank, lane): number of slices of `step`} from the trace itself."""
        want = {}
        for e in self.events:
            if e["ph"] == "X" and e["args"]["step"] == step:
                key = (str(e["pid"]), {0: "compute", 1: "comm", 2: "copy"}[e["tid"]])
                want[key] = want.get(key, 0) + 1
        return want

    def assert_boxes_inside(self, boxes, width, height):
        for b in boxes:
            x, w = float(b.get("x")), float(b.get("width"))
            self.assertTrue(0 <= x and x + w <= width + 0.01 and float(b.get("y")) < height, b.attrib)
            self.assertRegex(b.find(SVG + "title").text, r"^.+: \d+\.\d{3} ms at \d+\.\d{3} ms$")

    def test_one_step_has_the_lanes_boxes_and_arrows(self):
        out = os.path.join(self.tmp.name, "step2.svg")
        r = render(self.trace, "--steps", "2", "--out", out, "--title", "stage 2 & <overlap>")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        root = self.parse(out)
        width, height = float(root.get("width")), float(root.get("height"))
        lanes = [g for g in root.iter(SVG + "g") if g.get("class") == "lane"]
        self.assertEqual(sorted((g.get("data-rank"), g.get("data-lane")) for g in lanes),
                         sorted((str(r), lane) for r in (0, 1) for lane in ("compute", "comm", "copy")))
        # One box per slice of step 2, on its rank's lane; the copy lanes are empty without offload.
        want = self.slices_per_lane(2)
        for g in lanes:
            boxes = [b for b in g.iter(SVG + "rect") if b.get("class") == "slice"]
            self.assertEqual(len(boxes), want.get((g.get("data-rank"), g.get("data-lane")), 0), g.attrib)
            self.assert_boxes_inside(boxes, width, height)
        self.assertGreater(want[("0", "comm")], 0)
        # Stage 2 hands buckets to the comm stream inside the backward: at least one arrow per rank.
        flows = [ln for ln in root.iter(SVG + "line") if ln.get("class") == "flow"]
        self.assertGreaterEqual(len(flows), 2)
        self.assertRegex(r.stdout, r"\d+ slices, %d flow arrows, 6 lanes" % len(flows))
        texts = [t.text for t in root.iter(SVG + "text")]
        self.assertIn("stage 2 & <overlap>", texts)  # escaped in the file, intact once parsed
        self.assertTrue(any(t and t.startswith("step 2, ") for t in texts), texts)

    def test_fastest_draws_one_traced_step(self):
        out = os.path.join(self.tmp.name, "fastest.svg")
        r = render(self.trace, "--fastest", "--out", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        sub = [t.text for t in self.parse(out).iter(SVG + "text") if t.text and re.match(r"step \d+, ", t.text)]
        self.assertEqual(len(sub), 1)
        self.assertRegex(sub[0], r"^step [12], ")
        n = int(re.search(r"(\d+) slices", r.stdout).group(1))
        step = int(sub[0].split()[1].rstrip(","))
        self.assertEqual(n, sum(1 for e in self.events if e["ph"] == "X" and e["args"]["step"] == step))

    def test_skewed_rank_clocks_are_aligned_on_the_collectives(self):
        # Rank 1's clock runs 5 ms behind: its all-reduce would end before rank 0 entered it.
        def ev(pid, tid, name, ts, dur, **args):
            return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur,
                    "args": dict(step=1, **args)}
        meta = [{"ph": "M", "name": "process_name", "pid": r, "args": {"name": "rank %d" % r}} for r in (0, 1)]
        meta += [{"ph": "M", "name": "thread_name", "pid": r, "tid": t, "args": {"name": n}}
                 for r in (0, 1) for t, n in enumerate(("compute", "comm", "copy"))]
        events = meta + [ev(0, 0, "bwd u0", 9000, 1000), ev(0, 1, "all_reduce b0", 10000, 100, op="all_reduce", seq=7),
                         ev(1, 0, "bwd u0", 4000, 1000), ev(1, 1, "all_reduce b0", 5000, 100, op="all_reduce", seq=7)]
        path = os.path.join(self.tmp.name, "skewed.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        out = os.path.join(self.tmp.name, "skewed.svg")

        def boxes(*flags):
            r = render(path, "--out", out, *flags)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            root = self.parse(out)
            sub = [t.text for t in root.iter(SVG + "text") if t.text and t.text.startswith("step 1,")][0]
            xs = {}
            for g in root.iter(SVG + "g"):
                for b in g.iter(SVG + "rect"):
                    if b.get("class") == "slice":
                        xs[(g.get("data-rank"), g.get("data-lane"))] = float(b.get("x"))
            return sub, xs

        sub, xs = boxes()
        # The least shift that makes the collective causal: rank 0 enters at 10000, rank 1 leaves at 5100.
        self.assertIn("rank 1's clock +4.900 ms", sub)
        self.assertLess(abs(xs[("0", "comm")] - xs[("1", "comm")]) / abs(xs[("0", "comm")] - xs[("0", "compute")]),
                        0.11)  # 100 µs apart where the unit is 1000 µs long
        sub, xs = boxes("--raw-clocks")
        self.assertNotIn("aligned", sub)
        self.assertLess(xs[("1", "comm")], xs[("0", "compute")])  # as recorded: rank 1 entirely earlier

    def test_bad_inputs_exit_2(self):
        d = self.tmp.name
        self.assert_bad_input(render(self.trace, "--steps", "5:6", "--out", os.path.join(d, "x.svg")), self.trace)
        self.assert_bad_input(render(self.trace, "--steps", "x"), "--steps")
        self.assert_bad_input(render(self.trace, "--width", "10"), "--width")
        self.assert_bad_input(render(self.trace, "--out", os.path.join(d, "no", "dir", "x.svg")), "--out")
        truncated = os.path.join(d, "truncated.json")
        with open(truncated, "w") as f:
            f.write('{"traceEvents": [{"ph": "X", "name": "fwd u0", "ts": 1')
        self.assert_bad_input(render(truncated), truncated)
        missing = os.path.join(d, "missing.json")
        self.assert_bad_input(render(missing), missing)


if __name__ == "__main__":
    unittest.main()
