#!/usr/bin/env python3
"""meson test --suite style (style_planted): each of the style test's checks finds a
violation planted in a small tree made here, and passes the same tree without it, so a
check that could no longer fail fails this test.

    tests/style/planted_test.py
"""

from __future__ import annotations

import shutil
import tempfile
import unittest
from pathlib import Path

import style_test  # beside this file

CLEAN = {
    "memory/platform/os.h": '#pragma once\n\n#include "platform/lock.h"\n',
    "memory/platform/lock.h": "#pragma once\n",
    "memory/arena/arena.h": '#pragma once\n\n#include "platform/os.h"\n#include "runsel.h"\n',
    "tools/tool.py": "import sys\n\nprint(sys.argv)\n",
    "tools/trace/recorder.h": "#pragma once\n",
    "experiments/trace/format.h": "#pragma once\n",
    "experiments/workloads/replay.cpp": '#include "format.h"\n',
    # The tooling package in three layers, each importing only those below it.
    "experiments/harness/__init__.py": ('LAYERS = (\n    ("report run", ("harness",)),\n'
                                        '    ("runs", ("runs", "counting")),\n'
                                        '    ("render", ("__init__", "report")),\n)\n'),
    "experiments/harness/harness.py": "from . import report, runs\n\nprint(report.TITLE, runs)\n",
    "experiments/harness/runs.py": "from . import counting\n\nRUNS = counting.COUNT\n",
    "experiments/harness/counting.py": "COUNT = 1\n",
    "experiments/harness/report.py": 'TITLE = "report"\n',
}
# One violation each: the check that must find it, the planted file's path and text.
PLANTED = {
    "clang_format": ("clang_format", "memory/arena/bad.cpp", "int  f( int x ){return x;}\n"),
    "ruff": ("ruff", "tools/bad.py", "import os\n"),  # unused import (F401)
    "layers": ("layers", "memory/platform/up.h", '#pragma once\n\n#include "arena/arena.h"\n'),
    "layers_experiments": ("layers", "experiments/workloads/up.cpp", '#include "recorder.h"\n'),
    # A render module importing a run module.
    "layers_package": ("layers", "experiments/harness/report.py",
                       'from . import runs\n\nTITLE = "report"\nprint(runs)\n'),
    # Two modules of one layer importing each other: the order allows it, a cycle not.
    "layers_package_cycle": ("layers", "experiments/harness/counting.py",
                             "from . import runs\n\nCOUNT = 1\nprint(runs)\n"),
    # A module the package's layer map leaves out.
    "layers_package_map": ("layers", "experiments/harness/unlisted.py", "VALUE = 1\n"),
}


class PlantedViolations(unittest.TestCase):
    def tree(self, planted: tuple[str, str] | None) -> Path:
        root = Path(self.enterContext(tempfile.TemporaryDirectory(prefix="style-")))
        for name in (".clang-format", "ruff.toml"):
            shutil.copy(style_test.ROOT / name, root / name)
        files = dict(CLEAN)
        if planted:
            files[planted[0]] = planted[1]
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        return root

    def problems(self, root: Path, check: str) -> list[str]:
        files = style_test.repository_files(root)
        return style_test.CHECKS[check](root, files)

    def test_each_check_passes_the_clean_tree(self):
        root = self.tree(None)
        for check in style_test.CHECKS:
            with self.subTest(check=check):
                self.assertEqual(self.problems(root, check), [])

    def test_each_check_finds_its_planted_violation(self):
        for name, (check, *planted) in PLANTED.items():
            with self.subTest(check=name):
                found = self.problems(self.tree(tuple(planted)), check)
                self.assertTrue(found, f"{check} missed {planted[0]}")
                self.assertTrue(all(planted[0].split("/")[-1] in line for line in found), found)


if __name__ == "__main__":
    unittest.main()
