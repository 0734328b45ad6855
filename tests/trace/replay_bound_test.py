#!/usr/bin/env python3
"""meson test --suite trace (replay_bound): what `tools/runsel replay` and its programs may
hold, whatever the input claims: the reported cases of a log with thousands of marks, a
trace of ten million live blocks and a converter fed one endless line.

- Marks: a gzip log of 3,000 `jemalloc_stats()` lines (a checkpoint each, about 6 KB of
  JSON per container) replays on every container with the front door and everything it
  runs under 256 MiB; 30,000 marks take no more than 3,000 (one container: 30,000 forked
  checkpoints on all twelve would take minutes). The --json output of a small log is
  every replayer's own document, as json.dumps(indent=1) writes it.
- Blocks: a trace of 10^7 live malloc(0) (30 MB; 0 live bytes, 1 GiB of slot tables)
  under `ulimit -v` 1 GiB is refused by the replayer and by the front door with exit
  code 2 and one line; under 3 GiB it replays, and the replayer's peak resident memory
  stays within what it announced it would hold, itself within the bound it announced.
- Lines: a gzip log holding one 500 MB line is refused (exit 2, one line, its byte
  offset) by a converter that never holds the line; a long line further on is named by
  its number and offset, and --partial drops an over-long cut last line.

Peak memory is measured as the user would with /usr/bin/time: a fresh python runs the
command and reads getrusage(RUSAGE_CHILDREN).ru_maxrss, the largest of the command and
every process it ran.

    tests/trace/replay_bound_test.py --build-dir build
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from replay_cli_test import RefusalChecks, run_tests  # beside this file

# The command line, `python3 -m harness` (what tools/runsel runs), with the tooling
# package's root, experiments/, on the path of the commands these tests run.
CLI = [sys.executable, "-P", "-m", "harness"]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [
    str(Path(__file__).resolve().parents[2] / "experiments"), os.environ.get("PYTHONPATH")]))
BUILD_DIR = Path("build")
MIB = 1 << 20
GIB = 1 << 30

# Runs argv[2:] and writes the largest peak resident memory (KiB) of it and of every
# process it ran into argv[1]; exits with its code.
MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code if code >= 0 else 128 - code)\n")


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def zero_byte_blocks_trace(path: Path, blocks: int) -> None:
    """A runsel trace (tools/trace/format.md) of `blocks` live malloc(0), 16 bytes apart:
    three bytes a record."""
    first = 1 << 32
    with open(path, "wb") as out:
        out.write(b"RSTR\x02\x00" + varint(7))
        out.write(b"\x01\x00" + varint((first << 1) + 1))  # malloc, size 0, the first address
        rest = b"\x01\x00\x21"  # malloc, size 0, 16 bytes after the previous (zigzag 32, + 1)
        for done in range(1, blocks, 1 << 20):
            out.write(rest * min(1 << 20, blocks - done))
        out.write(b"\x0f" + blocks.to_bytes(8, "little"))


class Bounds(RefusalChecks, unittest.TestCase):
    def setUp(self):
        scratch = tempfile.TemporaryDirectory(prefix="runsel-replay-bound-")
        self.addCleanup(scratch.cleanup)
        self.dir = Path(scratch.name)

    def run_measured(self, command: list, address_space: int | None = None,
                     timeout: float = 600) -> tuple[subprocess.CompletedProcess, int, Path]:
        """Runs command (stdout into a file, stderr kept), under RLIMIT_AS (ulimit -v) when
        given; returns the result, the peak resident bytes of it and all it ran, and the
        stdout file."""
        rss = self.dir / "maxrss"
        out = self.dir / "stdout"

        def limit():
            if address_space is not None:
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

        with open(out, "wb") as stdout:
            done = subprocess.run([sys.executable, "-c", MEASURE, str(rss), *map(str, command)],
                                  stdout=stdout, stderr=subprocess.PIPE, timeout=timeout,
                                  preexec_fn=limit)
        done.stderr = done.stderr.decode("utf-8", "backslashreplace")
        return done, int(rss.read_text()) * 1024, out

    def front_door(self, *args) -> list:
        return [*CLI, "replay", "--build-dir", str(BUILD_DIR), *args]

    def replayer(self, container: str = "rb_first") -> Path:
        return BUILD_DIR / "tools" / f"runsel-replay-{container}"

    # --- case 6: marks ---------------------------------------------------------------

    def marks_log(self, marks: int) -> Path:
        path = self.dir / f"marks{marks}.log.gz"
        path.write_bytes(gzip.compress(b"7 1 jemalloc_stats()\n" * marks, 9))
        return path

    def assert_marks_shown(self, out: Path, marks: int, containers: int) -> None:
        """Every mark has its section, in order, with a row per container, and the end."""
        seen, rows, row_counts = 0, 0, set()
        last = None
        with open(out, encoding="utf-8", errors="backslashreplace") as text:
            for line in text:
                if line.startswith("## "):
                    if last is not None:
                        row_counts.add(rows)
                    rows, last = 0, line
                    if line.startswith('## mark "jemalloc_stats #'):
                        seen += 1
                        self.assertTrue(line.startswith(
                            f'## mark "jemalloc_stats #{seen} (line {seen})": after {seen} '
                            "records"), line)
                elif line.startswith("bin_unused per size class"):
                    row_counts.add(rows)
                    rows, last = 0, None
                elif last is not None and line.split()[:1] not in ([], ["container"]):
                    rows += 1
        self.assertEqual(seen, marks)
        self.assertEqual(row_counts, {containers})
        with open(out, "rb") as text:
            text.seek(max(0, out.stat().st_size - 20000))
            self.assertIn(b"## end: after", text.read())

    def test_3000_marks_on_every_container_under_256_mib(self):
        done, peak, out = self.run_measured(self.front_door(self.marks_log(3000)))
        self.assertEqual(done.returncode, 0, done.stderr)
        containers = len(re.search(r"; replayed on (.*), one thread", out.read_text())
                         .group(1).split(", "))
        self.assertGreaterEqual(containers, 12)
        self.assert_marks_shown(out, 3000, containers)
        print(f"3,000 marks, {containers} containers: peak {peak / MIB:.1f} MiB")
        self.assertLess(peak, 256 * MIB)

    def test_30000_marks_take_no_more_than_3000(self):
        peaks = {}
        for marks in (3000, 30000):
            done, peaks[marks], out = self.run_measured(
                self.front_door("--variant", "rb_first", self.marks_log(marks)))
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assert_marks_shown(out, marks, 1)
        # With --json as well: written as it goes, not held.
        figures = self.dir / "figures.json"
        done, with_json, _ = self.run_measured(
            self.front_door("--variant", "rb_first", "--json", figures, self.marks_log(3000)))
        self.assertEqual(done.returncode, 0, done.stderr)
        document = json.loads(figures.read_text())
        self.assertEqual(len(document["replays"]["rb_first"]["checkpoints"]), 3001)
        print(f"rb_first: peak {peaks[3000] / MIB:.1f} MiB with 3,000 marks, "
              f"{peaks[30000] / MIB:.1f} MiB with 30,000, {with_json / MIB:.1f} MiB with 3,000 "
              "and --json")
        self.assertLess(max(peaks.values()), 256 * MIB)
        self.assertLess(with_json, 256 * MIB)
        # The same program with ten times the marks: within a few MiB (the interpreter's
        # own noise), where holding the checkpoints took ten times as much.
        self.assertLessEqual(peaks[30000], peaks[3000] + 8 * MIB)

    def test_json_output_is_every_replayers_document(self):
        lines = "".join(f"7 1 malloc({64 << i})=0x{(i + 1) << 20:x}\n7 1 jemalloc_stats()\n"
                        for i in range(4))
        log = self.dir / "small.log"
        log.write_text(lines + "7 1 free(0x100000)\n")
        figures = self.dir / "figures.json"
        done = subprocess.run(self.front_door("--variant", "rb_first", "--variant", "lifo",
                                              "--json", figures, log),
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)
        trace = self.dir / "small.log.trace"  # the name the front door gives it
        subprocess.run([self.converter(), "from-logalloc", log, trace], check=True,
                       capture_output=True)
        replays = {}
        for container in ("rb_first", "lifo"):  # in the profile the front door replays in
            own = self.dir / f"{container}.json"
            subprocess.run([self.replayer(container), "--json", own, trace], check=True,
                           capture_output=True,
                           env={**os.environ, "RUNSEL_CONF": "profile:as_built"})
            replays[container] = json.loads(own.read_text())
        written = figures.read_text()
        document = json.loads(written)
        self.assertEqual(written, json.dumps(document, indent=1) + "\n")
        self.assertEqual(document["reference"], "rb_first")
        self.assertEqual(document["replays"], replays)

    # --- case 7: blocks ----------------------------------------------------------------

    def test_ten_million_blocks_refused_or_replayed_within_the_bound(self):
        trace = self.dir / "zero-byte-blocks.trace"
        zero_byte_blocks_trace(trace, 10_000_000)

        # Under ulimit -v 1 GiB: the slot tables alone cannot fit.
        done, _, out = self.run_measured([self.replayer(), trace], address_space=GIB)
        self.assert_refused(done, "runsel-replay: ", "live blocks", "slot tables",
                                     "ulimit -v")
        self.assertEqual(out.read_bytes(), b"")
        done, _, _ = self.run_measured(self.front_door("--variant", "rb_first", trace),
                                       address_space=GIB)
        self.assert_refused(done, "runsel replay: ", "live blocks", "slot tables",
                                     "ulimit -v")

        # Under ulimit -v 3 GiB it fits: replayed within what it announced.
        done, peak, out = self.run_measured(self.front_door("--variant", "rb_first", trace),
                                            address_space=3 * GIB)
        self.assertEqual(done.returncode, 0, done.stderr)
        text = out.read_text()
        announced = re.search(r"# memory: a replay holds at most (\d+) bytes \(.*\), within the "
                              r"(\d+) bytes of ([^;\n]+)", text)
        self.assertIsNotNone(announced, text[:3000])
        holds, bound = int(announced.group(1)), int(announced.group(2))
        print(f"10^7 blocks under ulimit -v 3 GiB: peak {peak / MIB:.1f} MiB, announced "
              f"{holds / MIB:.1f} MiB within {bound / MIB:.1f} MiB ({announced.group(3)})")
        self.assertIn("ulimit -v", announced.group(3))
        self.assertLessEqual(holds, bound)
        self.assertLessEqual(peak, holds)
        self.assertNotIn("failed=", text, "every block could be had")

    # --- case 8: an over-long line -------------------------------------------------------

    def converter(self) -> Path:
        return BUILD_DIR / "tools" / "runsel-trace-convert"

    def test_a_500_mb_line_is_refused_without_holding_it(self):
        log = self.dir / "long-line.log.gz"
        with gzip.open(log, "wb", compresslevel=6) as out:
            out.write(b"7 1 malloc(16)=0x1000")
            chunk = b"x" * MIB
            for _ in range(500):
                out.write(chunk)
            out.write(b"\n7 1 free(0x1000)\n")
        self.assertLess(log.stat().st_size, 3 * MIB)
        done, peak, out = self.run_measured([self.converter(), "from-logalloc", log,
                                             self.dir / "out.trace"])
        print(f"a 500 MB line: the converter's peak {peak / MIB:.1f} MiB")
        self.assertLess(peak, 64 * MIB)
        self.assert_refused(done, "line 1", "byte offset 0", "7 1 malloc(16)=0x1000x")
        self.assertFalse((self.dir / "out.trace").exists())
        done, peak, _ = self.run_measured(self.front_door("--variant", "rb_first", log))
        self.assert_refused(done, "runsel replay: ", "line 1", "byte offset 0")
        self.assertLess(peak, 256 * MIB)

    def test_a_long_line_further_on_is_named_with_its_offset(self):
        log = self.dir / "long.log"
        log.write_bytes(b"7 1 malloc(16)=0x1000\n7 1 malloc(16)=0x2000\n7 1 free(0x" +
                        b"0" * 100000 + b"1000)\n")
        done = subprocess.run([self.converter(), "from-logalloc", log, self.dir / "out.trace"],
                              capture_output=True, text=True, errors="backslashreplace")
        self.assert_refused(done, "line 3", "byte offset 44")
        # --partial drops a cut last line, however long.
        log.write_bytes(b"7 1 malloc(16)=0x1000\n7 1 free(0x1000)\n7 1 malloc(16)=0x" +
                        b"0" * 100000)
        done = subprocess.run([self.converter(), "from-logalloc", "--partial", log,
                               self.dir / "out.trace"],
                              capture_output=True, text=True, errors="backslashreplace")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("partial: used 2 complete lines", done.stdout)
        self.assertIn("dropped the cut last line", done.stdout)


def main() -> int:
    return run_tests(globals(), verbosity=2)


if __name__ == "__main__":
    sys.exit(main())
