"""zerotrain's GPT-2 and Llama against float64 PyTorch references written from the math.

For each case: random fp32 weights (seeded, every norm weight and bias non-trivial) are written as
safetensors with Hugging Face names, a random token file is written, and tests/model/model_dump
(zerotrain on the CPU in fp32: load the weights, the trainer's first batch of the token file, one
forward and backward with dloss = 1) is compared with the reference (torch_ref_models.py) on the
same batch:
  loss       |zt − ref| / |ref|                         <= 1e-5
  logits     max |zt − ref| / max |ref|                 <= 1e-5 (the V real columns)
  log-softmax of the logits, max |zt − ref| / max |ref| <= 1e-5
  gradients  per parameter: max |zt − ref| / max |ref| <= 1e-5 (fp32 round-off; an all-zero
             reference gradient, e.g. the queries' at T = 1, against the model's largest gradient)
Every case prints its worst ratios. Run with Debian's /usr/bin/python3 (python3-torch); exits 77
(ctest: skipped) with the reason only when torch cannot be imported. Classes: GptReference,
LlamaReference (argv selects, as unittest does).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref_models as ref  # noqa: E402  (exits 77 when torch is not importable)

torch = ref.torch

DUMP = os.environ.get("ZT_MODEL_DUMP", "build/tests/model/model_dump")
TOL = 1e-5


def rel_max(got, want, zero_scale=0.0):
    """max |got − want| / max |want|. A reference that is all zero (a gradient that vanishes
    mathematically, e.g. the queries' at T = 1) is measured against zero_scale instead (the largest
    gradient of the model: what fp32 round-off is relative to), and must be exact without one."""
    diff = (got - want).abs().max().item() if want.numel() else 0.0
    scale = want.abs().max().item() if want.numel() else 0.0
    scale = scale or zero_scale
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


class DumpCase(unittest.TestCase):
    """Writes a model file, weights and tokens, runs model_dump, compares with the reference."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="zt_torch_ref_")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def dump(self, model_cfg, params, tokens, B, T):
        paths = {k: os.path.join(self.dir, k) for k in ("model.json", "w.safetensors", "tokens.bin", "out.safetensors")}
        with open(paths["model.json"], "w") as f:
            json.dump(model_cfg, f)
        ref.write_safetensors(paths["w.safetensors"], params)
        ref.write_tokens(paths["tokens.bin"], tokens)
        p = self.run_dump(["--model", paths["model.json"], "--weights", paths["w.safetensors"], "--tokens",
                           paths["tokens.bin"], "--B", str(B), "--T", str(T), "--out", paths["out.safetensors"]])
        self.assertEqual(p.returncode, 0, p.stderr)
        return ref.read_safetensors(paths["out.safetensors"])

    def run_dump(self, args):
        return subprocess.run([DUMP] + args, capture_output=True, text=True, timeout=120)

    def compare(self, label, logits_fn, model_cfg, params, tokens, B, T):
        out = self.dump(model_cfg, params, tokens, B, T)
        idx, targets = ref.trainer_batch(tokens, T, B)
        loss, logits, grads = ref.loss_and_grads(logits_fn, params, idx, targets)
        V = logits.shape[-1]
        logits = logits.reshape(B * T, V)
        worst = {"loss": abs(out["loss"].item() - loss.item()) / abs(loss.item()),
                 "logits": rel_max(out["logits"], logits),
                 "log_softmax": rel_max(torch.log_softmax(out["logits"], -1), torch.log_softmax(logits, -1))}
        self.assertEqual(list(out["logits"].shape), [B * T, V])
        self.assertEqual(set(k for k in out if k.startswith("grad.")), set("grad." + k for k in params))
        grad_worst, grad_name = 0.0, ""
        largest = max(g.abs().max().item() for g in grads.values())
        for name, g in grads.items():
            got = out["grad." + name]
            self.assertEqual(list(got.shape), list(g.shape), name)
            r = rel_max(got, g, largest)
            if r > grad_worst:
                grad_worst, grad_name = r, name
        worst["grad"] = grad_worst
        print(f"{label}: B={B} T={T} loss zt {out['loss'].item():.6f} ref {loss.item():.6f} nats; worst ratios: "
              + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()) + f" (grad: {grad_name})")
        for k, v in worst.items():
            self.assertLessEqual(v, TOL, f"{label} B={B} T={T}: {k} {v:.3e} > {TOL} (grad: {grad_name})")


GPT = {"type": "gpt", "vocab_size": 67, "n_ctx": 64, "n_layer": 2, "n_head": 4, "n_embd": 32}


class GptReference(DumpCase):
    def case(self, T, B=2, cfg=GPT, seed=1):
        params = ref.random_params(ref.gpt_param_shapes(cfg), seed, std=0.2)
        g = torch.Generator().manual_seed(seed + 100)
        tokens = torch.randint(0, cfg["vocab_size"], (B * T + 1 + 37,), generator=g).tolist()
        self.compare(f"gpt {cfg.get('attention', 'tiled')}", lambda p, i: ref.gpt_logits(p, cfg, i), cfg, params,
                     tokens, B, T)

    def test_t1(self):
        self.case(1, B=3)

    def test_t7(self):
        self.case(7)

    def test_t64_full_context(self):
        self.case(64)

    def test_materialised_attention(self):
        self.case(7, cfg=dict(GPT, attention="materialised"), seed=2)

    def test_one_layer_one_head(self):
        self.case(5, cfg=dict(GPT, n_layer=1, n_head=1, n_embd=16, vocab_size=5), seed=3)

    def test_t_beyond_n_ctx_is_refused(self):
        params = ref.random_params(ref.gpt_param_shapes(GPT), 1)
        with open(os.path.join(self.dir, "m.json"), "w") as f:
            json.dump(GPT, f)
        ref.write_safetensors(os.path.join(self.dir, "w.safetensors"), params)
        ref.write_tokens(os.path.join(self.dir, "t.bin"), list(range(60)) * 4)
        p = self.run_dump(["--model", os.path.join(self.dir, "m.json"), "--weights",
                           os.path.join(self.dir, "w.safetensors"), "--tokens", os.path.join(self.dir, "t.bin"),
                           "--B", "1", "--T", "65", "--out", os.path.join(self.dir, "o.safetensors")])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("n_ctx=64", p.stderr)

    def test_bad_arguments_exit_2(self):
        for args, says in ((["--model"], "needs a value"), (["--B", "2"], "is required"),
                           (["--bogus", "1"], "unknown flag"),
                           (["--model", "m", "--weights", "w", "--tokens", "t", "--B", "0", "--T", "1", "--out", "o"],
                            "--B '0'"),
                           (["--model", os.path.join(self.dir, "missing.json"), "--weights", "w", "--tokens", "t",
                             "--B", "1", "--T", "1", "--out", "o"], "missing.json")):
            p = self.run_dump(args)
            self.assertEqual(p.returncode, 2, f"{args}: {p.stderr}")
            self.assertIn(says, p.stderr, args)


LLAMA = {"type": "llama", "vocab_size": 67, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256, "n_ctx": 256,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False}


class LlamaReference(DumpCase):
    def case(self, T, B=2, seed=1, **over):
        cfg = dict(LLAMA, **over)
        params = ref.random_params(ref.llama_param_shapes(cfg), seed, std=0.2)
        g = torch.Generator().manual_seed(seed + 100)
        tokens = torch.randint(0, cfg["vocab_size"], (B * T + 1 + 37,), generator=g).tolist()
        label = (f"llama H={cfg['num_attention_heads']} Hkv={cfg['num_key_value_heads']} theta={cfg['rope_theta']:g}"
                 f"{' tied' if cfg['tie_word_embeddings'] else ''}{' llama3 scaling' if 'rope_scaling' in cfg else ''}")
        self.compare(label, lambda p, i: ref.llama_logits(p, cfg, i), cfg, params, tokens, B, T)

    def test_t1(self):
        self.case(1, B=3)

    def test_t7(self):
        self.case(7)

    def test_t64(self):
        self.case(64)

    def test_t200(self):
        self.case(200, B=1)

    def test_theta_500000(self):
        self.case(64, rope_theta=500000.0, seed=2)
        self.case(200, B=1, rope_theta=500000.0, seed=3)

    def test_llama3_rope_scaling(self):
        # head size 8: wavelengths 2π, 20π, 200π, 2000π against 64/4 and 64/1 positions: one
        # frequency kept, one blended, two divided by the factor
        scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}
        self.case(200, B=1, rope_scaling=scaling, seed=7)

    def test_tied_head_multi_head(self):
        self.case(7, tie_word_embeddings=True, num_key_value_heads=4, seed=4)

    def test_one_kv_head(self):
        self.case(9, num_key_value_heads=1, seed=5)

    def test_explicit_head_dim(self):
        self.case(7, head_dim=16, seed=6)

    def test_t_beyond_n_ctx_is_refused(self):
        cfg = dict(LLAMA, n_ctx=16)
        with open(os.path.join(self.dir, "m.json"), "w") as f:
            json.dump(cfg, f)
        ref.write_safetensors(os.path.join(self.dir, "w.safetensors"),
                              ref.random_params(ref.llama_param_shapes(cfg), 1))
        ref.write_tokens(os.path.join(self.dir, "t.bin"), list(range(60)))
        p = self.run_dump(["--model", os.path.join(self.dir, "m.json"), "--weights",
                           os.path.join(self.dir, "w.safetensors"), "--tokens", os.path.join(self.dir, "t.bin"),
                           "--B", "1", "--T", "17", "--out", os.path.join(self.dir, "o.safetensors")])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("16", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
