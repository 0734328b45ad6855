"""Records the webkit workload's web processes: one driver run under the trace recorder
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

from .allocators import measured_environment
from .interpreter import ROOT, SYSTEM_PYTHON

DRIVER = ROOT / "experiments" / "webkit" / "driver.py"  # the webkit workload
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
