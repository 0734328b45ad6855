"""How much of each container's effect survives behind a thread cache: the WebKit traces
of the corpus replayed exactly once more on the containers built with the per-thread
cache on (build/tools/runsel-cached-replay-<container>, linked with
libsetting-tcache-<container>.so), with callgrind windows over the first of them
(presets' cache_cost_traces). With the cache, the bins see fewer, larger operations
(batches of fills and flushes), as jemalloc's bins do behind its tcache.

Gives results.json's corpus["behind_cache"] (experiments/README.md, "Behind a thread
cache"): each container against rb_first without the cache and with it, judged over the
same traces (judgement.py), and what the cache itself changes for each container (the
report's table of it: report_cache.py). The meson build makes the cached replayers for the four
anchors (moz_tree, lifo, rb_first, age_address), or for every container with
-Dthread_cache_containers=all (tools/runsel report --thread-cache-all).
"""

from __future__ import annotations

from pathlib import Path

from . import judgement, replays
from .allocators import REFERENCE

WITHOUT, WITH = "without the cache", "with the cache"


def cache_effect(plain: dict[str, dict], cached: dict[str, dict], container: str) -> dict:
    """The container with the cache against itself without, over the traces both replayed:
    judge_corpus's block of judgements for it."""
    pairs = {}
    for trace, entry in cached.items():
        mine, base = (entry["allocators"].get(container),
                      (plain.get(trace) or {}).get("allocators", {}).get(container))
        if mine and base:
            pairs[trace] = {**entry, "allocators": {WITHOUT: base, WITH: mine}}
    return judgement.judge_corpus(pairs, WITHOUT, [WITH])["containers"][WITH] if pairs else None


def hardened(entries: dict[str, dict]) -> dict[str, dict]:
    """The entries with their hardened cost as the one judged ("cost"): the containers
    with the cache are built hardened only, so both sides of this table are."""
    return {name: {**entry, "allocators": {container: {**pair, "cost": pair.get("cost_hardened")}
                                           for container, pair in entry["allocators"].items()}}
            for name, entry in entries.items()}


def build(traces: dict[str, Path], build_dir: Path, plain: dict[str, dict], timeout: float,
          progress, cost_traces: int, windows: int, window_records: int,
          containers: list[str] | None = None) -> dict | None:
    """corpus["behind_cache"]: None when the build has no cached replayers; {"error"} when
    their replays failed; else the cached replays' entries and the judgements."""
    built = replays.cached_replayers(build_dir)
    chosen = [name for name in built if not containers or name in containers]
    if REFERENCE not in chosen or len(chosen) < 2:
        return None
    try:
        entries = replays.corpus_summaries(
            traces, build_dir, "webkit", containers=chosen, timeout=timeout,
            progress=progress, windows=replays.CostWindows(cost_traces, windows, window_records),
            cached=True)
    except replays.ReplayFailed as failure:
        return {"error": str(failure), "containers": chosen}
    usable = hardened({name: entry for name, entry in entries.items() if "error" not in entry})
    compared = hardened({name: entry for name, entry in plain.items()
                         if name in usable and "error" not in entry})
    others = [name for name in chosen if name != REFERENCE]
    return {"containers": chosen, "entries": entries, "traces": list(usable),
            "without": judgement.judge_corpus(compared, REFERENCE, others) if compared else None,
            "with": judgement.judge_corpus(usable, REFERENCE, others) if usable else None,
            "cache_effect": {name: cache_effect(compared, usable, name) for name in chosen}}
