"""`zerotrain tokenize` from the command line: train -> encode -> decode gives the input bytes back,
threads do not change the output, the token file trains a GPT (`train --data tokens:`), and every
bad input exits 2 with one message naming it.
"""
import json
import os
import struct
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")
BANNERS = ["terminate called", "Aborted", "Traceback", "core dumped", "Segmentation"]


def run(args, timeout=120):
    p = subprocess.run([BIN] + args, capture_output=True, timeout=timeout)
    p.err = p.stderr.decode("utf-8", "replace")
    return p


class TokenizeCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = cls.tmp.name
        cls.text = os.path.join(cls.d, "corpus.txt")
        with open(cls.text, "wb") as f:
            for name in sorted(os.listdir(os.path.join(REPO, "docs"))):
                if name.endswith(".md"):
                    with open(os.path.join(REPO, "docs", name), "rb") as g:
                        f.write(g.read())
            f.write(b"invalid UTF-8: \xff\xfe\xc3 and \xed\xa0\x80; emoji \xf0\x9f\x98\x80\n")
        cls.tok = os.path.join(cls.d, "tok.json")
        p = run(["tokenize", "train", "--vocab-size", "1024", "--special", "<|endoftext|>", "--out", cls.tok, cls.text])
        assert p.returncode == 0, p.err
        assert "1024 tokens" in p.err, p.err

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def expect_bad(self, args, *needles):
        p = run(args)
        self.assertEqual(p.returncode, 2, f"{args}: {p.err}")
        for n in needles:
            self.assertIn(n, p.err, args)
        for b in BANNERS:
            self.assertNotIn(b, p.err)
        self.assertIn("error:", p.err)

    def encode(self, out, *extra):
        p = run(["tokenize", "encode", "--tokenizer", self.tok, "--out", out, *extra, self.text])
        self.assertEqual(p.returncode, 0, p.err)
        self.assertIn("MB/s", p.err)
        with open(out, "rb") as f:
            return f.read()

    def test_encode_decode_round_trip_and_threads(self):
        one = self.encode(self.path("one.bin"))
        four = self.encode(self.path("four.bin"), "--threads", "4")
        self.assertEqual(one, four)
        magic, version, n = struct.unpack_from("<3i", one, 0)
        self.assertEqual((magic, version), (20240520, 1))
        self.assertEqual(len(one), 1024 + 2 * n)
        p = subprocess.run([BIN, "tokenize", "decode", "--tokenizer", self.tok, self.path("one.bin")],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.text, "rb") as f:
            self.assertEqual(p.stdout, f.read())
        eot = self.encode(self.path("eot.bin"), "--eot")
        self.assertEqual(struct.unpack_from("<3i", eot, 0)[2], n + 1)
        self.assertEqual(struct.unpack_from("<H", eot, 1024)[0], 1023)  # <|endoftext|> is the last id

    def test_token_file_trains(self):
        data = self.path("train.bin")
        self.encode(data)
        model = self.path("gpt.json")
        with open(model, "w") as f:
            json.dump({"type": "gpt", "vocab_size": 1024, "n_ctx": 32, "n_layer": 1, "n_head": 2, "n_embd": 32}, f)
        cfg = self.path("ds.json")
        with open(cfg, "w") as f:
            json.dump({"train_batch_size": 4, "zero_optimization": {"stage": 1},
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
        p = run(["train", "--config", cfg, "--model", model, "--data", "tokens:" + data, "--steps", "3"], timeout=300)
        self.assertEqual(p.returncode, 0, p.err)
        out = p.stdout.decode() + p.err
        self.assertIn("llm.c uint16", out)

    def test_bad_inputs_exit_2(self):
        bad_json = self.path("bad.json")
        with open(bad_json, "w") as f:
            f.write('{"model": {"type": "BPE", "vocab": {')
        wordpiece = self.path("wordpiece.json")
        with open(self.tok) as f:
            j = json.load(f)
        j["model"]["type"] = "WordPiece"
        with open(wordpiece, "w") as f:
            json.dump(j, f)
        noeot = self.path("noeot.json")
        j["model"]["type"] = "BPE"
        j["added_tokens"] = []
        with open(noeot, "w") as f:
            json.dump(j, f)
        missing = self.path("missing.txt")
        out = self.path("x.bin")
        self.expect_bad(["tokenize", "train", "--vocab-size", "10", "--out", self.path("t.json"), self.text],
                        "--vocab-size", "256")
        self.expect_bad(["tokenize", "train", "--vocab-size", "256", "--special", "<|endoftext|>",
                         "--out", self.path("t.json"), self.text], "--vocab-size 256", "257")
        self.expect_bad(["tokenize", "train", "--vocab-size", "12x", "--out", self.path("t.json"), self.text], "12x")
        self.expect_bad(["tokenize", "train", "--vocab-size", "300", "--out", self.path("t.json"), missing], missing)
        self.expect_bad(["tokenize", "train", "--out", self.path("t.json"), self.text], "--vocab-size")
        self.expect_bad(["tokenize", "encode", "--tokenizer", missing, "--out", out, self.text], missing)
        self.expect_bad(["tokenize", "encode", "--tokenizer", bad_json, "--out", out, self.text], bad_json, "JSON")
        self.expect_bad(["tokenize", "encode", "--tokenizer", wordpiece, "--out", out, self.text], wordpiece,
                        "model.type")
        self.expect_bad(["tokenize", "encode", "--tokenizer", noeot, "--out", out, "--eot", self.text], "--eot")
        self.expect_bad(["tokenize", "encode", "--tokenizer", self.tok, "--out", out, missing], missing)
        self.expect_bad(["tokenize", "encode", "--tokenizer", self.tok, "--out", out, "--threads", "0", self.text],
                        "--threads")
        self.expect_bad(["tokenize", "encode", "--tokenizer", self.tok, "--out", self.path("no/dir/x.bin"),
                         self.text], "no/dir")
        self.expect_bad(["tokenize", "decode", "--tokenizer", self.tok, self.text], self.text, "llm.c")
        big = self.path("big_id.bin")
        with open(big, "wb") as f:
            f.write(struct.pack("<3i", 20240520, 1, 3) + bytes(1012) + struct.pack("<3H", 5, 1024, 7))
        self.expect_bad(["tokenize", "decode", "--tokenizer", self.tok, big], big, "token 1024 at position 1")
        self.expect_bad(["tokenize", "frobnicate"], "train, encode or decode")
        self.expect_bad(["tokenize", "encode", "--bogus"], "--bogus")
        self.assertFalse(os.path.exists(out))  # nothing written on error


if __name__ == "__main__":
    unittest.main(verbosity=2)
