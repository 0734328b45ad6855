"""Why containers differ, counted: each workload runs once under each variant's
counting twin (build/libmalloc-counting-<container>.so, memory/arena/pick_counters.h),
and the bins' pick counters at its last checkpoint (cumulative since start) say
whether the workload gave the containers anything to choose between.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from . import runs
from .allocators import COUNTING_TARGET_PREFIX, Allocator, build_targets, targets_named
from .derived import BIN_COUNTERS, HISTOGRAMS, totals
from .fanout import fanned_map


def counting_libraries(build_dir: Path, variants: list[str]) -> dict[str, Path]:
    """{variant: its counting library} for those the build defines and has built."""
    try:
        targets = build_targets(build_dir)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return {}
    found = targets_named(targets, COUNTING_TARGET_PREFIX,
                                              "shared library")
    return {name: found[name] for name in variants if name in found and found[name].exists()}


def bins_counted(document: dict) -> list[dict] | None:
    """The counting figures of every bin that was picked from, at the last checkpoint
    (webkit: the web process's RUNSEL_STATS line at its exit)."""
    stats = document.get("runsel_exit") or next(
        (point["runsel"] for point in reversed(document["checkpoints"]) if "runsel" in point),
        None)
    if not stats or not stats.get("counting"):
        return None
    return [{"size": b["size"], "regions_per_run": b["regions_per_run"],
             **{name: b[name] for name in BIN_COUNTERS + HISTOGRAMS}}
            for b in stats["bins"] if b["picks"] or b["runs_created"]]


def run_counting(workloads: list[runs.Workload], libraries: dict[str, Path], scale: float,
                 seed: int, timeout: float, fixed_layout: bool) -> dict:
    """{workload: {variant: {"bins": [...], "total": {...}} or {"error": ...}}}, for the
    variants each workload runs under, except the workloads too slow for instruction
    counts (webkit: the exact replay of its trace counts its picks on every container)."""
    chosen = [workload for workload in workloads if workload.kind == "live" and workload.counted]
    counted: dict = {workload.name: {} for workload in chosen}
    plan = [(workload, variant, library) for workload in chosen
            for variant, library in libraries.items()
            if not workload.allocators or variant in workload.allocators]
    progress = runs.Progress(len(plan), "counters")
    prefix = runs.FIXED_LAYOUT if fixed_layout else []

    def run(item: tuple) -> dict:
        workload, variant, library = item
        allocator = Allocator(variant, True, library.resolve())
        return runs.run_once(workload, allocator, scale, seed, timeout, prefix)

    def done(item: tuple, result: dict) -> None:
        workload, variant, _ = item
        if not result["ok"]:
            counted[workload.name][variant] = {"error": result["error"]}
            status = result["error"]
        else:
            bins = bins_counted(result["document"])
            counted[workload.name][variant] = (
                {"bins": bins, "total": totals(bins)} if bins is not None
                else {"error": "the counting library reported no counters"})
            status = "counted"
        progress.step(f"{workload.name} × {variant} {status}")
    # The choices counted do not depend on the load (a fixed seed and address layout): the
    # runs are Dask tasks on every core, like the callgrind counts.
    fanned_map(run, plan, done, kind="counting run (synthetic)")
    return counted
