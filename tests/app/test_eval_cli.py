"""Validation in `zerotrain train` (CPU backend, mpirun): --eval-data, --eval-every, --eval-batches,
--keep-best, --early-stop, and the text:/tokens: holdout split.

* The validation loss appears on the progress line, as "val_loss" in the metrics JSONL (null on
  steps without an evaluation) and in csv_monitor's val_loss file, on every N-th step and the last.
* It equals an independent computation, the training forward: a 1-step run whose training data is
  the validation data reports, for its first step (the weights before any update), the loss the
  evaluation of those weights reports (--steps 0), at stages 0-3 on 2 ranks and at 1 and 4 ranks.
* It equals a separate evaluation of the same weights: a fresh run resumed from the checkpoint
  with nothing left to train prints the same value (same world size: bitwise; another: 1e-6).
* With unchanged weights (lr 0) every evaluation gives the same loss, so the first one is the best:
  DIR/best is written once, records it in meta.json, --early-stop P stops after P more
  evaluations with the message and exit 0, the final checkpoint is saved, and
  --resume DIR --tag best works.
* With training, DIR/best is rewritten exactly on the steps whose val loss improved.
* A resumed run continues the validation state (best loss and step, --early-stop's count) from
  the checkpoint: it stops where the uninterrupted run stops and records the same best.
* Bad flags and bad validation data exit 2 with a message naming them.
* The evaluation uses the training activation buffers: the memory report's predicted bytes still
  equal the measured ones.
"""
import csv
import glob
import json
import os
import re
import subprocess
import unittest

from e2e_case import TempDirCase

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
DATA = "markov:vocab=64,order=1,seed=3"
EVAL = "markov:vocab=64,order=1,seed=3,temperature=0.5"  # the same chain, its own batches 0..K-1
VAL_LINE = re.compile(r"^step +(\d+) \| (?:loss [0-9.naif]+ \| )?val loss ([0-9.]+|nan|inf)", re.M)


def config(stage, lr=1e-2, csv_dir=None):
    """Global batch 8 of micro-batches of 2: gradient accumulation 2 on 2 ranks, 4 on 1."""
    c = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
         "zero_optimization": {"stage": stage, "reduce_bucket_size": 2000, "stage3_param_persistence_threshold": 64},
         "optimizer": {"type": "AdamW", "params": {"lr": lr}}}
    if csv_dir:
        c["csv_monitor"] = {"enabled": True, "output_path": csv_dir, "job_name": "job"}
    return c


class EvalCli(TempDirCase):
    def run_train(self, cfg, args, ranks=2, expect=0):
        cmd = [MPIEXEC, "-np", str(ranks)] + MPI_FLAGS + [
            BIN, "train", "--config", self.write("ds_%d.json" % abs(hash(json.dumps(cfg))), cfg), "--model", self.model,
            "--data", DATA, "--device", "cpu"] + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, expect, out)
        return out

    def val_lines(self, out):
        return {int(s): float(v) for s, v in VAL_LINE.findall(out)}

    def metrics(self, path):
        with open(path) as f:
            return [json.loads(line) for line in f]

    def test_outputs_and_fresh_evaluation(self):
        ck = os.path.join(self.d, "ck")
        m = os.path.join(self.d, "m.jsonl")
        out = self.run_train(config(3, csv_dir=self.d), [
            "--steps", "5", "--eval-data", EVAL, "--eval-every", "2", "--eval-batches", "3", "--metrics", m,
            "--save-checkpoint", ck, "--save-every", "2", "--log-every", "100"])
        self.assertIn("validation: markov", out)
        vals = self.val_lines(out)
        self.assertEqual(sorted(vals), [2, 4, 5], out)
        rows = self.metrics(m)
        self.assertEqual([r["step"] for r in rows], [1, 2, 3, 4, 5])
        for r in rows:
            if r["step"] in vals:
                self.assertAlmostEqual(r["val_loss"], vals[r["step"]], places=6)
            else:
                self.assertIsNone(r["val_loss"], r)
        with open(os.path.join(self.d, "job", "Train_Samples_val_loss.csv"), newline="") as f:
            csv_rows = list(csv.reader(f))
        self.assertEqual(csv_rows[0], ["step", "val_loss"])
        self.assertEqual([int(r[0]) for r in csv_rows[1:]], [16, 32, 40])  # global samples
        for r in csv_rows[1:]:
            self.assertEqual(float(r[1]), rows[int(r[0]) // 8 - 1]["val_loss"])
        # A fresh engine loaded from the step-4 checkpoint evaluates the same weights to the same loss.
        again = self.run_train(config(3), ["--steps", "4", "--resume", ck, "--tag", "global_step4",
                                           "--eval-data", EVAL, "--eval-every", "2", "--eval-batches", "3"])
        self.assertIn("nothing to train", again)
        self.assertEqual(self.val_lines(again), {4: vals[4]}, again)
        # At another stage and world size (resharded load): the same up to the summation order.
        other = self.run_train(config(1), ["--steps", "4", "--resume", ck, "--tag", "global_step4",
                                           "--eval-data", EVAL, "--eval-every", "2", "--eval-batches", "3"], ranks=1)
        self.assertAlmostEqual(self.val_lines(other)[4], vals[4], delta=1e-6 * vals[4])

    def test_unchanged_weights_keep_best_early_stop(self):
        ck = os.path.join(self.d, "ck")
        m = os.path.join(self.d, "m.jsonl")
        out = self.run_train(config(2, lr=0.0), [
            "--steps", "20", "--eval-data", EVAL, "--eval-every", "1", "--eval-batches", "2", "--metrics", m,
            "--save-checkpoint", ck, "--keep-best", "--early-stop", "3"])
        vals = self.val_lines(out)
        self.assertEqual(sorted(vals), [1, 2, 3, 4], out)  # stopped after 3 evaluations without improvement
        self.assertEqual(len(set(vals.values())), 1, vals)  # the same batches, the same weights: one loss
        self.assertIn("early stop: val loss has not improved for 3 evaluations (best %.6f at step 1)" % vals[1], out)
        self.assertEqual(out.count("saved checkpoint " + os.path.join(ck, "best")), 1, out)
        self.assertEqual([r["step"] for r in self.metrics(m)], [1, 2, 3, 4])
        with open(os.path.join(ck, "latest")) as f:
            self.assertEqual(f.read().strip(), "global_step4")  # the final checkpoint, as usual
        with open(os.path.join(ck, "best", "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["steps"]["global_steps"], 1)
        self.assertEqual(meta["validation"]["best_step"], 1)
        self.assertAlmostEqual(meta["validation"]["best_loss"], vals[1], places=6)
        with open(os.path.join(ck, "global_step4", "meta.json")) as f:
            self.assertEqual(json.load(f)["validation"]["best_step"], 1)
        resumed = self.run_train(config(2, lr=0.0), ["--steps", "2", "--resume", ck, "--tag", "best",
                                                     "--eval-data", EVAL, "--eval-every", "1", "--eval-batches", "2"])
        self.assertIn("resumed from " + os.path.join(ck, "best") + ": step 1", resumed)
        self.assertEqual(self.val_lines(resumed), {2: vals[1]}, resumed)

    def test_keep_best_rewrites_on_improvement_only(self):
        ck = os.path.join(self.d, "ck")
        m = os.path.join(self.d, "m.jsonl")
        out = self.run_train(config(1, lr=1e-2), [
            "--steps", "8", "--eval-data", EVAL, "--eval-every", "1",
            "--eval-batches", "2", "--metrics", m, "--save-checkpoint", ck, "--keep-best"])
        vals = [r["val_loss"] for r in self.metrics(m)]
        improved, best = [], float("inf")
        for step, v in enumerate(vals, 1):
            if v < best:
                best = v
                improved.append(step)
        self.assertTrue(2 <= len(improved) < len(vals), vals)  # this run improves, then does not
        saves = [int(s) for s in re.findall(r"best val loss so far \(step (\d+)\): saved checkpoint", out)]
        self.assertEqual(saves, improved, out)
        with open(os.path.join(ck, "best", "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["validation"]["best_step"], improved[-1])
        self.assertEqual(meta["steps"]["global_steps"], improved[-1])

    def test_resume_continues_best_and_early_stop(self):
        """A run stopped and resumed keeps the uninterrupted run's best and stops where it stops."""
        ev = ["--eval-data", EVAL, "--eval-every", "1", "--eval-batches", "2"]
        # Unchanged weights: the first evaluation stays the best; --early-stop 4 ends after step 5.
        whole = self.run_train(config(2, lr=0.0), ["--steps", "20", "--early-stop", "4"] + ev)
        self.assertEqual(sorted(self.val_lines(whole)), [1, 2, 3, 4, 5], whole)
        reason = re.search(r"early stop: .*", whole).group(0)
        ck = os.path.join(self.d, "ck_patience")
        self.run_train(config(2, lr=0.0), ["--steps", "3", "--save-checkpoint", ck] + ev)
        with open(os.path.join(ck, "global_step3", "meta.json")) as f:
            v = json.load(f)["validation"]
        self.assertEqual((v["best_step"], v["evals_since_best"], v["eval_batches"]), (1, 2, 2), v)
        resumed = self.run_train(config(2, lr=0.0), ["--steps", "20", "--resume", ck, "--early-stop", "4"] + ev)
        self.assertIn("validation: continues from the checkpoint: best val loss %.6f at step 1, 2 evaluation(s) since"
                      % self.val_lines(whole)[1], resumed)
        self.assertEqual(sorted(self.val_lines(resumed)), [4, 5], resumed)
        self.assertIn(reason, resumed)
        # Training: DIR/best and the final meta.json record the same best, bitwise, as the
        # uninterrupted run; DIR/best is rewritten on the same steps after the resume.
        runs = {}
        for name, plan in [("whole", [["--steps", "8"]]), ("split", [["--steps", "4"], ["--steps", "8", "--resume"]])]:
            ck = os.path.join(self.d, "ck_" + name)
            outs = ""
            for args in plan:
                args = args + [ck] if args[-1] == "--resume" else args
                outs += self.run_train(config(1, lr=1e-2), args + ["--save-checkpoint", ck, "--keep-best"] + ev)
            with open(os.path.join(ck, "best", "meta.json")) as f:
                best = json.load(f)["validation"]
            with open(os.path.join(ck, "global_step8", "meta.json")) as f:
                final = json.load(f)["validation"]
            saves = [int(s) for s in re.findall(r"best val loss so far \(step (\d+)\)", outs)]
            runs[name] = (best, final, saves)
        self.assertEqual(runs["split"][0], runs["whole"][0])
        self.assertEqual(runs["split"][1], runs["whole"][1])
        self.assertEqual(runs["split"][2], runs["whole"][2])
        self.assertGreater(runs["whole"][1]["evals_since_best"] + runs["whole"][1]["best_step"], 0)
        # Other validation batches: the checkpoint's best is not comparable, so it starts afresh.
        other = self.run_train(config(1, lr=1e-2), ["--steps", "9", "--resume", os.path.join(self.d, "ck_whole"),
                                                    "--eval-data", EVAL, "--eval-every", "1", "--eval-batches", "3"])
        self.assertIn("the best val loss and --early-stop's count start afresh", other)

    def test_memory_prediction_holds_with_evaluation(self):
        rep = os.path.join(self.d, "mem.json")
        self.run_train(config(3), ["--steps", "2", "--eval-data", EVAL, "--eval-every", "1", "--memory-report", rep])
        with open(rep) as f:
            report = json.load(f)
        checked = 0
        for r in report["ranks"]:
            for name, c in r["categories"].items():
                if c["predicted_bytes"] is not None and name in ("activations", "gather", "params", "grads"):
                    self.assertEqual(c["measured_bytes"] if name != "gather" else c["peak_bytes"],
                                     c["predicted_bytes"], (r["rank"], name))
                    checked += 1
        self.assertGreater(checked, 0)

    def test_val_loss_equals_the_training_forward(self):
        step1 = re.compile(r"^step +1 \| loss ([0-9.]+)", re.M)
        other = "markov:vocab=64,order=1,seed=11"
        for stage, ranks in ((0, 2), (1, 2), (2, 2), (3, 2), (3, 1), (2, 4)):
            cfg = self.write("fwd_%d_%d.json" % (stage, ranks), config(stage))
            base = [MPIEXEC, "-np", str(ranks)] + MPI_FLAGS + [BIN, "train", "--config", cfg, "--model", self.model,
                                                                 "--device", "cpu"]
            # global batch 0 of `other` as training data (the loss is computed before the update)...
            p = subprocess.run(base + ["--data", other, "--steps", "1"], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            trained = float(step1.search(p.stdout).group(1))
            # ...and as validation data, evaluated on the same initial weights
            p = subprocess.run(base + ["--data", DATA, "--eval-data", other, "--eval-every", "1", "--eval-batches", "1",
                                       "--steps", "0"], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            evaluated = self.val_lines(p.stdout)[0]
            self.assertAlmostEqual(evaluated, trained, delta=1e-6 * trained, msg="stage %d, %d ranks" % (stage, ranks))

    def test_holdout_split(self):
        text = self.write("text.txt", "".join(chr(48 + (i * 7) % 10) for i in range(400)))
        spec = "text:%s,split=0.75" % text
        cmd = ["--steps", "1", "--eval-data", spec, "--eval-every", "1"]
        out = self.run_train(config(0), cmd + ["--data", spec], ranks=1)
        self.assertIn("300 tokens in its first 75% (split=0.75)", out)
        self.assertIn("100 tokens in its last 25% (split=0.75)", out)
        self.assertEqual(len(self.val_lines(out)), 1, out)

    def test_bad_flags_exit_2(self):
        text = self.write("short.txt", "x" * 40)
        cases = [
            (["--eval-data", EVAL, "--eval-every", "0"], "--eval-every '0'"),
            (["--eval-data", EVAL, "--eval-every", "2", "--eval-batches", "0"], "--eval-batches '0'"),
            (["--eval-every", "2"], "--eval-data SPEC and --eval-every N go together"),
            (["--eval-data", EVAL], "--eval-data SPEC and --eval-every N go together"),
            (["--keep-best", "--save-checkpoint", self.d], "need --eval-data SPEC --eval-every N"),
            (["--early-stop", "2"], "need --eval-data SPEC --eval-every N"),
            (["--eval-data", EVAL, "--eval-every", "2", "--keep-best"], "--save-checkpoint DIR is missing"),
            (["--eval-data", EVAL, "--eval-every", "2", "--early-stop", "0"], "--early-stop '0'"),
            (["--eval-data", "text:/nonexistent/val.txt", "--eval-every", "2"], "/nonexistent/val.txt"),
            (["--eval-data", "markov:vocab=999", "--eval-every", "2"], "--eval-data 'markov:vocab=999'"),
            (["--eval-data", "text:%s,split=1.5" % text, "--eval-every", "2"], "split must be a number between 0 and 1"),
            (["--eval-data", "text:%s,split=0.9" % text, "--eval-every", "2"], "fewer than n_ctx + 1"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                out = self.run_train(config(1), ["--steps", "2"] + args, expect=2)
                self.assertIn(message, out)


if __name__ == "__main__":
    unittest.main()
