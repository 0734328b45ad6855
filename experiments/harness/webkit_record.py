"""The harness's webkit workload: the live workload (the driver, experiments/webkit/
driver.py), the check that it can run, and its exact replay. The replay records the
web processes: one driver run under the trace recorder
(build/tools/librunsel-trace.so, as `tools/runsel trace` runs it), with a checkpoint mark
in every trace at each of the driver's checkpoints (tab_N_loaded, tabs_closed, exit).
Keeps one trace per web process, `WebKitWebProcess.<pid>`, and `run.json` (the driver's
document: pages, checkpoints, which pids were web processes) in the output directory.

    python3 -m harness.webkit_record [--pages N] [--out DIR]  (in experiments/; default
        DIR: results/traces/webkit)
    tools/runsel replay results/traces/webkit/WebKitWebProcess.<pid>
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from . import replays, runs
from .allocators import measured_environment
from .interpreter import ROOT, SYSTEM_PYTHON

DRIVER = ROOT / "experiments" / "webkit" / "driver.py"  # the webkit workload
WEBKIT = "webkit"  # the live workload: the driver under Debian's python3
WEBKIT_REPLAY = "webkit replay"  # its web process's trace, replayed exactly per container
RECORDER = Path("tools") / "librunsel-trace.so"
MARKS_SIZE = 65536
PREFIX = "process."  # every traced process's file, until sorted out


class RecordFailed(Exception):
    pass


def record(build_dir: Path, out: Path, pages: int, timeout: float = 900) -> list[dict]:
    """Runs the driver under the recorder; returns [{pid, path, bytes}] for the web
    processes' traces (largest first). Other processes' traces are deleted."""
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
    command = [SYSTEM_PYTHON, str(DRIVER), "--pages", str(pages),
               "--time-limit", str(max(180, 90 * pages)), "--out", str(out / "run.json")]
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


def webkit_workload(args: argparse.Namespace) -> runs.Workload:
    """The browser engine: the driver loads args.webkit_pages pages of its pinned corpus;
    no instruction counts (a browser under callgrind would take hours)."""
    arguments = (str(DRIVER), "--pages", str(args.webkit_pages),
                 "--time-limit", str(max(120, 60 * args.webkit_pages)))
    return runs.Workload(WEBKIT, Path(SYSTEM_PYTHON), arguments, repeat=args.webkit_repeat,
                         allocators=args.webkit_allocators, counted=False, family="webkit",
                         label="webkit live",
                         peer_repeat=min(args.webkit_repeat, args.webkit_peer_repeat))


def webkit_exact_replay(args: argparse.Namespace, progress) -> dict:
    """Records one webkit run (record(): a trace per web process, with a
    mark at each of the driver's checkpoints) and replays the trace of the web process
    that held the pages on every container: exact figures at every tab. The traces stay
    in <out>/webkit-traces/ (generated, like the report)."""
    out = args.out / "webkit-traces"
    print(f"harness: recording the web processes of a {args.webkit_record_pages}-page webkit "
          f"run into {out}", file=sys.stderr)
    try:
        traces = record(args.build_dir, out, args.webkit_record_pages)
        trace = traces[0]["path"]  # the largest: the process that held the pages
        containers = [name for name in args.allocator or args.webkit_replay_allocators
                      if name in replays.replayers(args.build_dir)] or None
        entry = replays.exact_replay_summary(trace, args.build_dir, family="webkit",
                                             label="webkit replay", containers=containers,
                                             progress=progress,
                                             cost_records=args.webkit_cost_records)
    except (RecordFailed, replays.ReplayFailed, subprocess.TimeoutExpired) as failure:
        return {"kind": "replay", "family": "webkit", "label": "webkit replay",
                "error": str(failure), "allocators": {}}
    tabs = [point["name"] for point in next(iter(entry["allocators"].values()))["exact"]
            ["checkpoints"] if point["name"].startswith("tab_")]
    entry["key_checkpoint"] = tabs[-1] if tabs else entry["key_checkpoint"]  # as the live runs
    entry["traces"] = [{"pid": t["pid"], "path": str(t["path"]), "bytes": t["bytes"]}
                       for t in traces]
    return entry


def add_exact_replay(summary: dict, args: argparse.Namespace) -> None:
    """webkit_exact_replay() as summary entry "webkit replay", and its check."""
    entry = webkit_exact_replay(args, lambda text: print(f"harness: {text}", file=sys.stderr))
    summary["workloads"][WEBKIT_REPLAY] = entry
    summary["checks"].append({
        "workload": WEBKIT_REPLAY, "ok": "error" not in entry,
        "check": "the web processes of a webkit run recorded with their checkpoint marks, "
                 "the one that held the pages replayed exactly on every container",
        "detail": entry.get("error") or f"{Path(entry['trace']).name}: "
                  f"{len(entry['allocators'])} containers"})


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
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "traces" / "webkit")
    parser.add_argument("--pages", type=int, default=4, help="corpus pages (default 4)")
    args = parser.parse_args()
    try:
        traces = record(args.build_dir, args.out, args.pages)
    except (RecordFailed, subprocess.TimeoutExpired) as failure:
        print(f"webkit record: {failure}", file=sys.stderr)
        return 1
    for trace in traces:
        print(f"trace of web process {trace['pid']}: {trace['path']} ({trace['bytes']} bytes)")
    print(f"next: tools/runsel replay {os.path.relpath(traces[0]['path'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
