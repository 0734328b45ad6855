"""From raw runs to the figures the report shows: medians, deltas to rb_first with a
bootstrap confidence interval, resident memory per checkpoint, fragmentation, and the
agreement check (containers that pick alike choose alike).
"""

from __future__ import annotations

import random
import statistics

from allocators import REFERENCE

BOOTSTRAP_RESAMPLES = 2000
MIN_LIVE_FOR_FRAGMENTATION = 64 << 10  # below this, resident ÷ live is noise


def bootstrap_delta(times: list[float], reference: list[float], seed: int = 4) -> dict:
    """Median time relative to the reference, in percent, with a 95 % percentile
    bootstrap interval (both samples resampled with replacement)."""
    point = 100 * (statistics.median(times) / statistics.median(reference) - 1)
    rng = random.Random(seed)
    deltas = sorted(
        100 * (statistics.median(rng.choices(times, k=len(times)))
               / statistics.median(rng.choices(reference, k=len(reference))) - 1)
        for _ in range(BOOTSTRAP_RESAMPLES))
    return {"percent": point, "low": deltas[int(0.025 * len(deltas))],
            "high": deltas[int(0.975 * len(deltas)) - 1]}


def checkpoint_series(documents: list[dict]) -> list[dict]:
    """Per checkpoint (in order): median resident, live requested, minor faults over the
    repetitions, and heap resident (resident minus resident at "start")."""
    names = [checkpoint["name"] for checkpoint in documents[0]["checkpoints"]]
    series = []
    for index, name in enumerate(names):
        rows = [doc["checkpoints"][index] for doc in documents
                if index < len(doc["checkpoints"]) and doc["checkpoints"][index]["name"] == name]
        starts = [doc["checkpoints"][0]["resident"] for doc in documents]
        resident = statistics.median(row["resident"] for row in rows)
        # live_requested is null where the program cannot count it (webkit)
        lives = [row["live_requested"] for row in rows if row["live_requested"] is not None]
        live = statistics.median(lives) if lives else None
        heap = resident - statistics.median(starts)
        series.append({
            "name": name, "resident": resident, "heap_resident": heap, "live_requested": live,
            "minor_faults": statistics.median(row["minor_faults"] for row in rows),
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


def choices_only(snapshot: dict) -> dict:
    """runsel stats without what array_heap's side arrays change: they are allocator
    metadata, so they add to bookkeeping (and committed, mapped) without any choice
    being different. committed − bookkeeping must still agree to the byte."""
    return {checkpoint: {**{name: value for name, value in stats.items()
                            if name not in ("bookkeeping", "committed", "mapped")},
                         "committed_minus_bookkeeping": stats["committed"] - stats["bookkeeping"]}
            for checkpoint, stats in snapshot.items()}


def summarize_pair(documents: list[dict]) -> dict:
    """One workload under one allocator, over its valid repetitions."""
    times = [doc["measured_seconds"] for doc in documents]
    series = checkpoint_series(documents)
    first = documents[0]
    return {
        "runs": len(documents),
        "times": times,
        "median_seconds": statistics.median(times),
        "minor_faults": statistics.median(doc["checkpoints"][-1]["minor_faults"]
                                          for doc in documents),
        "checkpoints": series,
        "peak_resident": max(point["resident"] for point in series),
        "provider": first["allocator"]["provider"],
        "identity": first["allocator"]["name"],
        "checksum": first["checksum"],
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
                                    f"(bookkeeping aside): {', '.join(group)}",
                           "ok": not differing,
                           "detail": (f"differs from {reference[0]} #{reference[1] + 1}: "
                                      + ", ".join(differing[:6])) if differing else
                           f"{len(snapshots)} runs compared"})
    return checks


def first_document(valid_runs: list[dict], workload: str) -> dict:
    return next(run["document"] for run in valid_runs if run["workload"] == workload)


def summarize(valid_runs: list[dict], allocators: list[str], workloads: list[str],
              instruction_counts: dict, same_choice_groups: list[list[str]]) -> dict:
    """{"workloads": {workload: {"key_checkpoint", "allocators": {name: pair}}}, "checks"}."""
    result, checks = {}, []
    for workload in workloads:
        pairs = {}
        for allocator in allocators:
            documents = [run["document"] for run in valid_runs
                         if run["workload"] == workload and run["allocator"] == allocator]
            if documents:
                pairs[allocator] = summarize_pair(documents)
        if not pairs:
            continue
        reference = pairs.get(REFERENCE)
        for name, pair in pairs.items():
            pair["delta_to_reference"] = (bootstrap_delta(pair["times"], reference["times"])
                                          if reference and name != REFERENCE else None)
            pair["instructions"] = instruction_counts.get(workload, {}).get(name)
            pair["cost"] = (pair["instructions"] or {}).get("cost")  # cost.py's block
        key = (first_document(valid_runs, workload).get("key_checkpoint")
               or key_checkpoint((reference or next(iter(pairs.values())))["checkpoints"]))
        result[workload] = {"key_checkpoint": key, "allocators": pairs}
        checks.extend(agreement(workload, pairs, valid_runs, same_choice_groups))
    return {"workloads": result, "checks": checks}


def point_at(pair: dict, checkpoint: str) -> dict | None:
    return next((point for point in pair["checkpoints"] if point["name"] == checkpoint), None)
