"""Text end to end with a tokenizer trained here: `tokenize train` on a text that ships with Debian,
`tokenize encode`, `train` on the token file with a held-out split for validation and samples
during training decoded by the same tokenizer.json, then `sample --tokenizer`:

* every command exits 0; the run prints `val loss` and `sample @ step` lines;
* `sample --tokenizer` writes the prompt followed by text the tokenizer decodes (the same as
  decoding the generated ids by hand with `tokenize decode`), deterministically;
* a tokenizer whose ids do not fit the model's vocabulary is refused (exit 2) before training.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")
TEXT = "/usr/share/common-licenses/GPL-3"
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]


def run(args, timeout=600, text=True):
    """text: decoded, a byte that is not UTF-8 (samples print raw token bytes) as U+FFFD."""
    if not text:
        return subprocess.run(args, capture_output=True, timeout=timeout)
    return subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=timeout)


class TextPipeline(unittest.TestCase):
    def test_tokenize_train_sample(self):
        with tempfile.TemporaryDirectory() as d:
            tok, data, model = (os.path.join(d, n) for n in ("tok.json", "gpl.bin", "m.json"))
            for args in (["tokenize", "train", "--vocab-size", "512", "--out", tok, TEXT],
                         ["tokenize", "encode", "--tokenizer", tok, TEXT, "--out", data]):
                p = run([BIN] + args)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(model, "w") as f:
                json.dump({"type": "gpt", "vocab_size": 512, "n_ctx": 64, "n_layer": 2, "n_head": 2, "n_embd": 64}, f)
            spec = "tokens:%s,split=0.9" % data
            p = run(MPI + [BIN, "train", "--config", os.path.join(REPO, "configs/ds/stage2.json"), "--model", model,
                           "--data", spec, "--eval-data", spec, "--eval-every", "20", "--steps", "40",
                           "--sample-every", "20", "--sample-prompt", "This License", "--sample-tokens", "8",
                           "--sample-tokenizer", tok, "--save-weights", os.path.join(d, "out") + "/"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("val loss", p.stdout)
            self.assertIn("sample @ step 40: This License", p.stdout)
            sample = [BIN, "sample", "--weights", os.path.join(d, "out"), "--model", model, "--tokenizer", tok,
                      "--prompt", "the terms", "--tokens", "12", "--temperature", "0.8", "--seed", "3"]
            # As bytes: decode concatenates the tokens' bytes, and a byte-level vocabulary holds every
            # byte, so a sample may end inside (or hold) a sequence that is not UTF-8.
            a, b = run(sample, text=False), run(sample, text=False)
            self.assertEqual(a.returncode, 0, a.stderr.decode(errors="replace"))
            self.assertEqual(a.stdout, b.stdout)
            self.assertTrue(a.stdout.startswith(b"the terms"), a.stdout)
            # a 128-id model cannot take this 512-id tokenizer's prompt ids
            with open(model, "w") as f:
                json.dump({"type": "gpt", "vocab_size": 128, "n_ctx": 64, "n_layer": 2, "n_head": 2, "n_embd": 64}, f)
            p = run([BIN, "train", "--config", os.path.join(REPO, "configs/ds/stage0.json"), "--model", model,
                     "--data", "markov:", "--steps", "1", "--sample-every", "1", "--sample-prompt", "This License",
                     "--sample-tokenizer", tok])
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("outside the model's vocabulary", p.stderr)


if __name__ == "__main__":
    unittest.main()
