"""`zerotrain tokenize` against Hugging Face `tokenizers` (the version scripts/setup.sh pins).

Both directions, on text that ships with Debian and the repository's docs plus a multilingual sample:
a tokenizer trained by `zerotrain tokenize train` loads in tokenizers.Tokenizer.from_file and gives
the ids `zerotrain tokenize encode` writes; a byte-level BPE trained by `tokenizers` and saved as
tokenizer.json loads in zerotrain and gives the ids `tokenizers` gives.

The package lives in $ZT_TOOLS_PYTHON's venv: when this interpreter cannot import it, the test runs
itself again under that one; when neither can, it prints why and exits 77 (ctest: skipped).
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers
except ImportError:
    tools_python = os.environ.get("ZT_TOOLS_PYTHON", "")
    if tools_python and os.path.exists(tools_python) and not os.environ.get("ZT_TOKENIZER_HF_REEXEC"):
        os.environ["ZT_TOKENIZER_HF_REEXEC"] = "1"
        os.execv(tools_python, [tools_python] + sys.argv)
    print(f"SKIPPED: the Python package 'tokenizers' is not importable here ({sys.executable}) nor in "
          f"ZT_TOOLS_PYTHON='{tools_python}'; scripts/setup.sh installs it when PyPI is reachable")
    sys.exit(77)

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")

MULTILINGUAL = (
    "Grüße, café — naïve façade; Ελληνικά γράμματα; Русский текст; 中文字符和标点。日本語のテキスト、カタカナ。\n"
    "العربية والأرقام ١٢٣; हिन्दी; 한국어 문장입니다.\n"
    "emoji 😀👍🏽 and flags 🇫🇷, math ²³ ½ Ⅻ ∑x², tabs\t\tand   spaces\n\n\n  end  \n"
    "it's we'll they're I'd you've she'm 'S 'LL ''s\n"
    "\u00a0nbsp\u2009thin\u3000ideographic\u2028line\u2029para\u0085nel\r\n"
    "numbers 3.14159 1,000,000 0x1F 2024-12-01 1e-5\n"
    "<|endoftext|>a document separator<|endoftext|>\n"
)


def corpus_files():
    files = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    gpl = "/usr/share/common-licenses/GPL-3"
    if os.path.exists(gpl):
        files.append(gpl)
    return files


def run(args, **kw):
    p = subprocess.run([BIN] + args, capture_output=True, timeout=300, **kw)
    if p.returncode != 0:
        raise AssertionError(f"{args}: exit {p.returncode}\n{p.stderr.decode(errors='replace')}")
    return p


def read_llmc(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n = struct.unpack_from("<3i", data, 0)
    assert magic == 20240520, magic
    fmt = "H" if version == 1 else "I"
    return list(struct.unpack_from(f"<{n}{fmt}", data, 1024))


class HuggingFaceCompat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = cls.tmp.name
        cls.train_files = corpus_files()
        assert cls.train_files, "no docs/*.md found: set ZT_REPO"
        cls.sample = os.path.join(cls.d, "sample.txt")
        text = MULTILINGUAL
        for path in cls.train_files:
            with open(path, encoding="utf-8") as f:
                text += f.read()
        text = text * 4  # over 1 MiB: `encode` cuts it into chunks, whose seams must not show
        with open(cls.sample, "w", encoding="utf-8") as f:
            f.write(text)
        cls.text = text

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ours(self, tok_json, name):
        out = os.path.join(self.d, name + ".bin")
        run(["tokenize", "encode", "--tokenizer", tok_json, "--out", out, "--threads", "2", self.sample])
        return read_llmc(out)

    def compare(self, tok_json, name):
        hf = tokenizers.Tokenizer.from_file(tok_json)
        want = hf.encode(self.text).ids
        got = self.ours(tok_json, name)
        self.assertEqual(len(got), len(want))
        if got != want:
            i = next(k for k, (a, b) in enumerate(zip(got, want)) if a != b)
            self.fail(f"{name}: first difference at token {i}: zerotrain {got[i]}, tokenizers {want[i]} "
                      f"near {hf.decode(want[max(0, i - 8):i + 8])!r}")
        self.assertEqual(hf.decode(got, skip_special_tokens=False), self.text)
        self.assertGreater(len(set(want)), 500)  # the merges are exercised, not just bytes
        return hf

    def test_zerotrain_tokenizer_in_hugging_face(self):
        tok = os.path.join(self.d, "zt.json")
        run(["tokenize", "train", "--vocab-size", "3000", "--special", "<|endoftext|>", "--out", tok]
            + self.train_files)
        hf = self.compare(tok, "zt")
        self.assertEqual(hf.get_vocab_size(), 3000)
        self.assertEqual(hf.token_to_id("<|endoftext|>"), 2999)

    def test_hugging_face_tokenizer_in_zerotrain(self):
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=["<|endoftext|>"], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train(self.train_files, trainer)
        path = os.path.join(self.d, "hf.json")
        tok.save(path)
        self.compare(path, "hf")

    def test_gpt2_layout_in_zerotrain(self):
        # GPT-2's tokenizer.json as published: no model.type, "" subword prefix and suffix, merges as
        # "a b" strings, ByteLevel post-processor, <|endoftext|> the last id (normalized: true).
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=2000, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train(self.train_files, trainer)
        path = os.path.join(self.d, "hf_plain.json")
        tok.save(path)
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        vocab = j["model"]["vocab"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
        eot = len(vocab)
        vocab["<|endoftext|>"] = eot
        gpt2 = {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
            "model": {"dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": False, "vocab": vocab, "merges": merges},
        }
        path = os.path.join(self.d, "gpt2_layout.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(gpt2, f, ensure_ascii=False)
        hf = self.compare(path, "gpt2_layout")
        self.assertEqual(hf.encode("a<|endoftext|>b").ids[1], eot)

    def test_hugging_face_prefix_space_in_zerotrain(self):
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=1500, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train(self.train_files, trainer)
        path = os.path.join(self.d, "hf_prefix.json")
        tok.save(path)
        hf = tokenizers.Tokenizer.from_file(path)
        self.assertEqual(self.ours(path, "hf_prefix"), hf.encode(self.text).ids)


if __name__ == "__main__":
    unittest.main(verbosity=2)
