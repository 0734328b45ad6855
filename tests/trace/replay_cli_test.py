#!/usr/bin/env python3
"""meson test --suite trace (replay_cli): `tools/runsel replay` on input it must refuse.

Every refused input (binary garbage, gzip-compressed garbage, a logalloc line with a
byte that is not UTF-8, a corrupt gzip file, a truncated trace, a missing file, a live
set beyond the machine's memory) must end the command with exit code 2 and exactly one
line on stderr that says what is wrong (and where: a line number or a byte offset),
never a Python traceback. A small log under the memory bound replays, showing dirty,
committed - dirty and the resident memory a forced purge leaves; a live set beyond it
replays with --allow-large-live-set; a log or a trace of a killed process (cut in the
middle of a line or a record) replays with --partial and says so. Only rb_first's
replayer runs.

    tests/trace/replay_cli_test.py --build-dir build
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

# The command line, `python3 -m harness` (what tools/runsel runs), with the tooling
# package's root, experiments/, on the path of the commands these tests run.
CLI = [sys.executable, "-P", "-m", "harness"]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [
    str(Path(__file__).resolve().parents[2] / "experiments"), os.environ.get("PYTHONPATH")]))
BUILD_DIR = Path("build")
PEBIBYTE = 1 << 50


def available_memory() -> int:
    """MemAvailable in bytes (the bound the replayer holds a live set to)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


class RefusalChecks:
    """For a unittest.TestCase: how a refused replay must end (replay_bound_test uses it too)."""

    def assert_refused(self, done: subprocess.CompletedProcess, *wording: str) -> None:
        """Exit code 2 and one line on stderr holding every piece of wording."""
        self.assertNotIn("Traceback", done.stderr)
        self.assertEqual(done.returncode, 2, done.stderr)
        lines = done.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"one line on stderr, not:\n{done.stderr}")
        for words in wording:
            self.assertIn(words, lines[0])


class Replay(RefusalChecks, unittest.TestCase):
    def setUp(self):
        scratch = tempfile.TemporaryDirectory(prefix="runsel-replay-cli-")
        self.addCleanup(scratch.cleanup)
        self.dir = Path(scratch.name)

    def write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    def replay(self, *args: str) -> subprocess.CompletedProcess:
        command = [*CLI, "replay", "--build-dir", str(BUILD_DIR),
                   "--variant", "rb_first", *map(str, args)]
        done = subprocess.run(command, capture_output=True, timeout=300)
        done.stdout = done.stdout.decode("utf-8", "backslashreplace")
        done.stderr = done.stderr.decode("utf-8", "backslashreplace")
        return done

    def garbage(self) -> bytes:
        return random.Random(7).randbytes(3000)

    def test_binary_garbage_is_not_a_trace_or_a_log(self):
        done = self.replay(self.write("garbage.bin", self.garbage()))
        self.assert_refused(done, "not a runsel trace or a logalloc log", "(line 1, column ")

    def test_gzip_of_garbage_is_not_a_trace_or_a_log(self):
        done = self.replay(self.write("garbage.gz", gzip.compress(self.garbage())))
        self.assert_refused(done, "not a runsel trace or a logalloc log", "(line 1, column ")

    def test_a_byte_that_is_not_utf8_is_named_with_its_line(self):
        log = b"7 1 malloc(16)=0x1000\n7 1 malloc(32)=0x2000\n7 1 free(0x1\xff00)\n"
        done = self.replay(self.write("bad-byte.log", log))
        self.assert_refused(done, "malformed logalloc log at line 3, column 13",
                            "7 1 free(0x1\\xff00)")

    def test_a_corrupt_gzip_file(self):
        data = gzip.compress(b"7 1 malloc(16)=0x1000\n" * 1000)
        done = self.replay(self.write("cut.log.gz", data[:len(data) // 2]))
        self.assert_refused(done, "gzip could not decompress it")

    def test_a_truncated_trace_gives_its_byte_offset(self):
        # A valid trace (the converter's), cut in its last record.
        log = self.write("small.log", b"7 1 malloc(16)=0x1000\n7 1 free(0x1000)\n")
        trace = self.dir / "small.trace"
        converted = self.replay("--export-logalloc", self.dir / "unused.log", log)
        self.assert_refused(converted, "not a runsel trace: nothing to export")
        convert = BUILD_DIR / "tools" / "runsel-trace-convert"
        subprocess.run([str(convert), "from-logalloc", str(log), str(trace)], check=True,
                       capture_output=True)
        cut = self.write("cut.trace", trace.read_bytes()[:-3])
        self.assert_refused(self.replay(cut), "malformed trace at byte offset")

    def test_a_missing_file(self):
        self.assert_refused(self.replay(self.dir / "absent"), "no such trace")

    def test_a_live_set_of_a_pebibyte_is_refused_at_once(self):
        log = self.write("pebibyte.log", f"7 1 malloc({PEBIBYTE})=0x10000000\n".encode())
        started = time.monotonic()
        done = self.replay(log)
        self.assert_refused(done, f"{PEBIBYTE} bytes", "--allow-large-live-set")
        self.assertLess(time.monotonic() - started, 60)

    def test_a_live_set_beyond_memory_replays_when_allowed(self):
        # The block cannot be had, so the replay touches nothing and counts a failure.
        log = self.write("pebibyte.log", f"7 1 malloc({PEBIBYTE})=0x10000000\n".encode())
        done = self.replay("--allow-large-live-set", log)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("rb_first: unknown_pointers=0 failed=1 reused_live=0", done.stdout)

    def test_gibibyte_blocks_beyond_memory_are_refused(self):
        # The user's report: lines of malloc(1 GiB) adding up to more than the machine
        # has. Only tried once a pebibyte is refused (unrefused, it would fill memory).
        pebibyte = self.write("pebibyte.log", f"7 1 malloc({PEBIBYTE})=0x10000000\n".encode())
        if self.replay(pebibyte).returncode != 2:
            self.fail("a pebibyte live set is not refused: not trying blocks of a GiB")
        blocks = available_memory() // (1 << 30) + 2
        lines = "".join(f"7 1 malloc({1 << 30})=0x{(i + 1) << 32:x}\n" for i in range(blocks))
        done = self.replay(self.write("gibibytes.log", lines.encode()))
        self.assert_refused(done, f"{blocks << 30} bytes", "--allow-large-live-set")

    def test_a_live_set_under_the_bound_replays(self):
        lines = "".join(f"7 1 malloc({1 << 20})=0x{(i + 1) << 24:x}\n" for i in range(8))
        done = self.replay(self.write("small.log", (lines + "7 1 jemalloc_stats()\n").encode()))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("## peak: after 8 records, 8.0 MiB live requested", done.stdout)
        self.assertIn("## end", done.stdout)

    def test_dirty_and_purged_figures_are_shown(self):
        # 64 blocks of 64 KiB (large runs), all freed: their pages are dirty until a purge.
        lines = "".join(f"7 1 malloc({1 << 16})=0x{(i + 1) << 24:x}\n" for i in range(64))
        lines += "".join(f"7 1 free(0x{(i + 1) << 24:x})\n" for i in range(64))
        done = self.replay(self.write("dirty.log", (lines + "7 1 jemalloc_stats()\n").encode()))
        self.assertEqual(done.returncode, 0, done.stderr)
        header = next(line for line in done.stdout.splitlines() if line.startswith("container"))
        self.assertEqual([word for word in header.split()[1:] if word not in ("vs", "rb_first")],
                         ["committed", "dirty", "committed-dirty", "resident", "purged",
                          "bin_unused"])
        row = next(line for line in done.stdout.split('mark "')[1].splitlines()
                   if line.strip().startswith("rb_first"))
        # The figures are the plain numbers; the differences read "+0 (+0.00%)".
        committed, dirty, footprint, resident, purged, _ = [
            int(word) for word in row.split() if word.isdigit()]
        self.assertGreater(dirty, 0, done.stdout)
        self.assertEqual(footprint, committed - dirty)
        self.assertLess(purged, resident, done.stdout)

    def test_a_log_cut_in_a_line_replays_with_partial_and_says_so(self):
        lines = "".join(f"7 1 malloc(32)=0x{(i + 1) << 12:x}\n" for i in range(100))
        cut = self.write("killed.log", (lines + "7 1 mallo").encode())
        self.assert_refused(self.replay(cut), "line 101", "--partial")
        done = self.replay("--partial", cut)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("partial: used 100 complete lines", done.stdout)
        self.assertIn("dropped the cut last line", done.stdout)
        self.assertIn("## end: after 100 records", done.stdout)

    def test_a_replay_runs_in_the_as_built_profile_unless_told(self):
        # The reported case: `replay --reference firefox` ran runsel in the drop-in
        # library's page level while the report's replays ran as built, so the two
        # disagreed (committed +37 % against Firefox's allocator instead of +0.3 %).
        lines = "".join(f"7 1 malloc(32)=0x{(i + 1) << 12:x}\n" for i in range(100))
        log = self.write("small.log", lines.encode())
        for option, profile in (((), "as_built"), (("--profile", "drop_in"), "drop_in")):
            with self.subTest(profile=profile):
                figures = self.dir / f"{profile}.json"
                done = self.replay(*option, "--json", figures, log)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertIn(f"# profile: {profile}", done.stdout)
                document = json.loads(figures.read_text())
                self.assertEqual(document["replays"]["rb_first"]["profile"], profile)

    def test_a_trace_cut_in_a_record_replays_with_partial_and_says_so(self):
        lines = "".join(f"7 1 malloc(32)=0x{(i + 1) << 12:x}\n" for i in range(100))
        log = self.write("whole.log", lines.encode())
        trace = self.dir / "whole.trace"
        convert = BUILD_DIR / "tools" / "runsel-trace-convert"
        subprocess.run([str(convert), "from-logalloc", str(log), str(trace)], check=True,
                       capture_output=True)
        cut = self.write("killed.trace", trace.read_bytes()[:-13])  # the end record, and more
        self.assert_refused(self.replay(cut), "malformed trace at byte offset")
        done = self.replay("--partial", cut)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertRegex(done.stdout, r"# partial: the trace has no end record \(its process "
                                      r"was killed\); replayed its 9\d complete records")


def run_tests(script_globals: dict, verbosity: int = 1) -> int:
    """Runs the calling script's tests (it runs as __main__) against --build-dir, which it
    reads as its global BUILD_DIR; replay_bound_test uses it too."""
    parser = argparse.ArgumentParser(description=script_globals["__doc__"].splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=script_globals["BUILD_DIR"])
    args, rest = parser.parse_known_args()
    script_globals["BUILD_DIR"] = args.build_dir.resolve()
    return 0 if unittest.main(argv=[sys.argv[0], *rest], verbosity=verbosity,
                              exit=False).result.wasSuccessful() else 1


def main() -> int:
    return run_tests(globals())


if __name__ == "__main__":
    sys.exit(main())
