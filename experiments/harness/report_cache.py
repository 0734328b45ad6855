"""The report's table of corpus["behind_cache"] (behind_cache.py computes it): each
container against rb_first without the thread cache and with it, then what the cache
itself changes for each container.
"""

from __future__ import annotations

from .allocators import REFERENCE
from .corpus_report import FIGURE_WORDS, judged_cell

# (moment or "cost", figure): what the table sets side by side.
COLUMNS = (("closed", "purged_resident"), ("closed", "footprint"),
           ("loaded", "purged_resident"), ("cost", "instructions_per_call"))


def pick(block: dict | None, column: tuple[str, str]) -> dict | None:
    if not block:
        return None
    moment, figure = column
    return block["cost"][figure] if moment == "cost" else block["memory"][moment][figure]


def column_words(column: tuple[str, str]) -> str:
    moment, figure = column
    return FIGURE_WORDS[figure] + ("" if moment == "cost" else f", {moment}")


def table(results: dict):
    """(title, headers, rows, note): each container against rb_first without and with the
    cache, then what the cache changes for each container."""
    title = "Behind a thread cache"
    found = (results.get("corpus") or {}).get("behind_cache")
    if not found or "error" in found or not found.get("with"):
        return title, [], [], ""
    headers = ["container", "against", *[f"{column_words(c)}: {when}" for c in COLUMNS
                                         for when in ("no cache", "cache")]]
    rows = []
    for name in found["with"]["containers"]:
        without = (found["without"] or {}).get("containers", {}).get(name)
        behind = found["with"]["containers"][name]
        rows.append([name, REFERENCE, *[judged_cell(pick(block, column)) for column in COLUMNS
                                        for block in (without, behind)]])
    for name in found["containers"]:
        effect = found["cache_effect"].get(name)
        if effect:
            rows.append([f"{name} with the cache", f"{name} without",
                         *[cell for column in COLUMNS
                           for cell in ("", judged_cell(pick(effect, column)))]])
    cost = (results.get("corpus") or {}).get("cost") or {}
    note = (f"Percent differences over the {len(found['traces'])} WebKit traces of the corpus "
            "[95 % interval over the traces, paired by trace; \"?\" = not resolvable], each "
            "replay exact for its trace. The first rows: each container against "
            f"{REFERENCE} built the same way, without the per-thread cache (the plain replays "
            "of the corpus table) and with it (the cache on in both; -Dthread_cache's "
            "bounds, fills and flushes in batches): how much of the container's effect "
            "survives when its bins see the cache's batches instead of every call. The last "
            "rows: what the cache itself changes for each container (with against without). "
            "Instructions: the allocator's own per call, hardened on both sides (the "
            "containers with the cache have no as-shipped build), callgrind over "
            f"{cost.get('windows')} windows of {cost.get('window_records')} records on the "
            f"first {cost.get('traces')} traces. bin_unused is left out: regions held in the "
            "cache count as allocated for the runs, so it would not compare like for like.")
    return title, headers, rows, note
