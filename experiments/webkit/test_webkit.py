#!/usr/bin/env python3
"""meson test --suite harness (harness_webkit): the webkit driver end to end, cheaply.

- The trace-mark file has the layout the recorder reads (count, then labels).
- A corpus that does not match its pins is refused, naming the file.
- A page that does not load fails the run, naming its URL.
- Two pages under one runsel variant: both loaded (title and the search's results),
  every web process served by runsel (its RUNSEL_STATS line: pid and variant) with
  Malloc=1 in its environment (/proc/<pid>/environ) and hundreds of thousands of mallocs,
  checkpoints with the web processes' resident memory, and one trace mark per checkpoint.

    PYTHONPATH=experiments experiments/webkit/test_webkit.py --build-dir build [--variant rb_first]
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from trace_marks import TraceMarks  # this directory's (standard library only)
from webkit_corpus import CORPUS

from harness.allocators import measured_environment
from harness.interpreter import SYSTEM_PYTHON
from harness.webkit_record import DRIVER

MISSING_PAGE = "file:///nonexistent/runsel-webkit-test/missing-page.html"


class Failures(list):
    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.append(message)


def drive(arguments: list[str], preload: Path | None = None, marks: Path | None = None,
          timeout: float = 300) -> subprocess.CompletedProcess:
    environment = measured_environment(preload, **({"RUNSEL_TRACE_MARKS": str(marks)}
                                                   if marks else {}))
    command = [SYSTEM_PYTHON, str(DRIVER), *arguments]
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, env=environment, capture_output=True, text=True,
                          timeout=timeout)


def published_labels(path: Path) -> tuple[int, list[str], bytes]:
    data = path.read_bytes()
    count = struct.unpack_from("<Q", data, 0)[0]
    labels = data[TraceMarks.LABELS_START:].split(b"\0")[:count]
    return count, [label.decode() for label in labels], data


def check_mark_layout(scratch: Path, failures: Failures) -> None:
    path = scratch / "layout.marks"
    path.write_bytes(b"\xff" * 100)  # left over from an earlier run: must be zeroed
    inode = path.stat().st_ino
    marks = TraceMarks(str(path))
    marks.publish("tab_1_loaded")
    marks.publish("tabs_closed")
    count, labels, data = published_labels(path)
    failures.expect(len(data) == TraceMarks.SIZE, f"marks file is {len(data)} bytes")
    failures.expect(path.stat().st_ino == inode, "marks file was replaced, not truncated")
    failures.expect(count == 2, f"marks count {count}, expected 2")
    failures.expect(data[8:TraceMarks.LABELS_START] == bytes(TraceMarks.LABELS_START - 8),
                    "bytes 8..63 of the marks file are not zero")
    expected = b"tab_1_loaded\0tabs_closed\0"
    end = TraceMarks.LABELS_START + len(expected)
    failures.expect(data[TraceMarks.LABELS_START:end] == expected,
                    f"labels {data[TraceMarks.LABELS_START:end]!r}")
    failures.expect(data[end:] == bytes(len(data) - end), "bytes after the labels are not zero")


def check_corpus_pinned(scratch: Path, failures: Failures) -> None:
    corpus = json.loads(CORPUS.read_text())
    failures.expect(len(corpus["pages"]) >= 24, f"the corpus has {len(corpus['pages'])} pages")
    page = corpus["pages"][0]
    page["sha256"][0] = "0" * 64
    tampered = scratch / "corpus.json"
    tampered.write_text(json.dumps(corpus))
    done = drive(["--check", "--corpus", str(tampered)])
    failures.expect(done.returncode == 1 and "does not match" in done.stderr
                    and page["path"] in done.stderr,
                    f"a tampered corpus: exit {done.returncode}, stderr {done.stderr[-400:]!r}")
    done = drive(["--check"])
    failures.expect(done.returncode == 0, f"the pinned corpus does not match this machine: "
                                          f"{done.stderr[-600:]}")


def check_missing_page(preload: Path, failures: Failures) -> None:
    done = drive(["--url", MISSING_PAGE, "--time-limit", "60"], preload)
    failures.expect(done.returncode == 1 and MISSING_PAGE in done.stderr
                    and "failed to load" in done.stderr,
                    f"a missing page: exit {done.returncode}, stderr {done.stderr[-400:]!r}")


def check_two_pages(preload: Path, variant: str, scratch: Path, failures: Failures) -> None:
    marks = scratch / "run.marks"
    done = drive(["--pages", "2", "--time-limit", "180"], preload, marks)
    failures.expect(done.returncode == 0, f"2-page run: exit {done.returncode}: "
                                          f"{done.stderr[-800:]}")
    if done.returncode != 0:
        return
    document = json.loads(done.stdout)
    corpus = json.loads(CORPUS.read_text())["pages"][:2]
    loaded = document["pages"]
    failures.expect(len(loaded) == 2, f"{len(loaded)} pages loaded")
    for page, wanted in zip(loaded, corpus):
        failures.expect(wanted["title"] in page["title"] and page["elements"] > 500,
                        f"{page['url']}: title {page['title']!r}, {page['elements']} elements")
    names = [checkpoint["name"] for checkpoint in document["checkpoints"]]
    failures.expect(names == ["tab_1_loaded", "tab_2_loaded", "tabs_closed"],
                    f"checkpoints {names}")
    for checkpoint in document["checkpoints"]:
        processes = checkpoint["web_processes"]
        failures.expect(processes and checkpoint["resident"] == sum(p["pss"] for p in processes)
                        and all(p["rss"] >= p["pss"] > 0 for p in processes),
                        f"checkpoint {checkpoint['name']}: resident {checkpoint['resident']}, "
                        f"processes {processes}")
    failures.expect(document["key_checkpoint"] == "tab_2_loaded",
                    f"key checkpoint {document['key_checkpoint']}")
    identity = f"runsel:{variant}"
    failures.expect(document["allocator"]["name"] == identity and
                    Path(document["allocator"]["provider"]).resolve() == preload.resolve(),
                    f"allocator {document['allocator']}, expected {identity} from {preload}")
    proofs = document["web_processes"]
    failures.expect(len(proofs) >= 1, "no web process")
    for proof in proofs:
        line = proof.get("runsel_exit") or {}
        failures.expect(proof["identity"] == identity and line.get("pid") == proof["pid"]
                        and line.get("variant") == variant,
                        f"web process {proof['pid']}: {proof['identity']}, stats line {line}")
    busiest = max((proof.get("runsel_exit") or {}).get("nmalloc", 0) for proof in proofs)
    failures.expect(busiest > 100_000, f"the busiest web process made {busiest} mallocs on "
                                       "runsel")
    count, labels, _ = published_labels(marks)
    failures.expect(labels == names, f"trace marks {count}: {labels}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--variant", default="rb_first")
    args = parser.parse_args()
    preload = (args.build_dir / f"libmalloc-{args.variant}.so").resolve()
    failures = Failures()
    if not preload.exists():
        failures.append(f"{preload} is not built")
    with tempfile.TemporaryDirectory(prefix="runsel-webkit-test-") as scratch:
        check_mark_layout(Path(scratch), failures)
        check_corpus_pinned(Path(scratch), failures)
        if preload.exists():
            check_missing_page(preload, failures)
            check_two_pages(preload, args.variant, Path(scratch), failures)
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"webkit test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
