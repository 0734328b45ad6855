"""The checks of a recorded Firefox session's logalloc logs (firefox_record.py records
them): each log read through (calls, frees of blocks allocated before the recording),
its coverage of the allocator's own operation count at the marks, the problems that
leave a session out, and which processes' logs a session keeps (the parent and the
busiest content process). Standard library only.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path


class RecordFailed(Exception):
    """The recording cannot be used: exit 1 with this."""


MIN_COVERAGE, MAX_COVERAGE = 0.90, 1.05  # logged calls / the allocator's num_operations
MAX_DROPPED_FREES = 0.10                  # share of frees of blocks allocated before recording


def read_marks(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_log(path: Path) -> dict:
    """Streams one logalloc log: lines, calls, frees, frees of addresses never handed
    out in the log (dropped: allocated before recording could see them), and addresses
    handed out again while live (must be 0). A log cut short (a killed process) is read
    up to its last complete line."""
    live: set[int] = set()
    lines = calls = frees = dropped = reuses = marks = 0
    complete = True
    try:
        with gzip.open(path, "rt", errors="replace") as log:
            for line in log:
                if not line.endswith("\n"):
                    complete = False
                    break
                lines += 1
                call = line.split(" ", 2)[2]
                if call.startswith("jemalloc_stats"):
                    marks += 1
                    continue
                calls += 1
                name, _, rest = call.partition("(")
                arguments, _, result = rest.rstrip("\n").partition(")")
                if name == "free":
                    address = int(arguments, 16)
                    if address:
                        frees += 1
                        if address in live:
                            live.discard(address)
                        else:
                            dropped += 1
                    continue
                returned = int(result[1:], 16) if result.startswith("=") else 0
                if name == "realloc":
                    old_text, _, size_text = arguments.partition(",")
                    old = int(old_text, 16)
                    if old and (returned or int(size_text) == 0):
                        frees += 1
                        if old in live:
                            live.discard(old)
                        else:
                            dropped += 1
                if returned:
                    if returned in live:
                        reuses += 1
                    live.add(returned)
    except (EOFError, OSError, gzip.BadGzipFile, zlib.error):
        complete = False
    return {"lines": lines, "calls": calls, "marks": marks, "frees": frees,
            "frees_dropped": dropped, "live_reuses": reuses, "complete": complete}


def coverage_mark(with_stats: list[dict]) -> dict | None:
    """The mark to check coverage at: the last one before num_operations first falls.
    mozjemalloc sums it over the arenas alive, so an arena disposed of (a closed tab's
    private arenas) takes its count with it, and after that the figure is only a lower
    bound on the calls made (a 20-page session: 9.27 M operations at tab 9, 7.78 M at
    tab 10)."""
    checked, previous = None, 0
    for mark in with_stats:
        operations = mark["stats"]["num_operations"]
        if operations < previous:
            break
        checked, previous = mark, operations
    return checked


def summarize(pid: int, log: Path, marks_file: Path, role: str) -> dict:
    marks = read_marks(marks_file)
    figures = check_log(log)
    with_stats = [mark for mark in marks if mark.get("stats") and
                  mark["stats"]["num_operations"]]
    checked = coverage_mark(with_stats)
    coverage = checked["calls"] / checked["stats"]["num_operations"] if checked else None
    # Below MIN_COVERAGE anywhere is calls lost, whatever arenas went: the least ratio.
    least = min((mark["calls"] / mark["stats"]["num_operations"] for mark in with_stats),
                default=None)
    return {"pid": pid, "role": role, "log": log.name, "bytes": log.stat().st_size, **figures,
            "num_operations": checked["stats"]["num_operations"] if checked else None,
            "coverage": round(coverage, 4) if coverage is not None else None,
            "coverage_mark": checked["label"] if checked else None,
            "least_coverage": round(least, 4) if least is not None else None,
            "frees_dropped_share": round(figures["frees_dropped"] / figures["frees"], 4)
            if figures["frees"] else 0.0,
            "mark_labels": [mark["label"] for mark in marks],
            "real_figures": bool(with_stats)}


def problems_of(summary: dict, labels: list[str]) -> list[str]:
    problems = []
    name = f"{summary['role']} process {summary['pid']}"
    if summary["live_reuses"]:
        problems.append(f"{name}: {summary['live_reuses']} addresses handed out twice while "
                        "live (a free was missed)")
    if summary["coverage"] is None:
        problems.append(f"{name}: no real figures to check coverage against")
    elif not MIN_COVERAGE <= summary["coverage"] <= MAX_COVERAGE:
        problems.append(f"{name}: logged calls are {summary['coverage']:.1%} of the allocator's "
                        f"num_operations at {summary['coverage_mark']} (expected "
                        f"{MIN_COVERAGE:.0%}-{MAX_COVERAGE:.0%})")
    elif summary["least_coverage"] < MIN_COVERAGE:
        problems.append(f"{name}: logged calls fall to {summary['least_coverage']:.1%} of the "
                        f"allocator's num_operations at a mark (expected at least "
                        f"{MIN_COVERAGE:.0%})")
    if summary["frees_dropped_share"] > MAX_DROPPED_FREES:
        problems.append(f"{name}: {summary['frees_dropped_share']:.1%} of frees are of blocks "
                        "never seen allocated")
    missing = [label for label in labels if label not in summary["mark_labels"]]
    if missing:
        problems.append(f"{name}: marks missing: {', '.join(missing)}")
    # A log cut short (Firefox killed a process that was slow to exit) is still used,
    # up to its last complete line (--partial): not a problem by itself.
    return problems


# --- the recording --------------------------------------------------------------------------


def keep_parent_and_busiest_content(logs: Path, parent_pid: int) -> list[tuple]:
    """Keeps the parent's log and the busiest content process's (role, calls, pid, log);
    deletes the other processes' logs and marks."""
    candidates = []
    for log in sorted(logs.glob("*.log.gz")):
        pid = int(log.name.split(".")[0])
        marks = read_marks(logs / f"{pid}.marks.jsonl")
        command = marks[-1]["cmdline"] if marks else ""
        role = "parent" if pid == parent_pid else \
            "content" if "-isForBrowser" in command else "other"
        calls = marks[-1]["calls"] if marks else 0
        candidates.append((role, calls, pid, log))
    parent = [c for c in candidates if c[0] == "parent"]
    content = sorted((c for c in candidates if c[0] == "content"), key=lambda c: -c[1])
    if not parent or not content:
        raise RecordFailed(f"no log of the parent process or of a content process in {logs}")
    kept = [parent[0], content[0]]
    for role, _, pid, log in candidates:
        if (role, pid) not in {(k[0], k[2]) for k in kept}:
            log.unlink()
            (logs / f"{pid}.marks.jsonl").unlink(missing_ok=True)
    return kept
