"""docs/zero-walkthrough.md §8 (the same engine on a Llama) against `zerotrain explain`.

The section's ```sh command runs as written (build/zerotrain replaced by ZT_BIN); every line of
its ```text blocks must be a line of the output, in the same order.
"""
import os
import re
import subprocess
import unittest

REPO = os.environ.get("ZT_REPO", ".")
BIN = os.environ.get("ZT_BIN", "build/zerotrain")


class WalkthroughLlama(unittest.TestCase):
    def test_section_matches_explain(self):
        with open(os.path.join(REPO, "docs", "zero-walkthrough.md")) as f:
            doc = f.read()
        m = re.search(r"^## 8\. The same engine on a Llama\n(.*?)^## ", doc, re.S | re.M)
        self.assertIsNotNone(m, "section 8 is missing")
        section = m.group(1)
        command = re.search(r"```sh\n(.*?)\n```", section, re.S).group(1).strip()
        argv = command.split()
        self.assertEqual(argv[0], "build/zerotrain")
        p = subprocess.run([BIN] + argv[1:], capture_output=True, text=True, cwd=REPO, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = [line.rstrip() for line in p.stdout.splitlines()]
        blocks = re.findall(r"```text\n(.*?)```", section, re.S)
        self.assertEqual(len(blocks), 2)
        for block in blocks:
            at = 0
            for line in block.rstrip("\n").splitlines():
                self.assertIn(line.rstrip(), out[at:], "not in explain's output (after line %d)" % at)
                at = out.index(line.rstrip(), at) + 1


if __name__ == "__main__":
    unittest.main()
