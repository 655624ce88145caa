"""The Llama model through the command line (CPU backend).

* Bad Llama model files (an unknown key, a rotary scaling other than Llama 3's, heads that do not
  group) exit 2 from train and estimate, naming the file and the key.
* estimate of the real shapes (configs/models/llama-2-7b.json) counts Llama 2 7B's parameters;
  explain of llama-tiny lists its Hugging Face parameters in the bucket plan.
* train of configs/models/llama-tiny.json at 2 ranks, ZeRO stage 3: --save-weights DIR/ writes a
  Hugging Face folder (LlamaForCausalLM config.json, HF tensor names); --init-from it, with
  --model and from config.json alone, and from a sharded copy, gives the same bytes back; the
  checkpoint consolidates to the same model.safetensors, and a run resumed from it at another world
  size (1 rank) ends with the weights of the uninterrupted run. Llama 3's rope_scaling reaches the
  exported config.json as it was given.
* train --sample-every prints samples of the Llama being trained; `zerotrain sample` from its
  exported folder, greedy, reproduces the last one (key/value-cache decoding of Llama), and the
  same flags give the same text twice.
"""
import json
import os
import subprocess
import unittest

import test_init_from_cli as init_from
from e2e_case import TempDirCase

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = os.path.join(REPO, "configs", "models", "llama-tiny.json")
CONFIG = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
DATA = "markov:vocab=64,seed=3"


class LlamaCli(TempDirCase):
    def setUp(self):
        super().setUp()
        self.cfg = self.write("ds.json", CONFIG)

    def zerotrain(self, args, expect=0, ranks=0):
        cmd = ([MPIEXEC, "-np", str(ranks)] + init_from.MPI_FLAGS if ranks else []) + [BIN] + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, expect, " ".join(args) + "\n" + out)
        return out

    def train(self, args, model=True, ranks=2):
        return self.zerotrain(["train", "--config", self.cfg, "--data", DATA, "--device", "cpu"] +
                              (["--model", TINY] if model else []) + args, ranks=ranks)

    def path(self, *parts):
        return os.path.join(self.d, *parts)

    def test_bad_model_files_exit_2(self):
        with open(TINY) as f:
            good = json.load(f)
        cases = [("num_hiden_layers", 2, 'key "num_hiden_layers": unknown key'),
                 ("rope_scaling", {"rope_type": "linear", "factor": 2.0}, 'key "rope_scaling": rope_type "linear" is not supported'),
                 ("num_key_value_heads", 3, 'key "num_key_value_heads"'),
                 ("hidden_act", "gelu", 'key "hidden_act": expected "silu"')]
        for key, value, message in cases:
            with self.subTest(key=key):
                bad = dict(good, **{key: value})
                path = self.write("bad.json", bad)
                for args in (["train", "--config", self.cfg, "--model", path, "--data", DATA, "--device", "cpu", "--steps", "1"],
                             ["estimate", "--config", self.cfg, "--model", path, "--world-size", "2"]):
                    out = self.zerotrain(args, expect=2)
                    self.assertIn("model file " + path, out)
                    self.assertIn(message, out)

    def test_estimate_real_shapes(self):
        out = self.zerotrain(["estimate", "--config", self.cfg, "--world-size", "2", "--model",
                              os.path.join(REPO, "configs", "models", "llama-2-7b.json")])
        self.assertIn("stage 0 %d B" % (16 * 6738415616), out)  # the ZeRO paper's 16 B per parameter, Llama 2 7B
        out = self.zerotrain(["explain", "--config", self.cfg, "--world-size", "2", "--model", TINY])
        self.assertIn("num_key_value_heads=2", out)
        self.assertIn("param 1 model.layers.0.input_layernorm.weight", out)
        self.assertIn("lm_head.weight", out)

    def test_sample_during_training_and_from_the_exported_folder(self):
        trained = self.path("trained") + "/"
        out = self.train(["--steps", "3", "--save-weights", trained, "--sample-every", "3", "--sample-prompt", "ab",
                          "--sample-tokens", "6", "--sample-temperature", "0"])
        during = [line for line in out.splitlines() if line.startswith("sample @ step 3: ")]
        self.assertTrue(during, out)
        args = [BIN, "sample", "--model", TINY, "--weights", trained, "--prompt", "ab", "--tokens", "6",
                "--temperature", "0"]
        runs = [subprocess.run(args, capture_output=True, text=True, timeout=120) for _ in range(2)]
        for p in runs:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("6 token(s) after a 2-token prompt", p.stderr)
        self.assertEqual(runs[0].stdout, runs[1].stdout)
        first = runs[0].stdout
        # The same weights give the same greedy text, during training and from the exported folder
        # (the output's lines, as train prefixes them).
        self.assertEqual(during[0], "sample @ step 3: " + first.splitlines()[0])

    def test_llama3_rope_scaling_reaches_the_exported_config(self):
        with open(TINY) as f:
            model = json.load(f)
        model["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
        path = self.write("scaled.json", model)
        out = self.path("scaled") + "/"
        self.zerotrain(["train", "--config", self.cfg, "--model", path, "--data", DATA, "--device", "cpu",
                        "--steps", "0", "--save-weights", out])
        with open(out + "config.json") as f:
            self.assertEqual(json.load(f)["rope_scaling"], model["rope_scaling"])

    def test_hugging_face_folder_round_trip_and_consolidate(self):
        trained = self.path("trained") + "/"
        ck = self.path("ck")
        self.train(["--steps", "3", "--save-weights", trained, "--save-checkpoint", ck])
        with open(trained + "config.json") as f:
            config = json.load(f)
        self.assertEqual(config["architectures"], ["LlamaForCausalLM"])
        self.assertEqual(config["model_type"], "llama")
        for key, value in [("vocab_size", 128), ("hidden_size", 64), ("intermediate_size", 172),
                           ("num_hidden_layers", 2), ("num_attention_heads", 4), ("num_key_value_heads", 2),
                           ("head_dim", 16), ("max_position_embeddings", 128), ("tie_word_embeddings", False),
                           ("hidden_act", "silu"), ("rope_scaling", None), ("torch_dtype", "float32")]:
            self.assertEqual(config[key], value, key)
        header, _ = init_from.read_safetensors(trained + "model.safetensors")
        self.assertEqual(header["model.layers.1.mlp.down_proj.weight"]["shape"], [64, 172])
        self.assertEqual(header["model.layers.0.self_attn.k_proj.weight"]["shape"], [32, 64])
        self.assertIn("lm_head.weight", header)
        self.assertEqual(len(header), 1 + 2 * 9 + 2)
        again = self.path("again") + "/"
        self.train(["--steps", "0", "--init-from", trained, "--save-weights", again])
        init_from.InitFromCli.same_files(self, trained, again)
        built = self.path("built") + "/"
        out = self.train(["--steps", "0", "--init-from", trained, "--save-weights", built], model=False)
        self.assertIn("num_key_value_heads=2", out)
        init_from.InitFromCli.same_files(self, trained, built)
        sharded = self.path("sharded")
        init_from.InitFromCli.sharded_copy(self, trained, sharded)
        from_shards = self.path("from_shards") + "/"
        self.train(["--steps", "0", "--init-from", sharded + "/", "--save-weights", from_shards], model=False)
        init_from.InitFromCli.same_files(self, trained, from_shards)
        consolidated = self.path("consolidated") + "/"
        self.zerotrain(["consolidate", ck, consolidated])
        init_from.InitFromCli.same_files(self, trained, consolidated)
        straight = self.path("straight") + "/"
        self.train(["--steps", "5", "--save-weights", straight])
        resumed = self.path("resumed") + "/"
        out = self.train(["--steps", "5", "--resume", ck, "--save-weights", resumed], ranks=1)
        self.assertIn("resumed from " + ck + "/global_step3", out)
        init_from.InitFromCli.same_files(self, straight, resumed)


if __name__ == "__main__":
    unittest.main()
