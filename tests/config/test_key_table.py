"""The key table (include/zerotrain/config/key_table.h), checked against real runs.

For every key of `zerotrain check-config --keys json` with a probe value (a non-default value):
  * check-config and a 3-step, 2-rank `train` with the probe give the same exit code;
  * rejected keys: both exit 2, naming the key;
  * not-used keys: the loss curve, the memory report and the comm log are unchanged, and both
    commands print the one "set but not used" warning naming the key; --explain tags it;
  * implemented keys: every observable the table names (L loss curve, M memory report, C comm log,
    O printed output) changes — or, for "=Suite.Test", that test exists.
Also: every leaf of every resolved document seen is a key of the table (completeness), and
docs/config-keys.md holds the table as `check-config --keys markdown` prints it.
"""
import concurrent.futures
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.path.abspath(os.environ.get("ZT_REPO", "."))
MODEL = os.path.join(REPO, "configs", "models", "gpt-tiny.json")
# No thread variables: zerotrain sizes its pools from the affinity mask and the local ranks.
MPI = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
       "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
BASE = {"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
        "zero_optimization": {"stage": 2}}


def merge(a, b):
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def set_path(doc, path, value):
    keys = path.split(".")
    d = doc
    for k in keys[:-1]:
        if not isinstance(d.get(k), dict):
            d[k] = {}
        d = d[k]
    d[keys[-1]] = value


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run(cmd, cwd=None):
    """cwd: the probe's directory, where relative output paths (the monitors' default) land."""
    p = subprocess.run(cmd, capture_output=True, timeout=120, cwd=cwd)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


class Observation:
    """What a 2-step run shows: exit code, loss curve, memory report, comm log, printed output."""

    def __init__(self, cfg, d):
        files = {k: os.path.join(d, k) for k in ("m.jsonl", "mr.json", "cl.jsonl")}
        self.rc, out, err = run(MPI + [BIN, "train", "--config", cfg, "--model", MODEL, "--data", "markov",
                                       "--steps", "3", "--seed", "7", "--metrics", files["m.jsonl"],
                                       "--memory-report", files["mr.json"], "--comm-log", files["cl.jsonl"]], cwd=d)
        self.err = err
        rows = read_jsonl(files["m.jsonl"])
        self.L = [(r.get("loss"), r.get("grad_norm"), r.get("lr"), r.get("loss_scale"), r.get("skipped"))
                  for r in rows]
        self.M = ""
        if os.path.exists(files["mr.json"]):
            with open(files["mr.json"]) as f:
                report = json.load(f)
            for rank in report.get("ranks", []):
                rank.pop("process", None)  # the process's resident memory: measured, differs run to run
            self.M = json.dumps(report, sort_keys=True)
        comm = read_jsonl(files["cl.jsonl"]) + read_jsonl(files["cl.jsonl"] + ".rank1")
        self.C = [(c["rank"], c["seq"], c["op"], c["bytes"], c["dtype"], c["label"]) for c in comm]
        lines = [ln for ln in (out + err).splitlines() if not ln.startswith("warning:")]
        self.O = [re.sub(r"[0-9]+", "#", ln) for ln in lines]


class KeyTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rc, out, err = run([BIN, "check-config", "--keys", "json"])
        assert rc == 0, err
        cls.table = json.loads(out)
        cls.paths = {e["path"] for e in cls.table}
        cls.tmp = tempfile.TemporaryDirectory()
        cls.baselines = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write(self, doc):
        d = tempfile.mkdtemp(dir=self.tmp.name)
        path = os.path.join(d, "ds.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        return path, d

    def baseline(self, context):
        obs = self.baselines[context]
        self.assertEqual(obs.rc, 0, f"baseline with context {context} failed:\n{obs.err}")
        return obs

    def assert_leaves_in_table(self, doc, where, prefix=""):
        for k, v in doc.items():
            p = prefix + k
            if p in self.paths:
                continue
            if isinstance(v, dict) and v:
                self.assert_leaves_in_table(v, where, p + ".")
            elif v is None and any(q.startswith(p + ".") for q in self.paths):
                continue  # an absent section (e.g. offload_optimizer: null); its keys are in the table
            else:
                self.fail(f"{where}: resolved key `{p}` is not in the key table (csrc/config/key_table.cpp)")

    def check_entry(self, e):
        doc = merge(BASE, json.loads(e["context"]) if e["context"] else {})
        set_path(doc, e["path"], json.loads(e["probe"]))
        cfg, d = self.write(doc)
        crc, cout, cerr = run([BIN, "check-config", cfg, "--world-size", "2", "--model", MODEL, "--explain"], cwd=d)
        obs = Observation(cfg, d)
        key = e["path"].split(".")[-1]
        self.assertEqual(crc, obs.rc, f"check-config exit {crc} but train exit {obs.rc}\n"
                                      f"check-config: {cerr[-600:]}\ntrain: {obs.err[-600:]}")
        self.assertIn(obs.rc, (0, 2), obs.err[-800:])
        if crc == 0:
            self.assert_leaves_in_table(json.loads(cout), "check-config " + e["path"])
        if e["use"] == "rejected":
            self.assertEqual(obs.rc, 2, "a rejected key's probe must be refused")
            self.assertIn(key, cerr)
            self.assertIn(key, obs.err)
            return
        self.assertEqual(obs.rc, 0, obs.err[-800:])
        base = self.baseline(e["context"])
        changed = {k for k in "LMCO" if getattr(obs, k) != getattr(base, k)}
        if e["use"] == "not used":
            self.assertFalse(changed & set("LMC"), f"classed 'not used' but the run changed {sorted(changed)}")
            for text in (cerr, obs.err):
                warn = [ln for ln in text.splitlines() if "set but not used by zerotrain" in ln]
                self.assertEqual(len(warn), 1, text[-800:])
                self.assertIn(key, warn[0])
            if not e["input_only"]:  # the key's explain line (a whole section: its keys' lines)
                tagged = [ln for ln in cerr.splitlines() if ln.startswith((e["path"] + " ", e["path"] + "."))]
                self.assertTrue(tagged and all("not used by zerotrain" in ln for ln in tagged), cerr[-800:])
            return
        self.assertNotIn("set but not used", obs.err)
        if e["effects"].startswith("="):
            name = e["effects"][1:]
            suite, test = name.split(".")
            pattern = f"def {test}(" if suite.startswith("test_") else f"{suite}, {test})"
            found = subprocess.run(["grep", "-rqF", pattern, os.path.join(REPO, "tests")]).returncode == 0
            self.assertTrue(found, f"the table names test {name}, which does not exist")
            return
        for letter in e["effects"]:
            self.assertIn(letter, changed, f"implemented, so its probe should change {letter} "
                                           f"(changed: {sorted(changed) or 'nothing'})")

    def test_every_key(self):
        # Two probes at a time (each a 2-rank run) keep the 2-core CI machine busy but not swamped.
        def baseline_of(context):
            cfg, d = self.write(merge(BASE, json.loads(context) if context else {}))
            return context, Observation(cfg, d)

        def check(e):
            try:
                self.check_entry(e)
                return None
            except AssertionError as ex:
                return f"{e['path']} ({e['use']}, probe {e['probe']}): {ex}"

        probed = [e for e in self.table if e["probe"]]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            self.baselines.update(pool.map(baseline_of, sorted({e["context"] for e in probed})))
            failures = [f for f in pool.map(check, probed) if f]
        self.assertEqual(failures, [], "\n\n".join(failures))

    def test_every_entry_has_a_probe_and_a_reason(self):
        for e in self.table:
            self.assertTrue(e["probe"] and e["why"], e["path"])
            if e["use"] == "implemented":
                self.assertTrue(e["effects"], e["path"])

    def test_docs_hold_the_table(self):
        rc, md, _ = run([BIN, "check-config", "--keys", "markdown"])
        self.assertEqual(rc, 0)
        with open(os.path.join(REPO, "docs", "config-keys.md")) as f:
            self.assertIn(md, f.read(), "docs/config-keys.md is stale: paste `zerotrain check-config --keys markdown`")


if __name__ == "__main__":
    unittest.main(verbosity=2)
