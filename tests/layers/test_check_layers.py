"""scripts/check_layers.py on small trees built here: an include of a lower layer fails with its
file:line, an allowed one passes, a listed exception that no longer occurs fails, a file in no
layer is an input error; and the real docs/design.md table gives the documented layer order."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.environ.get("ZT_REPO", os.path.join(os.path.dirname(__file__), "..", "..")))
SCRIPT = os.path.join(REPO, "scripts", "check_layers.py")

TABLE = """# d

## 2. Layers

| layer | what it holds | headers / code |
|---|---|---|
| core | basics | `include/zerotrain/core`, `csrc/core` |
| kernels | ops | `include/zerotrain/kernels`, `csrc/kernels` |
| zero | engine | `include/zerotrain/zero`, `csrc/zero` |
| ckpt, app | files | `csrc/ckpt`, `csrc/zero/engine_checkpoint.cpp`, `csrc/app` |

## 3. Next
"""


class CheckLayers(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="zt_layers_")
        self.write("docs/design.md", TABLE)
        self.write("include/zerotrain/core/dtype.h", "#pragma once\n")
        self.write("include/zerotrain/kernels/ops.h", '#pragma once\n#include "zerotrain/core/dtype.h"\n')
        self.write("include/zerotrain/zero/plan.h", '#pragma once\n#include "zerotrain/kernels/ops.h"\n')
        self.write("csrc/kernels/cpu/cpu_kernels.h", '#pragma once\n#include "../ops_checks.h"\n')
        self.write("csrc/kernels/ops_checks.h", "#pragma once\n#include <vector>\n")
        self.write("csrc/zero/engine_checkpoint.cpp", '#include "../ckpt/ckpt_internal.h"\n')
        self.write("csrc/ckpt/ckpt_internal.h", '#include "zerotrain/zero/plan.h"\n')

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def run_check(self):
        return subprocess.run([sys.executable, SCRIPT, "--root", self.root], capture_output=True, text=True)

    def test_downward_includes_pass(self):
        # Relative includes into subfolders and a file mapped to a later layer than its folder.
        p = self.run_check()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("core > kernels > zero > ckpt, app", p.stdout)

    def test_upward_include_fails_with_file_and_line(self):
        self.write("csrc/core/dtype.cpp", '// dtype\n#include "zerotrain/core/dtype.h"\n#include "zerotrain/zero/plan.h"\n')
        self.write("csrc/kernels/cpu/cpu_adam.cpp", '#include "../../ckpt/ckpt_internal.h"\n')
        p = self.run_check()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("csrc/core/dtype.cpp:3 -> include/zerotrain/zero/plan.h", p.stdout)
        self.assertIn("csrc/kernels/cpu/cpu_adam.cpp:1 -> csrc/ckpt/ckpt_internal.h", p.stdout)
        self.assertNotIn("dtype.cpp:2", p.stdout)
        self.assertIn("2 offending", p.stderr)

    def test_listed_exception_passes_and_stale_one_fails(self):
        self.write("csrc/core/dtype.cpp", '#include "zerotrain/zero/plan.h"\n')
        self.write("scripts/layer_exceptions.txt",
                   "# known\ncsrc/core/dtype.cpp -> include/zerotrain/zero/plan.h  # until fixed\n")
        p = self.run_check()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("1 listed exception", p.stdout)
        os.remove(os.path.join(self.root, "csrc/core/dtype.cpp"))
        p = self.run_check()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("layer_exceptions.txt:2: 'csrc/core/dtype.cpp -> include/zerotrain/zero/plan.h' no longer occurs",
                      p.stdout)

    def test_bad_inputs_exit_2(self):
        self.write("csrc/newlayer/x.cpp", "int x;\n")
        p = self.run_check()
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("csrc/newlayer/x.cpp is in no layer", p.stderr)
        os.remove(os.path.join(self.root, "csrc/newlayer/x.cpp"))
        self.write("scripts/layer_exceptions.txt", "csrc/core/dtype.cpp include/zerotrain/zero/plan.h\n")
        p = self.run_check()
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("layer_exceptions.txt:1: expected '<file> -> <included file>'", p.stderr)
        self.write("docs/design.md", "# d\n\n## 2. Other\n")
        os.remove(os.path.join(self.root, "scripts/layer_exceptions.txt"))
        p = self.run_check()
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("expected a section '## 2. Layers'", p.stderr)

    def test_repository_table_order(self):
        sys.path.insert(0, os.path.dirname(SCRIPT))
        import check_layers
        layers = check_layers.parse_layers(os.path.join(REPO, "docs", "design.md"))
        order = []
        for _, name, _ in layers:
            if name not in order:
                order.append(name)
        self.assertEqual(order, ["core", "comm", "kernels", "model", "optim", "zero", "ckpt", "sim", "config, data, app"])
        self.assertEqual(check_layers.layer_of("csrc/kernels/cuda/adam.cu", layers)[1], "kernels")
        self.assertEqual(check_layers.layer_of("csrc/zero/engine_checkpoint.cpp", layers)[1], "ckpt")

if __name__ == "__main__":
    unittest.main()
