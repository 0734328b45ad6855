#!/usr/bin/env python3
"""meson test --suite firefox: stock firefox-esr as the workload (tools/firefox/README.md).

- A one-page session recorded with the rtld-audit recorder passes its own checks (every
  process's log complete, the tab marks in it, coverage against the allocator's
  num_operations, no address handed out twice while live), and its content log replays
  on two containers (rb_first, lifo) that agree on every figure the container cannot
  change (records, marks, live and allocated bytes at each mark) and on Firefox's own
  allocator, whose allocated bytes at the tab mark are within 1 % of runsel's.
- A log cut in the middle of a line, plain and as a gzip stream cut short, replays with
  --partial, which says how many lines it used (each line complete and counted here),
  and the cut gzip log is refused without it.
- The recording's own checks count planted faults (a dropped free, a live reuse, a cut
  line), and the Marionette client frames commands and answers (cut anywhere) and turns
  an error answer, or no server, into one clear error.

    tests/firefox/firefox_test.py --build-dir build
Needs firefox-esr (tools/runsel installs it): without it, fails with one line saying so.
"""

from __future__ import annotations

import argparse
import atexit
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from harness import firefox_logs, firefox_record  # PYTHONPATH=experiments (meson sets it)
from webkit import webkit_corpus

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-P", "-m", "harness"]  # the command line; PYTHONPATH holds its package

BUILD_DIR = Path("build")
RECORDING: dict = {}  # the one-page session, recorded once for every test


def recording() -> dict:
    if not RECORDING:
        scratch = tempfile.mkdtemp(prefix="runsel-firefox-test-")
        atexit.register(shutil.rmtree, scratch, True)
        document = firefox_record.record(BUILD_DIR, Path(scratch), pages=1, page_timeout=120,
                                         force=True)
        RECORDING.update(document, directory=Path(document["directory"]))
    return RECORDING


def content_log() -> Path:
    document = recording()
    process = next(p for p in document["processes"] if p["role"] == "content")
    return document["directory"] / process["log"]


def replay(*args: str) -> subprocess.CompletedProcess:
    command = [*CLI, "replay", "--build-dir", str(BUILD_DIR), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          errors="backslashreplace")


class Recording(unittest.TestCase):
    def test_a_one_page_session_passes_its_checks(self):
        document = recording()
        self.assertTrue(document["passed"], document["problems"])
        self.assertEqual([p["role"] for p in document["processes"]], ["parent", "content"])
        for process in document["processes"]:
            with self.subTest(process["role"]):
                self.assertTrue(process["complete"])
                self.assertEqual(process["live_reuses"], 0)
                self.assertGreater(process["calls"], 10_000)
                # Each mark is a line of its own; calls are the other lines.
                self.assertEqual(process["lines"], process["calls"] + process["marks"])
                self.assertGreaterEqual(process["coverage"], firefox_logs.MIN_COVERAGE)
                self.assertLessEqual(process["coverage"], firefox_logs.MAX_COVERAGE)
                for label in ("tab_1_loaded", "tabs_closed"):
                    self.assertIn(label, process["mark_labels"])
        with gzip.open(content_log(), "rt") as log:
            first = log.readline()
        self.assertRegex(first, r"^\d+ \d+ [a-z_]+\([0-9a-fx,]*\)(=0x[0-9a-f]+)?\n$")

    def test_a_session_longer_than_the_open_tabs_closes_the_oldest_and_goes_on(self):
        # The reported case: a 20-page session stopped at page 5, "WebDriver:NewWindow: no
        # such window: Browsing context has been discarded": the new tab was asked for
        # from the tab just closed to make room. One page more than MAX_TABS shows it.
        pages = firefox_record.MAX_TABS + 1
        with tempfile.TemporaryDirectory(prefix="runsel-firefox-test-") as scratch:
            document = firefox_record.record(BUILD_DIR, Path(scratch), pages=pages,
                                             page_timeout=120, force=True)
        self.assertTrue(document["passed"], document["problems"])
        self.assertEqual(len(document["pages"]), pages)
        content = next(p for p in document["processes"] if p["role"] == "content")
        self.assertIn(f"tab_{pages}_loaded", content["mark_labels"])
        self.assertIn("tabs_closed", content["mark_labels"])

    def test_a_page_that_calls_window_print_is_recorded_and_the_session_goes_on(self):
        # The reported case: the default set's long session (pages 26 to 7) was left out,
        # "driving Firefox failed: timed out", at page 25, the Rust book's print.html,
        # which calls window.print() once loaded; the modal dialog held its tab. It is
        # recorded here with the page after it in that session.
        pages = webkit_corpus.corpus_pages(ROOT / "experiments" / "webkit" / "corpus.json",
                                           1, None)
        printing = [page for page in pages if page["path"].endswith("/book/print.html")]
        self.assertEqual(len(printing), 1, "the corpus's print.html page")
        chosen = [printing[0], pages[23]]
        with tempfile.TemporaryDirectory(prefix="runsel-firefox-test-") as scratch:
            document = firefox_record.record_pages(BUILD_DIR, Path(scratch) / "session",
                                                   chosen, page_timeout=120, force=True)
        self.assertTrue(document["passed"], document["problems"])
        content = next(p for p in document["processes"] if p["role"] == "content")
        self.assertIn("tab_2_loaded", content["mark_labels"])

    def test_the_content_log_replays_on_two_containers_and_on_firefox(self):
        with tempfile.TemporaryDirectory() as scratch:
            figures = Path(scratch) / "replays.json"
            done = replay("--variant", "rb_first", "--variant", "lifo", "--reference", "firefox",
                          "--json", figures, content_log())
            self.assertEqual(done.returncode, 0, done.stderr)
            replays = json.loads(figures.read_text())["replays"]
        self.assertEqual(sorted(replays), ["firefox", "lifo", "rb_first"])
        marks = {name: [p for p in doc["checkpoints"] if p["kind"] == "mark"]
                 for name, doc in replays.items()}
        self.assertGreaterEqual(len(marks["lifo"]), 3)  # tab_1_loaded, tabs_closed, exit
        for name in ("lifo", "firefox"):
            self.assertEqual(replays[name]["trace"]["records"],
                             replays["rb_first"]["trace"]["records"])
            self.assertEqual(replays[name]["replay"]["reused_live"], 0)
            self.assertEqual(replays[name]["replay"]["checksum"],
                             replays["rb_first"]["replay"]["checksum"])
            for mine, theirs in zip(marks[name], marks["rb_first"]):
                self.assertEqual(mine["live_requested"], theirs["live_requested"])
        for mine, theirs in zip(marks["lifo"], marks["rb_first"]):
            self.assertEqual(mine["allocated"], theirs["allocated"])  # the same classes
        tab = marks["lifo"][0]
        self.assertAlmostEqual(marks["firefox"][0]["allocated"] / tab["allocated"], 1, delta=0.01)
        self.assertEqual(replays["firefox"]["variant"], "firefox")


class MarionetteClient(unittest.TestCase):
    """harness/marionette.py against a loopback server that frames its answers in pieces."""

    def test_commands_answers_and_errors(self):
        import json as json_module
        import socket
        import threading

        from harness.marionette import Marionette, MarionetteError
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        seen = []

        def frame(message) -> bytes:
            data = json_module.dumps(message).encode()
            return str(len(data)).encode() + b":" + data

        def serve():
            connection, _ = listener.accept()
            with connection:
                greeting = frame({"applicationType": "gecko", "marionetteProtocol": 3})
                connection.sendall(greeting[:3])  # a length cut before its colon
                connection.sendall(greeting[3:])
                pending = b""
                for answer in ({"value": {"handle": "42"}}, None):
                    while b":" not in pending or len(pending.split(b":", 1)[1]) < \
                            int(pending.split(b":", 1)[0]):
                        pending += connection.recv(4096)
                    length, rest = pending.split(b":", 1)
                    command, pending = json_module.loads(rest[:int(length)]), rest[int(length):]
                    seen.append(command)
                    if answer is None:
                        reply = frame([1, command[1], {"error": "no such window",
                                                       "message": "gone"}, None])
                    else:
                        reply = frame([1, command[1], None, answer])
                    connection.sendall(reply[:7])
                    connection.sendall(reply[7:])
        server = threading.Thread(target=serve, daemon=True)
        server.start()
        client = Marionette(port, timeout=10)
        greeting = client.connect(time.monotonic() + 10, lambda: True)
        self.assertEqual(greeting["marionetteProtocol"], 3)
        self.assertEqual(client.command("WebDriver:NewWindow", {"type": "tab"}), {"handle": "42"})
        with self.assertRaisesRegex(MarionetteError, "WebDriver:CloseWindow: no such window"):
            client.command("WebDriver:CloseWindow")
        client.close()
        server.join(10)
        listener.close()
        self.assertEqual([c[2] for c in seen], ["WebDriver:NewWindow", "WebDriver:CloseWindow"])
        self.assertEqual(seen[0][0], 0)
        self.assertEqual(seen[1][1], seen[0][1] + 1)  # message ids count up

    def test_no_server_is_one_clear_error(self):
        from harness.marionette import Marionette, MarionetteError
        port = firefox_record.free_port()
        with self.assertRaisesRegex(MarionetteError, f"no Marionette server on 127.0.0.1:{port}"):
            Marionette(port).connect(time.monotonic() + 0.5, lambda: True)


class LogChecks(unittest.TestCase):
    """The recording's own checks (firefox_logs.check_log) on a log with planted faults."""

    LINES = ["1 1 malloc(16)=0x10", "1 1 malloc(16)=0x20", "1 2 free(0x10)",
             "1 2 free(0x999)",              # never handed out: a dropped free
             "1 1 realloc(0x20,32)=0x30",    # frees 0x20
             "1 1 malloc(8)=0x30",           # 0x30 handed out again while live
             "1 1 jemalloc_stats()", "1 1 free(0x0)", "1 1 calloc(2,8)=0x40",
             "1 1 realloc(0x777,0)=0x0"]     # frees an address never handed out

    def check(self, text: str) -> dict:
        with tempfile.TemporaryDirectory() as scratch:
            log = Path(scratch) / "1.log.gz"
            log.write_bytes(gzip.compress(text.encode()))
            return firefox_logs.check_log(log)

    def test_planted_faults_are_counted(self):
        figures = self.check("\n".join(self.LINES) + "\n")
        self.assertEqual(figures, {"lines": 10, "calls": 9, "marks": 1, "frees": 4,
                                   "frees_dropped": 2, "live_reuses": 1, "complete": True})

    def test_a_cut_log_counts_its_complete_lines(self):
        figures = self.check("\n".join(self.LINES) + "\n1 1 mall")
        self.assertFalse(figures["complete"])
        self.assertEqual(figures["lines"], 10)
        self.assertEqual(figures["live_reuses"], 1)


class Coverage(unittest.TestCase):
    """Coverage against num_operations, which mozjemalloc sums over the arenas alive."""

    @staticmethod
    def marks(*pairs: tuple[int, int]) -> list[dict]:
        return [{"label": f"mark_{n}", "calls": calls, "stats": {"num_operations": operations}}
                for n, (calls, operations) in enumerate(pairs, 1)]

    def test_it_is_checked_before_an_arena_takes_its_count_away(self):
        # The 20-page session as recorded: 99 % up to tab 9, then an arena disposed of
        # took 1.5 M operations from the sum, and the end read 129 %.
        marks = self.marks((9_175_974, 9_271_054), (9_598_339, 7_779_336),
                           (18_416_688, 14_314_620))
        self.assertEqual(firefox_logs.coverage_mark(marks)["label"], "mark_1")

    def test_a_count_that_never_falls_is_checked_at_the_last_mark(self):
        marks = self.marks((10, 11), (20, 21), (30, 31))
        self.assertEqual(firefox_logs.coverage_mark(marks)["label"], "mark_3")

    def test_a_session_that_lost_calls_after_the_fall_still_fails(self):
        summary = {"role": "content", "pid": 1, "live_reuses": 0, "coverage": 0.99,
                   "coverage_mark": "mark_1", "least_coverage": 0.5,
                   "frees_dropped_share": 0.0, "mark_labels": ["tabs_closed"]}
        problems = firefox_logs.problems_of(summary, ["tabs_closed"])
        self.assertEqual(len(problems), 1)
        self.assertIn("fall to 50.0%", problems[0])


class Partial(unittest.TestCase):
    def setUp(self):
        scratch = tempfile.TemporaryDirectory(prefix="runsel-firefox-partial-")
        self.addCleanup(scratch.cleanup)
        self.dir = Path(scratch.name)
        with gzip.open(content_log(), "rb") as log:
            self.text = log.read(4_000_000)

    def cut_mid_line(self) -> tuple[bytes, int]:
        """The text cut 7 bytes into a line; the number of complete lines before it."""
        end = self.text.rfind(b"\n", 0, len(self.text) // 2) + 1
        return self.text[:end + 7], self.text[:end].count(b"\n")

    def used(self, done: subprocess.CompletedProcess) -> int:
        found = re.search(r"partial: used (\d+) complete lines", done.stdout)
        self.assertIsNotNone(found, done.stdout + done.stderr)
        return int(found.group(1))

    def test_a_plain_log_cut_mid_line(self):
        data, complete = self.cut_mid_line()
        log = self.dir / "cut.log"
        log.write_bytes(data)
        done = replay("--variant", "rb_first", "--partial", log)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.used(done), complete)
        self.assertIn("dropped the cut last line", done.stdout)
        self.assertIn(f"{complete} records", done.stdout)
        without = replay("--variant", "rb_first", log)  # the cut line is malformed
        self.assertEqual(without.returncode, 2, without.stdout)
        self.assertIn("malformed logalloc log at line", without.stderr)

    def test_a_gzip_stream_cut_short(self):
        whole = gzip.compress(self.text, compresslevel=1)
        log = self.dir / "cut.log.gz"
        log.write_bytes(whole[:len(whole) // 2])
        done = replay("--variant", "rb_first", "--partial", log)
        self.assertEqual(done.returncode, 0, done.stderr)
        used = self.used(done)
        self.assertIn("the gzip stream ends early", done.stdout)
        self.assertGreater(used, 1000)
        self.assertIn(f"{used} records", done.stdout)  # every line used became a record
        refused = replay("--variant", "rb_first", log)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("cut short", refused.stderr)


def main() -> int:
    global BUILD_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", type=Path, required=True)
    args, rest = parser.parse_known_args()
    BUILD_DIR = args.build_dir.resolve()
    try:
        firefox_record.firefox_version()
    except firefox_record.RecordFailed as failure:
        print(f"firefox_test: {failure}", file=sys.stderr)
        return 1
    return 0 if unittest.main(argv=[sys.argv[0], *rest], exit=False).result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
