"""Records the webkit workload's web processes: one driver run under the trace recorder
(build/tools/librunsel-trace.so, as `tools/runsel trace` runs it), with a checkpoint mark
in every trace at each of the driver's checkpoints (tab_N_loaded, tabs_closed, exit).
Keeps one trace per web process, `WebKitWebProcess.<pid>`, and `run.json` (the driver's
document: pages, checkpoints, which pids were web processes) in the output directory.

With --corpus, records a trace corpus instead: every page range (--pages A-B, repeatable)
--repeat times, each recording in its own directory under --cache, reused while the
corpus file, the WebKitGTK version and the commit of the recording's code (the recorder,
the trace format, the driver and its corpus) are the same (experiments/README.md, "The
trace corpus").

    python3 -m harness.webkit_record [--pages N] [--out DIR]  (in experiments/; default
        DIR: results/traces/webkit)
    python3 -m harness.webkit_record --corpus [--pages 1-4 --repeat 5 ...]
    tools/runsel replay results/traces/webkit/WebKitWebProcess.<pid>
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .allocators import measured_environment
from .interpreter import ROOT, SYSTEM_PYTHON

DRIVER = ROOT / "experiments" / "webkit" / "driver.py"  # the webkit workload
RECORDER = Path("tools") / "librunsel-trace.so"
MARKS_SIZE = 65536
PREFIX = "process."  # every traced process's file, until sorted out


class RecordFailed(Exception):
    pass


def record(build_dir: Path, out: Path, pages: int, timeout: float = 900, first: int = 1,
           corpus: Path | None = None) -> list[dict]:
    """Runs the driver under the recorder on `pages` pages from page `first` of the corpus;
    returns [{pid, path, bytes}] for the web processes' traces (largest first). Other
    processes' traces are deleted."""
    recorder = (build_dir / RECORDER).resolve()
    if not recorder.exists():
        raise RecordFailed(f"{recorder} is not built (ninja -C {build_dir} {RECORDER})")
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob(PREFIX + "*"), *out.glob("WebKitWebProcess.*")]:
        old.unlink()
    marks = out / "marks"
    # The file exists before the first traced process starts, so every process maps it;
    # the driver zero-fills it again (same inode) and publishes into it.
    marks.write_bytes(bytes(MARKS_SIZE))
    environment = measured_environment(recorder, RUNSEL_TRACE=str(out / (PREFIX + "%p")),
                                       RUNSEL_TRACE_MARKS=str(marks))
    command = [SYSTEM_PYTHON, str(DRIVER), "--pages", str(pages), "--first", str(first),
               "--time-limit", str(max(180, 90 * pages)), "--out", str(out / "run.json"),
               *(["--corpus", str(corpus)] if corpus else [])]
    print("+ RUNSEL_TRACE=... RUNSEL_TRACE_MARKS=... LD_PRELOAD=" + str(recorder) + " "
          + " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, env=environment, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RecordFailed(f"the recorded driver run failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-800:]}")
    document = json.loads((out / "run.json").read_text())
    web = {proof["pid"] for proof in document["web_processes"]}
    traces = []
    for path in sorted(out.glob(PREFIX + "*")):
        pid = int(path.name[len(PREFIX):])
        if pid in web:
            kept = path.rename(out / f"WebKitWebProcess.{pid}")
            traces.append({"pid": pid, "path": kept, "bytes": kept.stat().st_size})
        else:
            path.unlink()  # the driver's own python, WebKit's network process
    missing = web - {trace["pid"] for trace in traces}
    if missing:
        raise RecordFailed(f"no trace of web process(es) {sorted(missing)} in {out}")
    marks.unlink()
    return sorted(traces, key=lambda trace: -trace["bytes"])


# --- the trace corpus ------------------------------------------------------------------------

CORPUS = DRIVER.parent / "corpus.json"
CACHE = ROOT / "results" / "traces" / "corpus"
# The default corpus: 8 recordings, the default page set (the report's first four pages)
# five times, and three other page sets once.
DEFAULT_RANGES = ((1, 4), (1, 4), (1, 4), (1, 4), (1, 4), (5, 8), (9, 12), (13, 16))
# What a recording depends on: the recorder, the trace format, the driver and its pages.
RECORDING_INPUTS = (ROOT / "tools" / "trace" / "recorder.cpp",
                    ROOT / "tools" / "trace" / "trace_format.h", DRIVER, CORPUS)
BROWSER_PACKAGE = "libwebkit2gtk-4.1-0"


def page_range(text: str) -> tuple[int, int]:
    """"A-B" (pages A to B of the corpus, from 1) or "N" (pages 1 to N)."""
    first, _, last = text.partition("-")
    try:
        bounds = (int(first), int(last)) if last else (1, int(first))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a page range (A-B or N)") from None
    if bounds[0] < 1 or bounds[1] < bounds[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not a page range (1 <= A <= B)")
    return bounds


def browser_version() -> str:
    done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", BROWSER_PACKAGE],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def recording_commit() -> str:
    """The last commit that changed the recorder, the trace format, the driver or the corpus,
    "+modified" when one has uncommitted changes: recordings made by other code are not
    reused."""
    git = ["git", "-C", str(ROOT)]
    inputs = [str(path.relative_to(ROOT)) for path in RECORDING_INPUTS]
    done = subprocess.run([*git, "log", "-1", "--format=%h", "--", *inputs],
                          capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        return "no-git"
    changed = subprocess.run([*git, "status", "--porcelain", "--", *inputs],
                             capture_output=True, text=True).stdout.strip()
    return done.stdout.strip() + ("+modified" if changed else "")


def corpus_key(corpus: Path) -> dict:
    """What a cached recording must match to be reused."""
    return {"corpus_sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()[:16],
            "browser": f"{BROWSER_PACKAGE} {browser_version()}", "commit": recording_commit()}


def record_corpus(build_dir: Path, ranges: list[tuple[int, int]], cache: Path = CACHE,
                  corpus: Path = CORPUS, progress=None) -> list[dict]:
    """Each page range once per occurrence in `ranges` (a range listed k times is recorded
    k times, as repeats r1..rk), reusing cached recordings with the same key. Returns one
    entry per recording: {name, pages, repeat, trace (the web process that held the pages),
    reused, seconds, key}."""
    key = corpus_key(corpus)
    folder = cache / hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "key.json").write_text(json.dumps(key, indent=1) + "\n")
    entries, seen = [], {}
    for first, last in ranges:
        seen[(first, last)] = repeat = seen.get((first, last), 0) + 1
        name = f"pages-{first}-{last}.r{repeat}"
        out = folder / name
        about = out / "recording.json"
        if about.exists():
            entry = json.loads(about.read_text())
            if Path(entry["trace"]).exists():
                entries.append({**entry, "reused": True})
                progress and progress(f"reusing the recording {name} ({entry['trace']})")
                continue
        progress and progress(f"recording {name}: webkit, corpus pages {first}-{last}")
        started = time.monotonic()
        traces = record(build_dir, out, last - first + 1, first=first, corpus=corpus,
                        timeout=max(900, 240 * (last - first + 1)))
        entry = {"name": name, "pages": [first, last], "repeat": repeat,
                 "trace": str(traces[0]["path"]), "bytes": traces[0]["bytes"],
                 "seconds": round(time.monotonic() - started, 1), "key": key}
        about.write_text(json.dumps(entry, indent=1) + "\n")
        entries.append({**entry, "reused": False})
    return entries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "traces" / "webkit",
                        help="without --corpus: where the traces go")
    parser.add_argument("--pages", type=page_range, action="append", default=[],
                        metavar="A-B|N", help="corpus pages A to B (N: 1 to N; default 1-4); "
                        "with --corpus repeatable, each range recorded --repeat times")
    parser.add_argument("--corpus", nargs="?", type=Path, const=CORPUS, metavar="FILE",
                        help=f"record a trace corpus, cached (corpus file default {CORPUS.name}; "
                        "without --pages: the default page sets, "
                        + ", ".join(f"{a}-{b}" for a, b in DEFAULT_RANGES) + ")")
    parser.add_argument("--repeat", type=int, default=1, help="recordings of each range")
    parser.add_argument("--cache", type=Path, default=CACHE, help="the corpus cache")
    args = parser.parse_args()
    try:
        if args.corpus:
            if not args.corpus.is_file():
                print(f"webkit record: --corpus {args.corpus}: no such file", file=sys.stderr)
                return 2
            ranges = [r for r in args.pages for _ in range(args.repeat)] or list(DEFAULT_RANGES)
            entries = record_corpus(args.build_dir, ranges, args.cache, args.corpus,
                                    lambda text: print(f"record: {text}", file=sys.stderr))
            for entry in entries:
                print(f"{entry['name']}: {entry['trace']} ({entry['bytes']} bytes, "
                      + ("reused" if entry["reused"] else f"recorded in {entry['seconds']} s")
                      + ")")
            return 0
        first, last = args.pages[0] if args.pages else (1, 4)
        traces = record(args.build_dir, args.out, last - first + 1, first=first)
    except (RecordFailed, subprocess.TimeoutExpired) as failure:
        print(f"webkit record: {failure}", file=sys.stderr)
        return 1
    for trace in traces:
        print(f"trace of web process {trace['pid']}: {trace['path']} ({trace['bytes']} bytes)")
    print(f"next: tools/runsel replay {os.path.relpath(traces[0]['path'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
