"""From raw runs to the figures the report shows: medians, paired comparisons of each
variant with rb_first (comparisons.py), resident memory per checkpoint, fragmentation,
and the agreement check (containers that pick alike choose alike); and the extra rounds
run while a time comparison is still wider than the target.
"""

from __future__ import annotations

import argparse
import statistics
import time

from . import comparisons, runs
from .allocators import REFERENCE

MIN_LIVE_FOR_FRAGMENTATION = 64 << 10  # below this, resident ÷ live is noise


def median_or_none(values) -> float | None:
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def run_time(document: dict) -> float:
    """The time the comparisons use: CPU time of the measured region (all threads)
    where the workload reports it, which other processes on a busy machine do not
    inflate; else its wall time."""
    return document.get("measured_cpu_seconds") or document["measured_seconds"]


def checkpoint_series(documents: list[dict]) -> list[dict]:
    """Per checkpoint (in order): median resident, live requested, minor faults over the
    repetitions, and heap resident (resident minus resident at "start")."""
    names = [checkpoint["name"] for checkpoint in documents[0]["checkpoints"]]
    starts = [doc["checkpoints"][0]["resident"] for doc in documents]
    series = []
    for index, name in enumerate(names):
        rows = [doc["checkpoints"][index] for doc in documents
                if index < len(doc["checkpoints"]) and doc["checkpoints"][index]["name"] == name]
        resident = statistics.median(row["resident"] for row in rows)
        live = median_or_none(row.get("live_requested") for row in rows)
        heap = resident - statistics.median(starts)
        series.append({
            "name": name, "resident": resident, "heap_resident": heap, "live_requested": live,
            "minor_faults": median_or_none(row.get("minor_faults") for row in rows),
            "fragmentation": heap / live if live and live >= MIN_LIVE_FOR_FRAGMENTATION
            else None,
        })
    return series


def key_checkpoint(series: list[dict]) -> str:
    """The checkpoint the summary quotes: the last one (before "end") that still holds
    a live set big enough for resident ÷ live to mean something."""
    candidates = [point["name"] for point in series
                  if point["name"] != "end" and point["fragmentation"] is not None]
    return candidates[-1] if candidates else series[-1]["name"]


def runsel_snapshot(document: dict) -> dict:
    """{checkpoint: runsel stats} of one run (empty for other allocators). webkit's web
    process reports its stats once, at exit: checkpoint "exit"."""
    snapshot = {checkpoint["name"]: checkpoint["runsel"] for checkpoint in document["checkpoints"]
                if "runsel" in checkpoint}
    if document.get("runsel_exit"):
        snapshot["exit"] = document["runsel_exit"]
    return snapshot


# Stats that differ without any choice being different:
# - array_heap's side arrays are allocator metadata: bookkeeping (so committed, mapped);
# - the huge-mapping cache ages its entries by the clock, so on a loaded machine a run
#   that takes longer releases them sooner: dirty pages, purges, committed, mapped.
NOT_CHOICES = ("bookkeeping", "committed", "mapped", "dirty", "purges")


def choices_only(snapshot: dict) -> dict:
    """runsel stats without NOT_CHOICES. committed − bookkeeping − dirty (= allocated +
    waste + bin_unused, what the choices decide) must still agree to the byte."""
    return {checkpoint: {**{name: value for name, value in stats.items()
                            if name not in NOT_CHOICES},
                         "committed_in_use": stats["committed"] - stats["bookkeeping"]
                         - stats["dirty"]}
            for checkpoint, stats in snapshot.items()}


def resident_at(document: dict, checkpoint: str) -> int | None:
    return next((point["resident"] for point in document["checkpoints"]
                 if point["name"] == checkpoint), None)


def summarize_pair(runs: list[dict]) -> dict:
    """One workload under one allocator, over its valid repetitions (in round order)."""
    documents = [run["document"] for run in runs]
    times = [run_time(doc) for doc in documents]
    wall = [doc["measured_seconds"] for doc in documents]
    series = checkpoint_series(documents)
    first = documents[0]
    return {
        "runs": len(documents),
        "repetitions": [run["repetition"] for run in runs],
        "times": times,
        "time_measure": "cpu" if first.get("measured_cpu_seconds") else "wall",
        "wall_times": wall,
        "median_seconds": statistics.median(times),
        "median_wall_seconds": statistics.median(wall),
        "minor_faults": median_or_none(doc["checkpoints"][-1].get("minor_faults")
                                       for doc in documents),
        "faults": [doc["checkpoints"][-1].get("minor_faults") for doc in documents],
        "checkpoints": series,
        "peak_resident": max(point["resident"] for point in series),
        "provider": first["allocator"]["provider"],
        "identity": first["allocator"]["name"],
        "purge": first["allocator"].get("purge") or None,  # runsel's policy in force
        "checksum": first.get("checksum"),
        "deterministic": first.get("deterministic", True),
        "replay": first.get("replay"),  # replay:<trace> workloads: records, unknown pointers
        "runsel": runsel_snapshot(first),
        "chunk_maps": {checkpoint["name"]: checkpoint["chunk_maps"]
                       for checkpoint in first["checkpoints"] if "chunk_maps" in checkpoint},
    }


def agreement(workload: str, pairs: dict, valid_runs: list[dict],
              same_choice_groups: list[list[str]]) -> list[dict]:
    """Checks that must hold for a workload: one checksum for every allocator (same
    calls everywhere), and identical runsel stats in every run across each group of
    containers that pick alike (they make exactly the same choices, so on a
    deterministic workload their stats are identical at every checkpoint)."""
    checks = []
    checksums = {name: pair["checksum"] for name, pair in pairs.items()}
    deterministic = all(pair["deterministic"] for pair in pairs.values())
    if deterministic:
        differing = sorted(name for name, value in checksums.items()
                           if value != next(iter(checksums.values())))
        checks.append({"workload": workload, "check": "same data checksum under every allocator",
                       "ok": not differing, "detail": ", ".join(differing)})
    for members in same_choice_groups:
        group = [name for name in members if name in pairs]
        if deterministic and len(group) > 1:
            snapshots = [(run["allocator"], run["repetition"],
                          choices_only(runsel_snapshot(run["document"])))
                         for run in valid_runs
                         if run["workload"] == workload and run["allocator"] in group]
            reference = snapshots[0]
            differing = [f"{name} #{repetition + 1}" for name, repetition, snapshot in snapshots
                         if snapshot != reference[2]]
            checks.append({"workload": workload,
                           "check": f"same choices, so identical runsel stats at every checkpoint "
                                    f"(clock and metadata aside): {', '.join(group)}",
                           "ok": not differing,
                           "detail": (f"differs from {reference[0]} #{reference[1] + 1}: "
                                      + ", ".join(differing[:6])) if differing else
                           f"{len(snapshots)} runs compared"})
    return checks


def live_set_note(runs: list[dict], checkpoint: str) -> str | None:
    """None when every run held the same live requested bytes at `checkpoint` (or the
    workload cannot tell); otherwise why its memory figures are not comparable."""
    lives = {point.get("live_requested") for run in runs for point in run["document"]["checkpoints"]
             if point["name"] == checkpoint}
    lives.discard(None)
    if len(lives) <= 1:
        return None
    return (f"live set at {checkpoint} differs between runs ({min(lives) / (1 << 20):.1f}–"
            f"{max(lives) / (1 << 20):.1f} MiB): memory differences are differences between "
            "runs, not between allocators")


def compare_with_reference(pair: dict, reference: dict, memory_comparable: bool):
    """Paired time and memory comparisons of one allocator with the reference."""
    pair["delta_to_reference"] = comparisons.compare_paired(
        *comparisons.pairs_by_round(pair["times"], pair["repetitions"], reference["times"],
                                    reference["repetitions"]))
    if memory_comparable:
        pair["memory_to_reference"] = comparisons.compare_paired(
            *comparisons.pairs_by_round(pair["key_growth"], pair["repetitions"],
                                        reference["key_growth"], reference["repetitions"]))
    else:
        pair["memory_to_reference"] = None


def summarize(valid_runs: list[dict], allocators: list[str], workloads: list,
              instruction_counts: dict, same_choice_groups: list[list[str]],
              counters: dict | None = None) -> dict:
    """{"workloads": {workload: {kind, family, label, key_checkpoint, memory_comparable,
    memory_note, "allocators": {name: pair}}}, "checks"}. `workloads` are runs.Workload."""
    result, checks = {}, []
    counters = counters or {}
    for workload in workloads:
        name = workload.name
        runs_by_allocator = {}
        for allocator in allocators:
            chosen = sorted((run for run in valid_runs
                             if run["workload"] == name and run["allocator"] == allocator),
                            key=lambda run: run["repetition"])
            if chosen:
                runs_by_allocator[allocator] = chosen
        if not runs_by_allocator:
            continue
        pairs = {allocator: summarize_pair(chosen)
                 for allocator, chosen in runs_by_allocator.items()}
        reference = pairs.get(REFERENCE)
        named = next((run["document"].get("key_checkpoint")
                      for chosen in runs_by_allocator.values() for run in chosen), None)
        key = named or key_checkpoint((reference or next(iter(pairs.values())))["checkpoints"])
        note = live_set_note([run for chosen in runs_by_allocator.values() for run in chosen], key)
        for allocator, pair in pairs.items():
            pair["key_resident"] = [resident_at(run["document"], key)
                                    for run in runs_by_allocator[allocator]]
            # What the run added since its first checkpoint: the allocator library's own
            # pages (a few KiB more or less between two variants that make the very same
            # choices, before the workload allocates anything) cancel out of it.
            pair["key_growth"] = [
                None if resident is None
                else resident - run["document"]["checkpoints"][0]["resident"]
                for resident, run in zip(pair["key_resident"], runs_by_allocator[allocator])]
        for allocator, pair in pairs.items():
            if reference and allocator != REFERENCE:
                compare_with_reference(pair, reference, note is None)
            else:
                pair["delta_to_reference"] = pair["memory_to_reference"] = None
            counted = instruction_counts.get(name, {}).get(allocator)
            pair["instructions"] = counted
            pair["cost"] = (counted or {}).get("cost")  # cost.py: instructions, misses, ...
            pair["counters"] = counters.get(name, {}).get(allocator)
        result[name] = {"kind": getattr(workload, "kind", "live"),
                        "family": getattr(workload, "family", "synthetic"),
                        "label": getattr(workload, "label", None) or name,
                        "key_checkpoint": key,
                        "memory_comparable": note is None, "memory_note": note,
                        "allocators": pairs}
        checks.extend(agreement(name, pairs, valid_runs, same_choice_groups))
    return {"workloads": result, "checks": checks}


def half_width_now(valid: list[dict], workload: str, variant: str) -> float:
    """The half-width the report would print for this time comparison (inf without an
    interval), from the runs so far."""
    def times(name):
        chosen = [run for run in valid if run["workload"] == workload and run["allocator"] == name]
        return ([run_time(run["document"]) for run in chosen],
                [run["repetition"] for run in chosen])
    compared = comparisons.compare_paired(
        *comparisons.pairs_by_round(*times(variant), *times(REFERENCE)))
    return float("inf") if compared["half_width"] is None else compared["half_width"]


def extend_until_resolved(workloads: list, variants: list, valid: list[dict],
                          discarded: list[dict], args: argparse.Namespace) -> dict:
    """More rounds, runsel variants only, of the live workloads where some variant's time
    comparison with rb_first is still wider than the target, until none is or
    args.extend seconds have passed. Returns {workload: extra rounds}."""
    extra = {workload.name: 0 for workload in workloads}
    if not args.extend or REFERENCE not in [v.name for v in variants] or len(variants) < 2:
        return extra
    deadline, next_round = time.monotonic() + args.extend, args.repeat
    while time.monotonic() < deadline:
        wide = [workload for workload in workloads if workload.kind == "live" and any(
            half_width_now(valid, workload.name, variant.name) > comparisons.TARGET_PERCENT
            for variant in variants if variant.name != REFERENCE)]
        if not wide:
            break
        more, lost = runs.run_interleaved(wide, variants, 1, args.scale, args.seed,
                                          args.timeout, not args.aslr, next_round,
                                          f"extra round {next_round - args.repeat + 1}")
        valid.extend(more)
        discarded.extend(lost)
        for workload in wide:
            extra[workload.name] += 1
        next_round += 1
    return extra
