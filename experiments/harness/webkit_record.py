"""The harness's webkit workload: the live workload (the driver, experiments/webkit/
driver.py), the check that it can run, and its exact replay. The replay records the
web processes: one driver run under the trace recorder
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

from . import behind_cache, fanout, judgement, replays, runs
from .allocators import (
    CONVERTER_TARGET,
    RECORDER_TARGET,
    REFERENCE,
    measured_environment,
    same_choice_groups,
)
from .interpreter import ROOT, SYSTEM_PYTHON

DRIVER = ROOT / "experiments" / "webkit" / "driver.py"  # the webkit workload
WEBKIT = "webkit"  # the live workload: the driver under Debian's python3
WEBKIT_REPLAY = "webkit replay"  # its web process's trace, replayed exactly per container
RECORDER = Path("tools") / f"lib{RECORDER_TARGET}.so"
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
                    ROOT / "experiments" / "trace" / "trace_format.h", DRIVER,
                    DRIVER.parent / "webkit_corpus.py", DRIVER.parent / "web_processes.py",
                    DRIVER.parent / "trace_marks.py",
                    CORPUS)
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


def webkit_workload(args: argparse.Namespace) -> runs.Workload:
    """The browser engine: the driver loads args.webkit_pages pages of its pinned corpus;
    no instruction counts (a browser under callgrind would take hours)."""
    arguments = (str(DRIVER), "--pages", str(args.webkit_pages),
                 "--time-limit", str(max(120, 60 * args.webkit_pages)))
    return runs.Workload(WEBKIT, Path(SYSTEM_PYTHON), arguments, repeat=args.webkit_repeat,
                         allocators=args.webkit_allocators, counted=False, family="webkit",
                         label="webkit live",
                         peer_repeat=min(args.webkit_repeat, args.webkit_peer_repeat))


def corpus_files(paths: list[Path], build_dir: Path, cache: Path) -> dict[str, Path]:
    """Any replayable files (runsel traces, or logalloc logs, plain or gzip-compressed, such
    as a recorded Firefox session's) as corpus traces {name: trace}: logs are converted once
    into `cache` (again when the log is newer)."""
    found = {}
    for path in paths:
        path = path.resolve()
        if not path.is_file():
            sys.exit(f"harness: --corpus-file {path}: no such file")
        with open(path, "rb") as file:
            is_trace = file.read(4) == b"RSTR"
        trace = path
        if not is_trace:
            trace = cache / (path.name + ".trace")
            if not trace.exists() or trace.stat().st_mtime < path.stat().st_mtime:
                cache.mkdir(parents=True, exist_ok=True)
                done = subprocess.run([str(build_dir / "tools" / CONVERTER_TARGET),
                                       "from-logalloc", str(path), str(trace)],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"harness: --corpus-file {path}: {done.stderr.strip()}")
        found[path.name] = trace
    return found


def corpus_recordings(args: argparse.Namespace, progress) -> list[dict] | str:
    """The webkit recordings of args.corpus_ranges (record_corpus, cached), or why they
    failed: the harness makes them before its timed runs, so that no browser shares the
    machine with those."""
    try:
        return record_corpus(args.build_dir, list(args.corpus_ranges), progress=progress)
    except (RecordFailed, subprocess.TimeoutExpired) as failure:
        progress(f"recording the corpus failed: {failure}")
        return str(failure) or type(failure).__name__


def webkit_corpus(args: argparse.Namespace, progress,
                  recordings: list[dict] | str | None = None) -> tuple[dict, dict]:
    """The trace corpus (experiments/README.md, "The trace corpus"): the webkit
    `recordings` (corpus_recordings'; made now when None) and the --corpus-file traces, each
    replayed exactly on every container (fanout tasks), with callgrind windows over the
    first traces. Returns (the first webkit trace's summary entry, the "webkit replay"
    workload of the tables; results.json's "corpus": every trace's entry and the judgement
    over each group of traces)."""
    containers = [name for name in args.allocator or args.webkit_replay_allocators
                  if name in replays.replayers(args.build_dir)] or None
    if recordings is None:
        recordings = corpus_recordings(args, progress)
    if isinstance(recordings, str):
        return ({"kind": "replay", "family": "webkit", "label": "webkit replay",
                 "error": recordings, "allocators": {}},
                {"error": recordings, "recordings": [], "groups": {}})
    groups = {"webkit": {entry["name"]: Path(entry["trace"]) for entry in recordings}}
    if args.corpus_file:
        groups["files"] = corpus_files(args.corpus_file, args.build_dir,
                                       args.out / "corpus-traces")
    corpus = {"recordings": recordings, "groups": {}, "fanout": None,
              "cost": {"traces": args.corpus_cost_traces, "windows": args.corpus_windows,
                       "window_records": args.corpus_window_records,
                       "hardened_traces": args.corpus_hardened_traces}}
    first = None
    for group, traces in groups.items():
        try:
            entries = replays.corpus_summaries(
                traces, args.build_dir, "webkit" if group == "webkit" else "trace",
                containers=containers, timeout=args.timeout, progress=progress,
                windows=replays.CostWindows(args.corpus_cost_traces, args.corpus_windows,
                                            args.corpus_window_records,
                                            args.corpus_hardened_traces))
        except replays.ReplayFailed as failure:
            corpus["groups"][group] = {"error": str(failure), "entries": {}}
            continue
        usable = {name: entry for name, entry in entries.items() if "error" not in entry}
        corpus["groups"][group] = {"entries": entries, **judgement.group_judgements(usable)}
        if group == "webkit" and usable:
            first = dict(next(iter(usable.values())))
    if "webkit" in groups and getattr(args, "cache_cost_traces", None) is not None:
        corpus["behind_cache"] = behind_cache.build(
            groups["webkit"], args.build_dir,
            (corpus["groups"].get("webkit") or {}).get("entries") or {}, args.timeout,
            progress, args.cache_cost_traces, args.corpus_windows, args.corpus_window_records,
            containers)
    corpus["fanout"] = fanout.describe()
    if first is None:
        return ({"kind": "replay", "family": "webkit", "label": "webkit replay",
                 "error": "no webkit trace of the corpus replayed", "allocators": {}}, corpus)
    first["label"] = "webkit replay"
    tabs = [point["name"] for point in next(iter(first["allocators"].values()))["exact"]
            ["checkpoints"] if point["name"].startswith("tab_")]
    first["key_checkpoint"] = tabs[-1] if tabs else first["key_checkpoint"]  # as the live runs
    return first, corpus


def add_corpus(summary: dict, args: argparse.Namespace,
               recordings: list[dict] | str | None = None) -> dict:
    """webkit_corpus(): its first trace as summary entry "webkit replay", its checks (the
    reference's two replays of every trace agree to the byte); returns the corpus."""
    entry, corpus = webkit_corpus(args, lambda text: print(f"harness: {text}", file=sys.stderr),
                                  recordings)
    summary["workloads"][WEBKIT_REPLAY] = entry
    summary["checks"].append({
        "workload": WEBKIT_REPLAY, "ok": "error" not in entry,
        "check": "the trace corpus: webkit runs recorded with their checkpoint marks (or "
                 "reused), each replayed exactly on every container",
        "detail": entry.get("error") or f"{len(corpus['recordings'])} recordings, "
                  f"{sum(1 for r in corpus['recordings'] if r['reused'])} reused; "
                  f"{len(entry['allocators'])} containers"})
    groups = same_choice_groups(args.build_dir)
    for name, group in corpus["groups"].items():
        summary["checks"].extend(replays.same_choices_checks(group.get("entries", {}), groups,
                                                             f"corpus ({name})"))
    for group in corpus["groups"].values():
        for name, replayed in group.get("entries", {}).items():
            reference = replayed["allocators"].get(REFERENCE)
            summary["checks"].append({
                "workload": f"corpus:{name}", "ok": "error" not in replayed and bool(
                    reference) and reference["exact"]["repeated_identical"] is True,
                "check": f"two exact replays on {REFERENCE} agree to the byte",
                "detail": replayed.get("error", "")})
    return corpus


def check_webkit() -> None:
    """Fails early (not after the first runs) when the browser or its corpus is missing."""
    check = subprocess.run([SYSTEM_PYTHON, str(DRIVER), "--check"], capture_output=True,
                           text=True)
    if check.returncode != 0:
        sys.exit(f"harness: the webkit workload cannot run: {check.stderr.strip()}\n"
                 f"(leave it out with --workload NAME for the others)")


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
