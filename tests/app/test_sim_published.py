"""docs/benchmarks.md §7 is what benchmarks/train/sim_published.py prints today: the table of
`zerotrain simulate` against published results is regenerated and compared line by line, so a
change to the cost model, a profile or the engine's plan that moves a number fails here until the
doc says the new number."""
import os
import subprocess
import sys
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")


class SimPublished(unittest.TestCase):
    def test_doc_table_is_current(self):
        p = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks/train/sim_published.py"), "--zerotrain", BIN],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        printed = [l for l in p.stdout.splitlines() if l.startswith("|") or l.startswith("Anchor fit")]
        self.assertGreaterEqual(len(printed), 9)
        with open(os.path.join(REPO, "docs/benchmarks.md")) as f:
            doc = f.read().splitlines()
        for line in printed:
            self.assertIn(line, doc, "docs/benchmarks.md §7 differs from sim_published.py's output")


if __name__ == "__main__":
    unittest.main()
