"""results.json: what the harness writes, and what the report is rendered from.

The harness computes every figure (metrics.py, verdict.py, targets.py, and derive()
below for the figures the report's tables quote); the renderer (report.py) only lays
them out, so `tools/runsel render results.json` re-renders report.md and report.html
byte for byte as the run wrote them. Layout: experiments/README.md, "results.json".
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

from . import counting, fanout
from .allocators import REFERENCE

SCHEMA_VERSION = 3
KEEP_CHUNK_MAPS = (REFERENCE, "lifo")  # the occupancy pictures compare these two
EXACT_FIGURES = ("resident", "committed")  # the exact replays table's differences


class PhaseClock:
    """Wall and CPU seconds of each step. CPU counts this process, the runs it waited for
    and the Dask tasks (measured on the workers: fanout.task_cpu), so a loaded machine's
    report still tells what the steps cost; a local cluster's workers, reaped when it
    closes, count only through their tasks (their own start-up: fanout.reaped_cpu)."""

    def __init__(self):
        self.wall, self.cpu, self.task_cpu = {}, {}, {}
        self.beside = set()  # steps whose own work had Dask tasks running beside it
        self.started, self.cpu_started = time.monotonic(), self.cpu_now()
        self.tasks_started = fanout.tasks_cpu_total()

    @staticmethod
    def cpu_now() -> float:
        return sum(usage.ru_utime + usage.ru_stime for usage in
                   (resource.getrusage(resource.RUSAGE_SELF),
                    resource.getrusage(resource.RUSAGE_CHILDREN))) \
            - fanout.reaped_cpu() + fanout.tasks_cpu_total()

    def end(self, step: str, beside: bool = False) -> None:
        now, cpu, tasks = time.monotonic(), self.cpu_now(), fanout.tasks_cpu_total()
        self.wall[step] = round(now - self.started, 1)
        self.cpu[step] = round(cpu - self.cpu_started, 1)
        self.task_cpu[step] = round(tasks - self.tasks_started, 1)
        self.started, self.cpu_started, self.tasks_started = now, cpu, tasks
        if beside:
            self.beside.add(step)

    def quiet_estimate(self, workers: int) -> dict[str, float]:
        """Each step's wall seconds on an otherwise idle machine with `workers` Dask
        workers, estimated from its CPU: the Dask tasks' CPU divided among the workers,
        the rest (timed runs one at a time, recordings, this process) at full weight; for
        a step whose tasks ran beside its own work on workers - 1 cores, the longer of the
        two. It assumes a run's wall time is its CPU time when nothing else runs (a webkit
        run also waits on its pages: a little more) and that the tasks spread evenly."""
        def quiet(step: str) -> float:
            own, tasks = self.cpu[step] - self.task_cpu[step], self.task_cpu[step]
            if step in self.beside:
                return max(own, tasks / max(1, workers - 1))
            return own + tasks / max(1, workers)
        return {step: round(quiet(step), 1) for step in self.cpu}

    def table(self, workers: int) -> str:
        """The steps' wall, CPU, Dask tasks' CPU and quiet estimate, one line each."""
        quiet = self.quiet_estimate(workers)
        lines = [f"{'step':<20} {'wall s':>8} {'CPU s':>8} {'tasks s':>8} {'quiet s':>8}"]
        lines += [f"{step:<20} {self.wall[step]:>8.1f} {self.cpu[step]:>8.1f} "
                  f"{self.task_cpu[step]:>8.1f} {quiet[step]:>8.1f}" for step in self.wall]
        lines.append(f"{'total':<20} {sum(self.wall.values()):>8.1f} "
                     f"{sum(self.cpu.values()):>8.1f} {sum(self.task_cpu.values()):>8.1f} "
                     f"{sum(quiet.values()):>8.1f}")
        return "\n".join(lines)


def add_time_figures(document: dict, phases: PhaseClock, workers: int, local: bool) -> None:
    """results.json's figures of where the time went: each step's wall, CPU and Dask tasks'
    CPU seconds, its quiet estimate, the tasks by kind and a local cluster's own CPU."""
    document["phase_seconds"], document["phase_cpu_seconds"] = phases.wall, phases.cpu
    document["phase_task_cpu_seconds"] = phases.task_cpu
    document["phase_quiet_estimate_seconds"] = phases.quiet_estimate(workers)
    document["task_cpu_seconds"] = fanout.task_cpu()
    document["fanout_workers_cpu_seconds"] = round(
        max(0.0, fanout.reaped_cpu() - fanout.tasks_cpu_total()), 1) if local else None


def time_tables(document: dict, phases: PhaseClock, workers: int) -> str:
    """The end of the run's account of its time: steps, then tasks by kind."""
    own = document["fanout_workers_cpu_seconds"]
    return (f"where the time went (CPU: this process, its runs and the Dask tasks; quiet: "
            f"the estimate for an idle machine, tasks shared by {workers} workers):\n"
            + phases.table(workers) + "\n\n" + task_table(document["task_cpu_seconds"])
            + (f"\nthe local Dask workers' own CPU (start-up, bookkeeping): {own} s"
               if own is not None else ""))


def task_table(tasks: dict[str, dict]) -> str:
    """The Dask tasks' CPU seconds by kind: count, total, per task."""
    lines = [f"{'task':<28} {'count':>6} {'CPU s':>8} {'per task':>9}"]
    lines += [f"{kind:<28} {tally['tasks']:>6} {tally['cpu']:>8.1f} "
              f"{tally['cpu'] / max(1, tally['tasks']):>9.2f}"
              for kind, tally in tasks.items()]
    return "\n".join(lines)


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(),
            "load_average_1min": round(os.getloadavg()[0], 2)}


def trim_chunk_maps(summary: dict) -> None:
    """Chunk maps are large; results.json keeps those the report draws."""
    for workload in summary.values():
        for name, pair in workload["allocators"].items():
            if name not in KEEP_CHUNK_MAPS:
                pair["chunk_maps"] = {}


# --- figures the report's tables quote --------------------------------------------------


def exact_point(exact: dict, checkpoint: str) -> dict | None:
    """An exact replay's figures at a checkpoint ("peak": at the peak of live bytes)."""
    if checkpoint == "peak" and exact.get("peak"):
        return exact["peak"]
    return next((p for p in exact["checkpoints"] if p["name"] == checkpoint), None)


def exact_difference(mine: dict, theirs: dict | None, figure: str) -> dict | None:
    """A replay's figure against the reference's, in bytes and percent; None when the
    reference has no such figure (or zero)."""
    if not theirs or mine.get(figure) is None or not theirs.get(figure):
        return None
    return {"difference": mine[figure] - theirs[figure],
            "percent": 100 * (mine[figure] / theirs[figure] - 1)}


def derive_exact(entry: dict) -> None:
    """Each replayed container's figures at the key checkpoint and the peak, beside the
    reference's differences: pair["exact_vs_reference"] = {checkpoint: {figure: difference
    or None}} for the checkpoints the container has."""
    base = entry["allocators"].get(REFERENCE, {}).get("exact")
    for pair in entry["allocators"].values():
        exact = pair.get("exact")
        if not exact:
            continue
        compared = {}
        for checkpoint in (entry["key_checkpoint"], "peak"):
            mine = exact_point(exact, checkpoint)
            theirs = exact_point(base, checkpoint) if base else None
            if mine is not None:
                compared[checkpoint] = {figure: exact_difference(mine, theirs, figure)
                                        for figure in EXACT_FIGURES}
        pair["exact_vs_reference"] = compared


def derive(summary: dict) -> None:
    """Adds what the report quotes and the raw figures do not say directly: the exact
    replays' differences to the reference, and each counted pair's totals over its bins
    (counting.totals: with the median non-full bucket and the mean fullness)."""
    for entry in summary.values():
        if entry.get("kind") == "replay" and "error" not in entry:
            derive_exact(entry)
        for pair in entry["allocators"].values():
            counted = pair.get("counters")
            if counted and "bins" in counted:
                counted["total"] = counting.totals(counted["bins"])


# --- writing and reading ------------------------------------------------------------------


def write(results: dict, out: Path) -> tuple[Path, Path, Path]:
    """Writes results.json into `out`, then renders the report from what was written (so
    a later `tools/runsel render` gives the same bytes). Returns the three paths."""
    from . import report  # needs tabulate and matplotlib, which the harness has
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    written = json.loads(path.read_text())
    markdown, html = report.write_report(written, out)
    print(report.summary_text(written))
    return path, markdown, html


def upgrade(results: dict) -> dict:
    """A schema 2 results.json (verdict sentences stored as text, no derived figures)
    brought to this schema from its own summary: the verdict and the derived figures are
    recomputed by the modules that compute them for a run (verdict.py, derive())."""
    from . import verdict  # the statistics modules (scipy), needed only here
    derive(results["summary"])
    results["verdict"] = verdict.build(results["summary"])
    results["schema_version"] = SCHEMA_VERSION
    return results


def load(path: Path) -> dict:
    """results.json as the renderer needs it; a clear one-line exit when it cannot be."""
    try:
        results = json.loads(path.read_text())
    except OSError as error:
        sys.exit(f"render: cannot read {path}: {error.strerror}")
    except ValueError as error:
        sys.exit(f"render: {path} is not JSON: {error}")
    version = results.get("schema_version") if isinstance(results, dict) else None
    if version == 2:
        print(f"render: {path} is schema 2: verdict and derived figures recomputed from its "
              "summary", file=sys.stderr)
        return upgrade(results)
    if version != SCHEMA_VERSION:
        sys.exit(f"render: {path} has schema_version {version!r}; this renderer reads "
                 f"{SCHEMA_VERSION} (and 2)")
    return results
