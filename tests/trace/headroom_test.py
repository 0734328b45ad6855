#!/usr/bin/env python3
"""meson test --suite trace (headroom): the replayer's headroom bound on a trace made by
hand, whose bound and bin_unused are known by arithmetic at each mark, on every
container's replayer built (rb_first and lifo at least).

One size class of SIZE bytes, PER_RUN regions a run. 3 × PER_RUN blocks fill three runs;
freeing all but the first block of each leaves 3 live regions in 3 runs; freeing the
third run's block empties that run, which its bin keeps (outside the container); PER_RUN
more blocks then fit in the two partly full runs, whichever the container picks:

| mark | live | bound (regions) | bin_unused (regions) | kept empty |
| --- | --- | --- | --- | --- |
| full | 3R | 0 | 0 | 0 |
| fragmented | 3 | R − 3 | 3R − 3 | 0 |
| one run emptied | 2 | R − 2 | 3R − 2 | R |
| refilled | R + 2 | R − 2 | 2R − 2 | R |

The last row's excess over the bound is the kept empty run, which the bound leaves out.

    tests/trace/headroom_test.py --build-dir build
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from replay_cli_test import run_tests  # beside this file: the --build-dir entry point

BUILD_DIR = Path("build")
SIZE = 1024
PER_RUN = 63  # the classic geometry's run for 1024 B: 64 KiB, its header in the 64th region
BASE = 0x10000000


def hand_log() -> str:
    """The logalloc log of the table above (jemalloc_stats() lines are the marks)."""
    blocks = [BASE + index * 0x1000 for index in range(4 * PER_RUN)]
    kept = {blocks[0], blocks[PER_RUN], blocks[2 * PER_RUN]}
    lines = [f"7 1 malloc({SIZE})=0x{block:x}" for block in blocks[:3 * PER_RUN]]
    lines.append("7 1 jemalloc_stats()")
    lines += [f"7 1 free(0x{block:x})" for block in blocks[:3 * PER_RUN] if block not in kept]
    lines.append("7 1 jemalloc_stats()")
    lines.append(f"7 1 free(0x{blocks[2 * PER_RUN]:x})")
    lines.append("7 1 jemalloc_stats()")
    lines += [f"7 1 malloc({SIZE})=0x{block:x}" for block in blocks[3 * PER_RUN:]]
    lines.append("7 1 jemalloc_stats()")
    return "\n".join(lines) + "\n"


R = PER_RUN
# Per mark, in regions of SIZE: (live, bound, bin_unused, kept empty).
EXPECTED = [(3 * R, 0, 0, 0), (3, R - 3, 3 * R - 3, 0), (2, R - 2, 3 * R - 2, R),
            (R + 2, R - 2, 2 * R - 2, R)]


class HeadroomOfAHandMadeTrace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.TemporaryDirectory(prefix="runsel-headroom-test-")
        directory = Path(cls.scratch.name)
        log, cls.trace = directory / "hand.log", directory / "hand.trace"
        log.write_text(hand_log())
        subprocess.run([str(BUILD_DIR / "tools" / "runsel-trace-convert"), "from-logalloc",
                        str(log), str(cls.trace)], check=True, capture_output=True)
        cls.replayers = sorted((BUILD_DIR / "tools").glob("runsel-replay-*"))
        cls.replayers = [path for path in cls.replayers if path.is_file()]

    @classmethod
    def tearDownClass(cls):
        cls.scratch.cleanup()

    def marks(self, replayer: Path) -> list[dict]:
        figures = Path(self.scratch.name) / (replayer.name + ".json")
        done = subprocess.run([str(replayer), "--json", str(figures), str(self.trace)],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        points = json.loads(figures.read_text())["checkpoints"]
        return [point for point in points if point["kind"] == "mark"]

    def test_the_bound_is_the_hand_arithmetic_on_every_container(self):
        names = {path.name.removeprefix("runsel-replay-") for path in self.replayers}
        self.assertTrue({"rb_first", "lifo"} <= names, names)
        for replayer in self.replayers:
            marks = self.marks(replayer)
            self.assertEqual(len(marks), len(EXPECTED), replayer.name)
            for number, (point, expected) in enumerate(zip(marks, EXPECTED), 1):
                with self.subTest(replayer=replayer.name, mark=number):
                    live, bound, unused, kept = expected
                    bin_ = next(b for b in point["bins"] if b["size"] == SIZE)
                    self.assertEqual(bin_["regions_per_run"], PER_RUN)
                    self.assertEqual(bin_["regions_in_use"], live)
                    self.assertEqual(bin_["headroom_bound"], bound * SIZE)
                    self.assertEqual(bin_["unused_bytes"], unused * SIZE)
                    # Nothing else in the heap: the totals are this bin's.
                    self.assertEqual(point["headroom_bound"], bound * SIZE)
                    self.assertEqual(point["bin_unused"], unused * SIZE)
                    self.assertEqual(point["kept_empty_unused"], kept * SIZE)
                    self.assertEqual(point["arenas"], 1)


def main() -> int:
    return run_tests(globals())


if __name__ == "__main__":
    sys.exit(main())
