"""Shared fixture of the end-to-end tests: a temporary directory per test with a tiny GPT model file."""
import json
import os
import tempfile
import unittest

TINY_GPT = {"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}


class TempDirCase(unittest.TestCase):
    """self.d: the test's own directory (removed afterwards); self.model: TINY_GPT written in it."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.d = tmp.name
        self.model = self.write("gpt.json", TINY_GPT)

    def write(self, name, obj):
        """obj (text as is, anything else as JSON) in the test's directory; returns the path."""
        path = os.path.join(self.d, name)
        with open(path, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return path
