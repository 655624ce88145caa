"""Hugging Face `transformers` folders in and out of `zerotrain train` (1 rank, CPU, fp32).

In:  a randomly initialised GPT2LMHeadModel / LlamaForCausalLM saved with save_pretrained (its
     config.json and model.safetensors) is the model of `train --init-from DIR/` (no --model): the
     first step's loss (--metrics) equals the Hugging Face model's loss on the same batch.
Out: the folder `train --save-weights DIR/` writes after a few steps loads with from_pretrained and
     gives the loss zerotrain computes from it (`train --init-from` that folder, first step).
Loss: mean cross-entropy of logits[:, :T] against the next tokens (the trainer's batch: sequence i
of the token file at offset (i mod S)·T), computed here from the model's logits. Tolerance:
|zt − hf| / hf <= 1e-5 (fp32 both sides).

transformers needs torch; it is looked for in this interpreter, then in $ZT_HF_PYTHON (a venv over
/usr/bin/python3 with --system-site-packages: `ZT_HF_INTEROP=1 scripts/setup.sh` creates
build/hf-venv with transformers==4.44.2, the last line that runs on Debian's torch 1.13). When
neither has it the test prints why and exits 77 (ctest: skipped).
"""
import json
import os
import sys
import tempfile
import unittest

try:
    import torch
    import transformers
except ImportError as e:
    hf_python = os.environ.get("ZT_HF_PYTHON", "")
    if hf_python and os.path.exists(hf_python) and not os.environ.get("ZT_HF_INTEROP_REEXEC"):
        os.environ["ZT_HF_INTEROP_REEXEC"] = "1"
        os.execv(hf_python, [hf_python] + sys.argv)
    print(f"SKIPPED: transformers (with torch) is not importable by {sys.executable} ({e}) nor by "
          f"ZT_HF_PYTHON='{hf_python}'; `ZT_HF_INTEROP=1 scripts/setup.sh` installs it in build/hf-venv")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref_models as ref  # noqa: E402

B, TOL = 2, 1e-5


def randomise(model, seed):
    """Every weight N(0, 0.2), every norm weight 1 + N(0, 0.2), biases N(0, 0.1): the defaults
    (unit norms, zero biases) would hide a misplaced tensor."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if "ln" in name or "norm" in name:
                p.copy_(1.0 + 0.2 * r if name.endswith("weight") else 0.1 * r)
            else:
                p.copy_(0.1 * r if name.endswith("bias") else 0.2 * r)


def hf_loss(model, tokens, T):
    idx, targets = ref.trainer_batch(tokens, T, B)
    with torch.no_grad():
        logits = model(input_ids=idx).logits.double()
    return ref.cross_entropy(logits, targets).item()


class HfInterop(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="zt_hf_interop_")
        self.dir = self.tmp.name
        self.ds = os.path.join(self.dir, "ds.json")
        with open(self.ds, "w") as f:
            json.dump({"train_batch_size": B, "train_micro_batch_size_per_gpu": B,
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}, f)

    def tearDown(self):
        self.tmp.cleanup()

    def train(self, init_from, tokens_path, steps, extra=()):
        p, rows = ref.train(["--config", self.ds, "--init-from", init_from, "--data",
                             "tokens:" + tokens_path + ",format=raw", "--steps", str(steps)] + list(extra),
                            os.path.join(self.dir, "metrics.jsonl"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return [r["loss"] for r in rows]

    def round_trip(self, label, model, T, vocab):
        hf_dir, out_dir = os.path.join(self.dir, "hf"), os.path.join(self.dir, "zt_out") + "/"
        model.save_pretrained(hf_dir, safe_serialization=True)
        g = torch.Generator().manual_seed(7)
        tokens = torch.randint(0, vocab, (B * T * 3 + 1,), generator=g).tolist()
        tokens_path = os.path.join(self.dir, "tokens.bin")
        ref.write_tokens(tokens_path, tokens)
        # In: Hugging Face's folder is zerotrain's model and weights.
        zt = self.train(hf_dir + "/", tokens_path, 3, ["--save-weights", out_dir])
        want = hf_loss(model, tokens, T)
        print(f"{label} in: first loss zt {zt[0]:.6f} hf {want:.6f} nats, relative {abs(zt[0] - want) / want:.2e}")
        self.assertLessEqual(abs(zt[0] - want) / want, TOL)
        # Out: zerotrain's trained folder loads in transformers with the loss zerotrain computes.
        back = type(model).from_pretrained(out_dir).eval()
        zt2 = self.train(out_dir, tokens_path, 1)
        got = hf_loss(back, tokens, T)
        print(f"{label} out: loss zt {zt2[0]:.6f} hf {got:.6f} nats after 3 steps, "
              f"relative {abs(zt2[0] - got) / got:.2e}")
        self.assertLessEqual(abs(zt2[0] - got) / got, TOL)
        self.assertGreater(abs(got - want), 1e-4, "the trained weights must differ from the initial ones")

    def test_gpt2(self):
        cfg = transformers.GPT2Config(vocab_size=67, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                                      activation_function="gelu_new", layer_norm_epsilon=1e-5)
        model = transformers.GPT2LMHeadModel(cfg).eval()
        randomise(model, 1)
        self.round_trip("gpt2", model, 16, 67)

    def llama(self, seed, **over):
        kw = dict(vocab_size=67, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                  tie_word_embeddings=False)
        kw.update(over)
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)).eval()
        randomise(model, seed)
        return model

    def test_llama_gqa_untied(self):
        self.round_trip("llama gqa untied", self.llama(2), 16, 67)

    def test_llama_tied_theta_500000(self):
        self.round_trip("llama tied theta 500000", self.llama(3, tie_word_embeddings=True, rope_theta=500000.0), 16, 67)


if __name__ == "__main__":
    unittest.main(verbosity=2)
