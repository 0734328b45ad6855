"""meson test --suite harness (harness_cli_testing): tools/runsel test's summary read from
meson's JSON test log (cli_testing.py): the counts, and a failed test named with the end of
its output, so that the last lines of a long CI log say what failed.

    python3 -m harness.test_cli_testing  (in experiments/)
"""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

from . import cli_testing


def write_log(build_dir: Path, records: list[dict]) -> None:
    log = cli_testing.test_log(build_dir)
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(record) + "\n" for record in records))


def record(name: str, result: str, stderr: str = "") -> dict:
    return {"name": name, "result": result, "returncode": 0 if result == "OK" else 1,
            "duration": 2.5, "stdout": "", "stderr": stderr}


class Summary(unittest.TestCase):
    def test_no_log_counts_nothing_and_names_nothing(self):
        with tempfile.TemporaryDirectory() as scratch:
            self.assertIsNone(cli_testing.count_test_results(Path(scratch)))
            self.assertEqual(cli_testing.failure_lines(Path(scratch)), [])

    def test_a_failed_test_is_counted_and_named_with_the_end_of_its_output(self):
        output = "\n".join(f"line {n}" for n in range(30)) + "\nAssertionError: 3 != 4"
        with tempfile.TemporaryDirectory() as scratch:
            build_dir = Path(scratch)
            write_log(build_dir, [record("runsel:lifo / unit", "OK"),
                                  record("runsel:harness / firefox", "FAIL", output),
                                  record("runsel:fuzz / fuzz", "SKIP"),
                                  record("runsel:slow / replay", "TIMEOUT")])
            self.assertEqual(cli_testing.count_test_results(build_dir),
                             {"passed": 1, "failed": 2, "skipped": 1})
            lines = cli_testing.failure_lines(build_dir)
        self.assertEqual(lines[0], "runsel:harness / firefox: FAIL (exit code 1, 2.5 s)")
        self.assertEqual(lines[cli_testing.FAILURE_TAIL_LINES], "    AssertionError: 3 != 4")
        self.assertNotIn("    line 0", lines)
        names = [line for line in lines if not line.startswith("    ")]
        self.assertEqual(names, ["runsel:harness / firefox: FAIL (exit code 1, 2.5 s)",
                                 "runsel:fuzz / fuzz: SKIP (exit code 1, 2.5 s)",
                                 "runsel:slow / replay: TIMEOUT (exit code 1, 2.5 s)"])


if __name__ == "__main__":
    unittest.main()
