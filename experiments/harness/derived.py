"""The figures results.json holds besides the raw ones, computed before it is written
(and when an older results.json is upgraded): what the report's tables quote and the
raw figures do not say directly. The renderer reads them; it computes nothing.
"""

from __future__ import annotations

from .allocators import FIREFOX_MATCHING, REFERENCE

KEEP_CHUNK_MAPS = (REFERENCE, FIREFOX_MATCHING)  # the occupancy pictures compare these two
EXACT_FIGURES = ("resident", "committed")  # the exact replays table's differences
BIN_COUNTERS = ("picks", "picks_with_choice", "runs_created", "runs_destroyed")
HISTOGRAMS = ("nonfull_at_pick", "picked_fullness")


def trim_chunk_maps(summary: dict) -> None:
    """Chunk maps are large; results.json keeps those the report draws."""
    for workload in summary.values():
        for name, pair in workload["allocators"].items():
            if name not in KEEP_CHUNK_MAPS:
                pair["chunk_maps"] = {}



def totals(bins: list[dict]) -> dict:
    """The counters summed over bins (histograms bucket by bucket), with the summaries
    the report quotes: the median bucket of non-full runs at a pick (an index into the
    log2 buckets 0, 1, 2–3, 4–7, ...) and the mean fullness of the picked run in percent
    (each tenth bucket taken at its middle); None when nothing was picked."""
    summed = {name: sum(b[name] for b in bins) for name in BIN_COUNTERS}
    for name in HISTOGRAMS:
        summed[name] = [sum(column) for column in zip(*(b[name] for b in bins))] if bins else []
    summed["median_nonfull_bucket"] = median_bucket(summed["nonfull_at_pick"])
    summed["mean_picked_fullness_percent"] = mean_fullness(summed["picked_fullness"])
    return summed


def median_bucket(histogram: list[int]) -> int | None:
    total, seen = sum(histogram), 0
    for index, count in enumerate(histogram):
        seen += count
        if total and seen * 2 >= total:
            return index
    return None


def mean_fullness(histogram: list[int]) -> float | None:
    total = sum(histogram)
    if not total:
        return None
    return sum((index + 0.5) * 10 * count for index, count in enumerate(histogram)) / total



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
    (totals(): with the median non-full bucket and the mean fullness)."""
    for entry in summary.values():
        if entry.get("kind") == "replay" and "error" not in entry:
            derive_exact(entry)
        for pair in entry["allocators"].values():
            counted = pair.get("counters")
            if counted and "bins" in counted:
                counted["total"] = totals(counted["bins"])

