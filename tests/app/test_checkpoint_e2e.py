"""End-to-end tests of checkpoints (`zerotrain train --save-checkpoint/--resume`, `consolidate`) on
the CPU backend, under mpirun.

* 40 steps straight == 20 steps + resume 20: bitwise identical metrics rows (loss, lr, grad norm,
  loss scale, skipped) and final weights, stages 0-3 x 1-4 ranks x {fp32, bf16} x {AdamW, SGD}
  (a covering design: every stage meets every rank count, both precisions and both optimizers),
  plus bf16 master weights / optimizer states and SGD without momentum; WarmupDecayLR throughout.
* fp16 dynamic loss scaling: resumed right after overflows (mid-hysteresis), scale and counters
  continue exactly, for the ZeRO (stage 1) and the stage-0 scaler.
* Resharding: save at 2 ranks stage 2 -> resume at 1, 3, 4 ranks and at stages 1 and 3; save at 3
  ranks stage 3 -> resume at 2 ranks stage 0: final weights within RESHARD_BOUND of the
  uninterrupted run; a resuming rank's memory is its own shard plus one read buffer.
* kill -9 of one rank, and of every rank, in the middle of a save: `latest` always names a
  complete checkpoint and the resume from it is bitwise the uninterrupted run.
* Corrupt or wrong inputs -> one message naming the file, exit 2.
* consolidate == --save-weights byte for byte (fp32); --dtype bf16/fp16 == round-to-nearest-even
  of it; HF folders (model.safetensors + config.json); stage3_gather_16bit_weights_on_model_save.
"""
import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]
DATA = "markov:vocab=64,order=1,seed=3"

# Reshard bound: |w_resumed - w_straight| per element, after 20 steps at lr 3e-3 of a GPT with
# init_std 0.1 and eps 1e-6 (docs/design.md §7: equivalence across reduction orders is steadiest
# there). Measured on this CPU backend: at most 2.0e-6 (weights up to ~1); the bound leaves 25x.
RESHARD_BOUND = 5e-5


def write(path, obj):
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def mpirun(np_, args):
    return [MPIEXEC] + MPI_FLAGS + ["-np", str(np_), BIN] + args


def train(np_, args, check=True):
    cmd = mpirun(np_, ["train"] + args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def consolidate(args, check=True):
    p = subprocess.run([BIN, "consolidate"] + args, capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"consolidate {args} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


def load_json(path):
    with open(path) as f:
        return json.load(f)


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


# Metrics that must continue exactly (timing and memory fields excluded).
EXACT = ["step", "loss", "lr", "grad_norm", "clip_coef", "loss_scale", "skipped", "samples", "tokens"]


def exact(rs):
    return [{k: r[k] for k in EXACT} for r in rs]


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)}, metadata."""
    b = slurp(path)
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], b[base + s:base + e])
    return out, header.get("__metadata__", {})


def floats(raw, dtype="F32"):
    if dtype == "F32":
        return struct.unpack("<%df" % (len(raw) // 4), raw)
    if dtype == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    raise ValueError(dtype)


def bf16_rne(raw_f32):
    """Round-to-nearest-even fp32 -> bf16, as raw bytes."""
    out = bytearray()
    for (u,) in struct.iter_unpack("<I", raw_f32):
        if (u & 0x7f800000) == 0x7f800000 and (u & 0x007fffff):
            h = (u >> 16) | 0x40  # quiet NaN
        else:
            h = (u + 0x7fff + ((u >> 16) & 1)) >> 16
        out += struct.pack("<H", h & 0xffff)
    return bytes(out)


def fp16_rne(raw_f32):
    return b"".join(struct.pack("<e", x) for x in struct.unpack("<%df" % (len(raw_f32) // 4), raw_f32))


def max_abs_diff(a_path, b_path):
    a, _ = read_safetensors(a_path)
    b, _ = read_safetensors(b_path)
    assert a.keys() == b.keys()
    worst = 0.0
    for k in a:
        for x, y in zip(floats(a[k][2], a[k][0]), floats(b[k][2], b[k][0])):
            worst = max(worst, abs(x - y))
    return worst


class CheckpointEndToEnd(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.d, *names)

    def model(self, n_embd=32, init_std=None):
        m = {"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 2, "n_head": 2, "n_embd": n_embd}
        if init_std:
            m["init_std"] = init_std
        return write(self.path(f"gpt{n_embd}_{init_std}.json"), m)

    def config(self, name, stage, mbs=2, tbs=12, precision="fp32", optimizer="AdamW", extra=None, eps=1e-8):
        cfg = {"train_batch_size": tbs, "train_micro_batch_size_per_gpu": mbs,
               "zero_optimization": {"stage": stage, "reduce_bucket_size": 3000},
               "scheduler": {"type": "WarmupDecayLR",
                             "params": {"warmup_num_steps": 5, "total_num_steps": 40, "warmup_max_lr": 3e-3}}}
        if optimizer == "AdamW":
            cfg["optimizer"] = {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01, "eps": eps}}
        elif optimizer == "SGD":
            cfg["optimizer"] = {"type": "SGD", "params": {"lr": 3e-3, "momentum": 0.9}}
        else:  # SGD without momentum: the checkpoint holds the master weights only
            cfg["optimizer"] = {"type": "SGD", "params": {"lr": 3e-3}}
        if precision == "bf16":
            cfg["bf16"] = {"enabled": True}
        elif precision == "bf16-states":
            cfg["bf16"] = {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
        for k, v in (extra or {}).items():
            cfg[k] = v
        return write(self.path(name), cfg)

    # 40 straight vs `split` + resume to 40: metrics rows and final weights bitwise identical.
    def check_resume_bitwise(self, np_, cfg, model, splits=(20,), what=""):
        tag = os.path.basename(cfg)
        straight_m, straight_w = self.path(tag + ".a.jsonl"), self.path(tag + ".a.safetensors")
        train(np_, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "40", "--metrics", straight_m,
                    "--save-weights", straight_w])
        ck = self.path(tag + ".ck")
        got, start = [], 0
        for k, stop in enumerate(list(splits) + [40]):
            m = self.path(f"{tag}.b{k}.jsonl")
            args = ["--config", cfg, "--model", model, "--data", DATA, "--steps", str(stop), "--metrics", m,
                    "--save-checkpoint", ck]
            if start:
                args += ["--resume", ck]
            if stop == 40:
                args += ["--save-weights", self.path(tag + ".b.safetensors")]
            p = train(np_, args)
            if start:
                self.assertIn(f"resumed from {ck}/global_step{start}", p.stdout)
            got += rows(m)
            start = stop
        self.assertEqual(exact(got), exact(rows(straight_m)), what)
        self.assertEqual(slurp(self.path(tag + ".b.safetensors")), slurp(straight_w),
                         what + ": final weights differ")
        return rows(straight_m)

    def test_resume_is_bitwise_across_stages_ranks_precisions_optimizers(self):
        model = self.model()
        for stage in range(4):
            for np_ in range(1, 5):
                precision = ["fp32", "bf16"][(stage + np_) % 2]
                optimizer = ["AdamW", "SGD"][(stage // 2 + np_) % 2]
                tbs = 12 if np_ != 4 else 16
                mbs = 2
                with self.subTest(stage=stage, np=np_, precision=precision, optimizer=optimizer):
                    cfg = self.config(f"s{stage}n{np_}.json", stage, mbs=mbs, tbs=tbs, precision=precision,
                                      optimizer=optimizer)
                    self.check_resume_bitwise(np_, cfg, model, what=f"stage {stage} np {np_} {precision} {optimizer}")

    def test_resume_bf16_states_and_plain_sgd(self):
        model = self.model()
        cases = [(2, 3, "bf16-states", "AdamW"), (1, 2, "fp32", "SGD-plain"), (3, 2, "bf16-states", "SGD")]
        for np_, stage, precision, optimizer in cases:
            with self.subTest(stage=stage, np=np_, precision=precision, optimizer=optimizer):
                cfg = self.config(f"x{stage}{precision}{optimizer}.json", stage, precision=precision, optimizer=optimizer)
                self.check_resume_bitwise(np_, cfg, model, what=f"{precision} {optimizer}")
                meta = load_json(self.path(os.path.basename(cfg) + ".ck", "global_step20", "meta.json"))
                states = [s["name"] for s in meta["optimizer"]["states"]]
                want = {"AdamW": ["master", "exp_avg", "exp_avg_sq"], "SGD": ["master", "momentum"],
                        "SGD-plain": ["master"]}[optimizer]
                self.assertEqual(states, want)
                if precision == "bf16-states":
                    self.assertEqual({s["dtype"] for s in meta["optimizer"]["states"]}, {"BF16"})

    def test_fp16_loss_scale_continues_exactly_across_overflows(self):
        model = self.model()
        fp16 = {"enabled": True, "loss_scale": 0, "initial_scale_power": 22, "loss_scale_window": 5,
                "hysteresis": 2, "min_loss_scale": 1}
        for np_, stage in [(2, 1), (1, 0)]:
            with self.subTest(np=np_, stage=stage):
                cfg = self.config(f"fp16s{stage}.json", stage, mbs=3, precision="fp32", extra={"fp16": fp16})
                # 13: right after two overflows (scale halved); 21: mid-hysteresis.
                ref = self.check_resume_bitwise(np_, cfg, model, splits=(13, 21), what=f"fp16 stage {stage}")
                self.assertTrue(any(r["skipped"] for r in ref[:13]), "an overflow must happen before the save")
                self.assertTrue(any(r["skipped"] for r in ref[21:]), "and after the resume")
                meta = load_json(self.path(os.path.basename(cfg) + ".ck", "global_step21", "meta.json"))
                ls = meta["loss_scaler"]
                self.assertEqual(meta["steps"]["skipped_steps"], sum(r["skipped"] for r in ref[:21]))
                self.assertEqual(ls["cur_iter"], 21)
                self.assertEqual(ls["cur_scale"], ref[21]["loss_scale"], "the scale step 22 uses")

    def test_reshard_any_world_size_and_stage(self):
        model = self.model(init_std=0.1)
        ck = self.path("ck")
        # Uninterrupted reference at 2 ranks stage 2; its checkpoint at step 20.
        ref_cfg = self.config("ref.json", 2, mbs=2, eps=1e-6)
        train(2, ["--config", ref_cfg, "--model", model, "--data", DATA, "--steps", "40",
                  "--save-weights", self.path("ref.safetensors")])
        train(2, ["--config", ref_cfg, "--model", model, "--data", DATA, "--steps", "20", "--save-checkpoint", ck])
        worst = 0.0
        for np_, stage in [(1, 2), (3, 2), (4, 2), (2, 1), (2, 3)]:
            with self.subTest(np=np_, stage=stage):
                cfg = self.config(f"r{np_}{stage}.json", stage, mbs=1, eps=1e-6)
                out = self.path(f"r{np_}{stage}.safetensors")
                p = train(np_, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "40", "--resume", ck,
                                "--save-weights", out])
                if np_ != 2 or stage != 2:
                    self.assertIn("resharded: saved at ZeRO stage 2 on 2 rank(s)", p.stdout)
                diff = max_abs_diff(out, self.path("ref.safetensors"))
                worst = max(worst, diff)
                self.assertLessEqual(diff, RESHARD_BOUND)
        # 3 ranks stage 3 -> 2 ranks stage 0.
        ref3 = self.config("ref3.json", 3, mbs=2, eps=1e-6)
        ck3 = self.path("ck3")
        train(3, ["--config", ref3, "--model", model, "--data", DATA, "--steps", "40",
                  "--save-weights", self.path("ref3.safetensors")])
        train(3, ["--config", ref3, "--model", model, "--data", DATA, "--steps", "20", "--save-checkpoint", ck3])
        cfg0 = self.config("to0.json", 0, mbs=2, eps=1e-6)
        train(2, ["--config", cfg0, "--model", model, "--data", DATA, "--steps", "40", "--resume", ck3,
                  "--save-weights", self.path("to0.safetensors")])
        diff = max_abs_diff(self.path("to0.safetensors"), self.path("ref3.safetensors"))
        worst = max(worst, diff)
        self.assertLessEqual(diff, RESHARD_BOUND)
        print(f"\nreshard: worst |w - w_straight| = {worst:.3g} (bound {RESHARD_BOUND:g})")

    def test_resuming_rank_holds_its_shard_plus_one_read_buffer(self):
        model = self.model()
        ck = self.path("ck")
        train(2, ["--config", self.config("a.json", 2), "--model", model, "--data", DATA, "--steps", "5",
                  "--save-checkpoint", ck])
        num_params = load_json(os.path.join(ck, "global_step5", "meta.json"))["model"]["num_params"]
        for np_, stage in [(4, 3), (3, 1)]:
            with self.subTest(np=np_, stage=stage):
                report = self.path(f"mem{np_}.json")
                # --steps 5: nothing trained after the load, so the peaks are the set-up's and the load's.
                p = train(np_, ["--config", self.config(f"m{np_}.json", stage, mbs=1), "--model", model, "--data", DATA,
                                "--steps", "5", "--resume", ck, "--memory-report", report])
                line = next(l for l in p.stdout.splitlines() if l.startswith("resumed from"))
                buffer = int(line.split(" B) buffer")[0].split("(")[-1])
                ranks = load_json(report)["ranks"]
                self.assertEqual(len(ranks), np_)
                for r in ranks:
                    c = r["categories"]
                    for cat in ["params", "grads", "master", "optimizer_moments"]:
                        self.assertEqual(c[cat]["peak_bytes"], c[cat]["predicted_bytes"],
                                         f"rank {r['rank']} {cat}: no copy of the state beyond its own shard")
                    extra = c["workspace"]["peak_bytes"] - c["workspace"]["measured_bytes"]
                    self.assertLessEqual(extra, buffer, f"rank {r['rank']}: one read buffer")
                    own = sum(c[k]["predicted_bytes"] for k in ["master", "optimizer_moments"])
                    self.assertLess(own, 12 * num_params / np_ * 1.1, "the shard is a 1/N share of the model's state")

    def test_kill_minus_9_during_a_save_leaves_latest_complete(self):
        # ~25M parameters: a save of ~290 MB takes about a second, so the kill lands inside one.
        model = write(self.path("big.json"), {"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 8,
                                               "n_head": 8, "n_embd": 512})
        cfg = write(self.path("big_ds.json"), {"train_batch_size": 2, "train_micro_batch_size_per_gpu": 1,
                                               "zero_optimization": {"stage": 3},
                                               "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})
        steps = 6
        common = ["--config", cfg, "--model", model, "--data", DATA]
        train(2, common + ["--steps", str(steps), "--metrics", self.path("ref.jsonl"),
                           "--save-weights", self.path("ref.safetensors")])
        ref = exact(rows(self.path("ref.jsonl")))
        for victims in ["one", "all"]:
            with self.subTest(kill=victims):
                ck = self.path("ck_" + victims)
                proc = subprocess.Popen(mpirun(2, ["train"] + common + ["--steps", "100", "--save-checkpoint", ck,
                                                                        "--save-every", "1"]),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                killed, deadline = False, time.time() + 300
                try:
                    while time.time() < deadline and proc.poll() is None:
                        self.assert_latest_complete(ck)
                        tmp = glob.glob(os.path.join(ck, ".tmp-*", "shard-*"))
                        if os.path.exists(os.path.join(ck, "latest")) and any(os.path.getsize(f) > 0 for f in tmp):
                            pids = self.rank_pids(ck)
                            if len(pids) == 2:
                                for pid in pids if victims == "all" else pids[-1:]:
                                    os.kill(pid, signal.SIGKILL)
                                killed = True
                                break
                        time.sleep(0.005)
                    proc.wait(timeout=120)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                    for pid in self.rank_pids(ck):
                        os.kill(pid, signal.SIGKILL)
                self.assertTrue(killed, "never caught a save in progress")
                self.assertNotEqual(proc.returncode, 0)
                self.assert_latest_complete(ck)
                tag = slurp(os.path.join(ck, "latest")).decode().strip()
                k = int(tag[len("global_step"):])
                self.assertGreaterEqual(k, 1)
                if k >= steps:
                    continue
                m = self.path(f"resumed_{victims}.jsonl")
                w = self.path(f"resumed_{victims}.safetensors")
                train(2, common + ["--steps", str(steps), "--resume", ck, "--metrics", m, "--save-weights", w])
                self.assertEqual(exact(rows(m)), ref[k:], "resumed run continues bitwise")
                self.assertEqual(slurp(w), slurp(self.path("ref.safetensors")))

    @staticmethod
    def rank_pids(ck):
        """Our zerotrain ranks (their command line names the unique checkpoint directory)."""
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = slurp(f"/proc/{d}/cmdline").split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"zerotrain") and ck.encode() in cmd:
                pids.append(int(d))
        return sorted(pids)

    def assert_latest_complete(self, ck):
        """`latest` (when present) names a directory with meta.json and every shard at its size."""
        latest = os.path.join(ck, "latest")
        try:
            tag = slurp(latest).decode().strip()
        except OSError:
            return
        self.assertFalse(tag.startswith("."), "latest names a temporary directory")
        meta = load_json(os.path.join(ck, tag, "meta.json"))
        for s in meta["shards"]:
            self.assertEqual(os.path.getsize(os.path.join(ck, tag, s["file"])), s["bytes"])

    def test_corrupt_and_wrong_inputs_exit_2_with_one_message(self):
        model = self.model()
        cfg = self.config("c.json", 2)
        ck = self.path("ck")
        train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "4", "--save-checkpoint", ck,
                  "--save-every", "2"])
        good = os.path.join(ck, "global_step4")
        shard1 = os.path.join(good, "shard-00001-of-00002.safetensors")

        def resume_fails(needle, np_=2, args=(), model_path=model):
            p = train(np_, ["--config", cfg, "--model", model_path, "--data", DATA, "--steps", "6",
                            "--resume", ck] + list(args), check=False)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(needle, p.stderr)
            self.assertEqual(p.stderr.count("error:"), 1, "reported once:\n" + p.stderr)
            return p.stderr

        def damaged(fn):
            backup = self.path("backup")
            shutil.copytree(good, backup)
            try:
                fn()
            finally:
                shutil.rmtree(good)
                shutil.copytree(backup, good)
                shutil.rmtree(backup)

        with self.subTest("truncated shard"):
            def truncate():
                with open(shard1, "r+b") as f:
                    f.truncate(os.path.getsize(shard1) - 100)
                self.assertIn("truncated", resume_fails(shard1))
            damaged(truncate)
        with self.subTest("flipped byte"):
            def flip():
                with open(shard1, "r+b") as f:
                    f.seek(os.path.getsize(shard1) - 5)
                    b = f.read(1)
                    f.seek(-1, 1)
                    f.write(bytes([b[0] ^ 0x10]))
                self.assertIn("checksum mismatch", resume_fails(shard1))
            damaged(flip)
        with self.subTest("missing shard"):
            def remove():
                os.remove(shard1)
                self.assertIn("missing", resume_fails(shard1))
            damaged(remove)
        with self.subTest("flipped byte, at another world size"):
            def flip0():
                shard0 = os.path.join(good, "shard-00000-of-00002.safetensors")
                with open(shard0, "r+b") as f:
                    f.seek(os.path.getsize(shard0) - 9)
                    b = f.read(1)
                    f.seek(-1, 1)
                    f.write(bytes([b[0] ^ 0x01]))
                resume_fails("shard-00000-of-00002.safetensors: checksum mismatch", np_=3)
            damaged(flip0)
        with self.subTest("another model's checkpoint"):
            resume_fails("another model", model_path=self.model(n_embd=48))
        with self.subTest("meta.json of another model"):
            def swap_meta():
                other = self.path("other")
                train(1, ["--config", self.config("o.json", 0), "--model", self.model(n_embd=16), "--data", DATA,
                          "--steps", "1", "--save-checkpoint", other])
                shutil.copy(os.path.join(other, "global_step1", "meta.json"), os.path.join(good, "meta.json"))
                resume_fails(os.path.join(good, "meta.json"))
            damaged(swap_meta)
        with self.subTest("damaged meta.json"):
            def garble():
                write(os.path.join(good, "meta.json"), '{"format": "zerotrain-checkpoint", "version": 1')
                resume_fails("meta.json: not valid JSON")
            damaged(garble)
        with self.subTest("a tag that does not exist"):
            self.assertIn("global_step2, global_step4", resume_fails("'global_step7' does not exist",
                                                                     args=["--tag", "global_step7"]))
        with self.subTest("no checkpoint there"):
            os.makedirs(self.path("empty"))
            p = train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "1",
                          "--resume", self.path("empty")], check=False)
            self.assertEqual(p.returncode, 2)
            self.assertIn("no 'latest' file", p.stderr)
        with self.subTest("unwritable checkpoint directory"):
            blocker = write(self.path("a_file"), "x")
            p = train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "1",
                          "--save-checkpoint", os.path.join(blocker, "ck")], check=False)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(os.path.join(blocker, "ck"), p.stderr)
            self.assertEqual(p.stderr.count("error:"), 1, p.stderr)
            self.assertNotIn("step     1", p.stdout, "checked before training")
        with self.subTest("consolidate of a corrupt checkpoint"):
            def flip_for_consolidate():
                with open(shard1, "r+b") as f:
                    f.seek(200)
                    b = f.read(1)
                    f.seek(-1, 1)
                    f.write(bytes([b[0] ^ 0x80]))
                p = consolidate([ck, self.path("out.safetensors")], check=False)
                self.assertEqual(p.returncode, 2)
                self.assertIn(shard1, p.stderr)
                self.assertFalse(os.path.exists(self.path("out.safetensors")))
            damaged(flip_for_consolidate)
        # After all that the checkpoint is intact and resumes.
        train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "6", "--resume", ck])

    def test_save_every_keep_last_tag_and_steps(self):
        model = self.model()
        cfg = self.config("k.json", 1)
        ck = self.path("ck")
        p = train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "12", "--save-checkpoint", ck,
                      "--save-every", "5", "--keep-last", "2", "--metrics", self.path("a.jsonl")])
        self.assertEqual(sorted(os.listdir(ck)), ["global_step10", "global_step12", "latest"])
        self.assertEqual(slurp(os.path.join(ck, "latest")), b"global_step12\n")
        self.assertEqual(p.stdout.count("saved checkpoint"), 3)  # 5, 10 and the end (12)
        # --tag picks an older one; --steps counts from the start of training.
        p = train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "12", "--resume", ck,
                      "--tag", "global_step10", "--metrics", self.path("b.jsonl")])
        self.assertEqual(exact(rows(self.path("b.jsonl"))), exact(rows(self.path("a.jsonl")))[10:])
        # Resuming the last step with --steps at it trains nothing and does not re-save.
        p = train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "12", "--resume", ck,
                      "--save-checkpoint", ck])
        self.assertIn("nothing to train", p.stdout)
        self.assertNotIn("saved checkpoint", p.stdout)
        # DeepSpeed's layout: meta.json describes everything needed to continue.
        meta = load_json(os.path.join(ck, "global_step12", "meta.json"))
        self.assertEqual(meta["steps"]["global_steps"], 12)
        self.assertEqual(meta["data"]["next_global_batch"], 12)
        self.assertEqual(meta["zero"]["world_size"], 2)
        self.assertEqual(meta["lr_schedule"]["last_batch_iteration"], 11)
        self.assertEqual(len(meta["shards"]), 2)
        self.assertEqual(meta["seed"], 1234)

    def test_seed_comes_from_the_checkpoint(self):
        model = self.model()
        cfg = self.config("seed.json", 2)
        ck = self.path("ck")
        train(2, ["--config", cfg, "--model", model, "--data", "markov:vocab=64,order=1", "--steps", "8",
                  "--seed", "77", "--metrics", self.path("a.jsonl")])
        train(2, ["--config", cfg, "--model", model, "--data", "markov:vocab=64,order=1", "--steps", "4",
                  "--seed", "77", "--save-checkpoint", ck])
        p = train(2, ["--config", cfg, "--model", model, "--data", "markov:vocab=64,order=1", "--steps", "8",
                      "--resume", ck, "--metrics", self.path("b.jsonl")])
        self.assertEqual(exact(rows(self.path("b.jsonl"))), exact(rows(self.path("a.jsonl")))[4:])
        p = train(2, ["--config", cfg, "--model", model, "--data", "markov:vocab=64,order=1", "--steps", "5",
                      "--resume", ck, "--seed", "5"])
        self.assertIn("--seed 5 differs from the checkpoint's 77", p.stderr)

    def test_tag_validation_across_ranks(self):
        model = self.model()
        cfgs = {}
        for mode in ["Fail", "Warn", "Ignore"]:
            cfgs[mode] = self.config(f"tv{mode}.json", 1, extra={"checkpoint": {"tag_validation": mode}})
        ck = self.path("ck")
        train(2, ["--config", cfgs["Warn"], "--model", model, "--data", DATA, "--steps", "4", "--save-checkpoint", ck,
                  "--save-every", "2"])

        def mpmd(mode):
            # Two programs, one rank each, resuming different tags (what tag_validation guards against).
            common = ["train", "--config", cfgs[mode], "--model", model, "--data", DATA, "--steps", "5", "--resume", ck]
            cmd = ([MPIEXEC] + MPI_FLAGS + ["-np", "1", BIN] + common + ["--tag", "global_step4"] + [":"] +
                   ["-np", "1", BIN] + common + ["--tag", "global_step2"])
            return subprocess.run(cmd, capture_output=True, text=True, timeout=600)

        p = mpmd("Fail")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("checkpoint tag differs across ranks: rank 0 'global_step4', rank 1 'global_step2'", p.stderr)
        p = mpmd("Warn")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("warning: resume: checkpoint tag differs across ranks", p.stderr)
        self.assertIn("resumed from " + ck + "/global_step4", p.stdout)
        p = mpmd("Ignore")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("differs", p.stderr)

    def test_consolidate_matches_save_weights(self):
        model = self.model()
        for stage, np_, precision in [(3, 3, "fp32"), (1, 2, "bf16-states"), (0, 4, "bf16")]:
            with self.subTest(stage=stage, np=np_, precision=precision):
                cfg = self.config(f"cs{stage}.json", stage, tbs=12 if np_ != 4 else 16, precision=precision)
                ck, w = self.path(f"ck{stage}"), self.path(f"w{stage}.safetensors")
                train(np_, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "5", "--save-checkpoint", ck,
                            "--save-weights", w])
                out = self.path(f"c{stage}.safetensors")
                p = consolidate([ck, out])
                self.assertIn("peak RSS", p.stdout)
                self.assertEqual(slurp(out), slurp(w), "fp32: byte for byte")
                f32, meta = read_safetensors(out)
                self.assertEqual(meta, {"format": "pt", "producer": "zerotrain"})
                for dtype, rne in [("bf16", bf16_rne), ("fp16", fp16_rne)]:
                    o16 = self.path(f"c{stage}_{dtype}.safetensors")
                    consolidate([os.path.join(ck, "global_step5"), o16, "--dtype", dtype])
                    t16, _ = read_safetensors(o16)
                    self.assertEqual(t16.keys(), f32.keys())
                    for k in f32:
                        self.assertEqual(t16[k][0], {"bf16": "BF16", "fp16": "F16"}[dtype])
                        self.assertEqual(t16[k][1], f32[k][1])
                        self.assertEqual(t16[k][2], rne(f32[k][2]), f"{dtype} {k}: round to nearest even")

    def test_hf_folders_and_16bit_export(self):
        model = self.model()
        cfg = self.config("hf.json", 3, precision="bf16",
                          extra={"zero_optimization": {"stage": 3, "reduce_bucket_size": 3000,
                                                       "stage3_gather_16bit_weights_on_model_save": True}})
        ck = self.path("ck")
        folder = self.path("hf") + "/"
        train(2, ["--config", cfg, "--model", model, "--data", DATA, "--steps", "3", "--save-checkpoint", ck,
                  "--save-weights", folder])
        self.assertEqual(sorted(os.listdir(folder)), ["config.json", "model.safetensors"])
        hf = load_json(os.path.join(folder, "config.json"))
        m = load_json(model)
        self.assertEqual(hf["architectures"], ["GPT2LMHeadModel"])
        self.assertEqual(hf["model_type"], "gpt2")
        for ours, theirs in [("vocab_size", "vocab_size"), ("n_ctx", "n_positions"), ("n_embd", "n_embd"),
                             ("n_layer", "n_layer"), ("n_head", "n_head")]:
            self.assertEqual(hf[theirs], m[ours], theirs)
        self.assertEqual(hf["torch_dtype"], "bfloat16")
        # 16-bit export == consolidate --dtype bf16 of the same step's checkpoint, byte for byte.
        consolidate([ck, self.path("c16") + "/", "--dtype", "bf16"])
        self.assertEqual(slurp(os.path.join(folder, "model.safetensors")),
                         slurp(self.path("c16", "model.safetensors")))
        self.assertEqual(load_json(self.path("c16", "config.json")), hf)
        tensors, _ = read_safetensors(os.path.join(folder, "model.safetensors"))
        self.assertEqual({t[0] for t in tensors.values()}, {"BF16"})
        self.assertEqual(tensors["wte.weight"][1], [64, 32])
        # An existing directory is a folder target too; a 16-bit export of a bf16 run loads back.
        os.makedirs(self.path("plain"))
        cfg32 = self.config("plain.json", 1)
        train(2, ["--config", cfg32, "--model", model, "--data", DATA, "--steps", "0", "--init-from",
                  os.path.join(folder, "model.safetensors"), "--save-weights", self.path("plain")])
        self.assertTrue(os.path.exists(self.path("plain", "model.safetensors")))
        self.assertTrue(os.path.exists(self.path("plain", "config.json")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
