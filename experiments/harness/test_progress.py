"""meson test --suite harness (harness_progress): the report's progress lines
(progress.py) without a run: the estimates from a previous results.json of the same kind
or the fixed ones, the time left as the steps go, the lines' form and the closing lines.

    python3 -m harness.test_progress  (in experiments/)
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from . import progress

LINE = re.compile(r"^== \[(\d)/6\] ([a-z ]+): (.*); (\d+:\d\d) elapsed, about (\d+:\d\d) left$")


def previous(out: Path, quick: bool = True, repeat: int = 5, scale: float = 0.05) -> None:
    """A results.json as the harness writes it, as far as progress.py reads it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({
        "settings": {"quick": quick, "repeat": repeat, "scale": scale},
        "phase_seconds": {"recordings": 1.5, "timed runs": 50.0, "deterministic steps": 30.0,
                          "statistics": 2.0}}))


class Estimates(unittest.TestCase):
    def test_a_previous_run_of_the_same_kind_gives_the_harness_steps(self):
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch)
            previous(out)
            found, source = progress.estimates(out, True, 5, 0.05)
            self.assertEqual({step: found[step] for step in progress.PHASES},
                             {"recordings": 1.5, "timed runs": 50.0, "replays": 30.0,
                              "statistics": 2.0 + progress.REPORT_WRITING_SECONDS})
            self.assertIn(str(out / "results.json"), source)
            self.assertEqual(found["build"], progress.ESTIMATES["quick"]["build"])

    def test_another_kind_of_run_or_none_gives_the_fixed_estimates(self):
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch)
            self.assertEqual(progress.estimates(out, True, 5, 0.05)[0],
                             progress.ESTIMATES["quick"])
            previous(out, quick=False, repeat=12, scale=1.0)
            self.assertEqual(progress.estimates(out, True, 5, 0.05)[0],
                             progress.ESTIMATES["quick"])
            self.assertEqual(progress.estimates(out, False, 3, 1.0)[0],
                             progress.ESTIMATES["default"])
            (out / "results.json").write_text("{not json")
            self.assertEqual(progress.estimates(out, False, 12, 1.0)[0],
                             progress.ESTIMATES["default"])

    def test_an_unconfigured_build_has_the_fixed_estimate(self):
        with tempfile.TemporaryDirectory() as scratch:
            self.assertEqual(progress.build_estimate(Path(scratch), [], True)[0],
                             progress.ESTIMATES["quick"]["build"])

    @unittest.skipUnless(shutil.which("ninja"), "no ninja")
    def test_a_configured_build_is_estimated_from_ninjas_count(self):
        """Two commands to run: twice a command's seconds; none: 0; a build.ninja that
        would be regenerated first (ninja -n stops there): the fixed estimate."""
        with tempfile.TemporaryDirectory() as scratch:
            build = Path(scratch)
            (build / "build.ninja").write_text(
                "rule regen\n  command = touch build.ninja\n  description = Regenerating "
                "build files.\n  generator = 1\nrule copy\n  command = cp $in $out\n"
                "build build.ninja: regen layout.txt\nbuild a: copy src\nbuild b: copy src\n")
            for name in ("layout.txt", "src"):
                (build / name).touch()
            os.utime(build / "layout.txt", (time.time() - 60,) * 2)  # older than build.ninja
            self.assertEqual(progress.build_estimate(build, ["a", "b"], False),
                             (2 * progress.BUILD_SECONDS_PER_COMMAND, "ninja, 2 commands to run"))
            self.assertEqual(progress.build_estimate(build, None, False)[0],
                             progress.ESTIMATES["default"]["build"])
            subprocess.run(["ninja", "-C", str(build), "a", "b"], check=True,
                           capture_output=True)
            self.assertEqual(progress.build_estimate(build, ["a", "b"], False),
                             (0.0, "ninja, 0 commands to run"))
            os.utime(build / "layout.txt", (time.time() + 60,) * 2)  # newer: regenerate first
            self.assertEqual(progress.build_estimate(build, ["a", "b"], False),
                             (progress.ESTIMATES["default"]["build"], "ninja, after "
                              "regenerating its build files: a fresh build's estimate"))


class Lines(unittest.TestCase):
    def test_clock(self):
        self.assertEqual([progress.clock(s) for s in (0, 7.4, 185, 3729)],
                         ["0:00", "0:07", "3:05", "1:02:09"])

    def test_one_line_per_start_and_end_with_elapsed_and_left(self):
        estimated = {"installs": 0.0, "build": 100.0, "recordings": 10.0, "timed runs": 40.0,
                     "replays": 30.0, "statistics": 5.0}
        stream = io.StringIO()
        started = time.time() - 65
        with mock.patch.dict(os.environ, {progress.STARTED_VARIABLE: f"{started:.3f}"}):
            steps = progress.Progress(estimated, "fixed", stream)
        steps.end("installs", "checked", seconds=0.2)
        steps.start("build", estimate=20.0)
        steps.end("build")
        steps.start("timed runs")
        lines = stream.getvalue().splitlines()
        self.assertEqual(len(lines), 4)
        parsed = [LINE.match(line) for line in lines]
        self.assertTrue(all(parsed), lines)
        self.assertEqual([(m[1], m[2]) for m in parsed],
                         [("1", "installs"), ("2", "build"), ("2", "build"), ("4", "timed runs")])
        self.assertTrue(parsed[0][3].startswith("done in 0:00 (checked)"))
        self.assertEqual(parsed[0][4], "1:05")  # from the report's start, not this process's
        # Left: the build's new estimate and every later step; after it, the later ones.
        self.assertEqual(parsed[1][5], progress.clock(20 + 10 + 40 + 30 + 5))
        self.assertEqual(parsed[2][5], progress.clock(10 + 40 + 30 + 5))
        self.assertEqual(parsed[3][5], progress.clock(40 + 30 + 5))

    def test_the_closing_lines_give_the_answer_the_path_and_the_total(self):
        out = Path("/tmp/r")
        text = progress.closing("**In short**, rb_first.", [out / "report.html",
                                out / "report.md", out / "results.json"], 125.2)
        self.assertEqual(text.splitlines()[1:], [
            "In short, rb_first.", "", "report:  /tmp/r/report.html", "         /tmp/r/report.md",
            "results: /tmp/r/results.json",
            "total:   2:05 (125 s since tools/runsel report began)"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
