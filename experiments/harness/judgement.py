"""Differences judged over a trace corpus: each trace is a replicate, each container's
figure is compared with the reference's on the same trace (paired by trace), and the
mean difference gets a 95 % interval over the traces (Student's t on the per-trace
differences). An interval that straddles zero is "not resolvable", as a live time
comparison is; one trace alone gives an exact difference for that trace only, never a
judgement.

A replay's figures are exact for its trace (the replay is deterministic), but the trace
is one draw: the recorded program's timing decides which calls it made. So the spread
across traces, not the exactness of one replay, is what a judgement rests on.

Figures (experiments/README.md, "The trace corpus"): the footprint that purge timing
cannot flip (committed - dirty, bin_unused, resident after a forced purge), the
purge-sensitive ones reported apart (resident, committed, dirty), and the allocator's own
cost per call (instructions, simulated D1 and LL misses).
"""

from __future__ import annotations

import math
import statistics

from .allocators import AS_BUILT, REFERENCE

CONFIDENCE = 0.95
# Where a trace is judged (moments): two marks, the peak, and the mean over every mark.
MOMENTS = ("loaded", "closed", "peak", "mean")

# name: what it is (memory_value reads it from an exact checkpoint). dirty is judged as a
# share of the reference's committed memory: its own reference value can be 0.
MEMORY_FIGURES = {
    "footprint": "committed - dirty",
    "bin_unused": "free regions in non-full runs",
    "purged_resident": "resident after a forced purge",
    "resident": "resident",
    "committed": "committed",
    "dirty": "dirty pages (share of committed)",
}
STABLE_FIGURES = ("footprint", "bin_unused", "purged_resident")  # the verdict's memory
PURGE_TIMING_FIGURES = ("resident", "committed", "dirty")  # reported on their own
COST_FIGURES = {
    "instructions_per_call": "the allocator's instructions per call",
    "d1_misses_per_call": "the allocator's simulated D1 misses per call",
    "ll_misses_per_call": "the allocator's simulated LL misses per call",
}


def memory_value(point: dict, figure: str) -> float | None:
    """One figure at one exact checkpoint; None when the replay did not give it."""
    if figure == "footprint":
        return point["committed"] - point["dirty"]
    return point.get(figure)


def cost_value(cost: dict | None, figure: str) -> float | None:
    """The allocator's own cost per call from a cost block (cost.py), or None."""
    if not cost or cost.get("error") or not cost.get("calls"):
        return None
    source = {"instructions_per_call": "allocator_instructions",
              "d1_misses_per_call": "allocator_d1_misses",
              "ll_misses_per_call": "allocator_ll_misses"}[figure]
    value = cost.get(source)
    return None if value is None else value / cost["calls"]


def percent_difference(value: float, reference: float, scale: float | None = None) -> float | None:
    """100 (value - reference) / scale, scale defaulting to the reference; with a scale of
    0, 0.0 when the value equals the reference, else None."""
    scale = reference if scale is None else scale
    if not scale:
        return 0.0 if value == reference else None
    return 100.0 * (value - reference) / scale


def judge(differences: dict[str, float], confidence: float = CONFIDENCE) -> dict:
    """The judgement of one (container, figure) over the traces: differences maps each
    trace to the container's percent difference to the reference on that trace.

    outcome: "lower" or "higher" when the interval excludes 0; "not resolvable" when it
    straddles 0; "identical" when every trace gave exactly 0 (same choices); "exact for one
    trace" with a single trace that did not; "not measured" with none (traces whose
    difference is None do not count)."""
    values = [value for value in differences.values() if value is not None]
    count = len(values)
    judged = {"n_traces": count, "per_trace": differences, "confidence": confidence,
              "method": f"mean of per-trace differences, Student's t {confidence:.0%} interval "
                        "(paired by trace)"}
    if count == 0:
        return {**judged, "percent": None, "low": None, "high": None, "half_width": None,
                "sd": None, "above": 0, "below": 0, "outcome": "not measured"}
    mean = statistics.fmean(values)
    above, below = sum(v > 0 for v in values), sum(v < 0 for v in values)
    judged.update(percent=mean, above=above, below=below)
    if all(value == 0 for value in values):
        return {**judged, "low": 0.0, "high": 0.0, "half_width": 0.0, "sd": 0.0,
                "outcome": "identical"}
    if count == 1:
        return {**judged, "low": None, "high": None, "half_width": None, "sd": None,
                "outcome": "exact for one trace"}
    sd = statistics.stdev(values)
    # Imported here: importers without scipy (the webkit test) need none.
    from scipy import stats as scipy_stats
    half = scipy_stats.t.ppf(0.5 + confidence / 2, count - 1) * sd / math.sqrt(count)
    low, high = mean - half, mean + half
    outcome = "higher" if low > 0 else "lower" if high < 0 else "not resolvable"
    return {**judged, "low": low, "high": high, "half_width": half, "sd": sd,
            "outcome": outcome}


def checkpoint_named(entry: dict, container: str, name: str) -> dict | None:
    pair = entry["allocators"].get(container) or {}
    points = (pair.get("exact") or {}).get("checkpoints") or []
    return next((point for point in points if point["name"] == name), None)


def moments(entry: dict) -> dict[str, str]:
    """The checkpoints a trace is judged at, named from its first replay's: "loaded" (the
    last tab_N_loaded mark, else its key checkpoint, else "peak"), "closed" (tabs_closed,
    else "end") and "peak" (of live bytes; else the last checkpoint)."""
    first = next(iter(entry["allocators"].values()))["exact"]["checkpoints"]
    names = [point["name"] for point in first]
    tabs = [name for name in names if name.startswith("tab_") and name.endswith("_loaded")]
    return {"loaded": tabs[-1] if tabs else entry.get("key_checkpoint") or "peak",
            "closed": "tabs_closed" if "tabs_closed" in names else "end",
            "peak": "peak" if "peak" in names else names[-1]}


def over_marks(entry: dict, container: str, reference: str, moment: str,
               figure: str) -> tuple:
    """(container's, reference's, scale) for a moment over every mark of a trace: "mean",
    the mean of the figure over the marks (the session's average footprint, as AWSY
    averages its checkpoints), or "peak" for a trace without a peak checkpoint (a Firefox
    log), the highest value at any mark. The "peak" and "end" checkpoints are not marks.
    (None, None, None) when either replay is missing; None for a figure not given."""
    def marks(name: str) -> list[dict]:
        points = ((entry["allocators"].get(name) or {}).get("exact") or {}).get("checkpoints")
        return [p for p in points or [] if p["name"] not in ("peak", "end")]
    points, bases = marks(container), marks(reference)
    if not points or not bases:
        return None, None, None
    values = [memory_value(p, figure) for p in points]
    base_values = [memory_value(p, figure) for p in bases]
    if None in values or None in base_values:
        return None, 0, None
    if figure == "dirty":  # a share of the reference's committed memory, as at one mark
        scale = sum(p["committed"] for p in bases) / len(bases)
    else:
        scale = None
    aggregate = max if moment == "peak" else (lambda v: sum(v) / len(v))
    return aggregate(values), aggregate(base_values), scale


def trace_differences(entries: dict[str, dict], container: str, reference: str,
                      moment: str, figure: str) -> dict[str, float | None]:
    """{trace: container's percent difference to the reference} for one memory figure at
    one moment; a trace where either replay lacks that checkpoint is left out, one where
    either lacks the figure maps to None."""
    found = {}
    for trace, entry in entries.items():
        if moment == "mean" or (moment == "peak" and moments(entry)["peak"] != "peak"):
            value, reference_value, scale = over_marks(entry, container, reference, moment,
                                                       figure)
            if value is not None or reference_value is not None:
                found[trace] = None if value is None or reference_value is None else \
                    percent_difference(value, reference_value, scale)
            continue
        name = moments(entry)[moment]
        point, base = (checkpoint_named(entry, container, name),
                       checkpoint_named(entry, reference, name))
        if point is None or base is None:
            continue
        value, reference_value = memory_value(point, figure), memory_value(base, figure)
        if value is None or reference_value is None:
            found[trace] = None
            continue
        scale = base["committed"] if figure == "dirty" else None
        found[trace] = percent_difference(value, reference_value, scale)
    return found


def cost_differences(entries: dict[str, dict], container: str, reference: str,
                     figure: str) -> dict[str, float | None]:
    found = {}
    for trace, entry in entries.items():
        pairs = entry["allocators"]
        if container not in pairs or reference not in pairs:
            continue
        value = cost_value(pairs[container].get("cost"), figure)
        base = cost_value(pairs[reference].get("cost"), figure)
        found[trace] = None if value is None or base is None else percent_difference(value, base)
    return found


def judge_corpus(entries: dict[str, dict], reference: str,
                 containers: list[str] | None = None) -> dict:
    """Every container against the reference over the traces of `entries` ({trace name:
    summary entry of kind "replay"}, replays.py): {"containers": {container: {"memory":
    {moment: {figure: judgement}}, "cost": {figure: judgement}}}}, beside the reference,
    the traces judged and the figures' descriptions."""
    if containers is None:
        containers = sorted({name for entry in entries.values() for name in entry["allocators"]
                             if name != reference})
    judged = {}
    for container in containers:
        memory = {moment: {figure: judge(trace_differences(entries, container, reference,
                                                           moment, figure))
                           for figure in MEMORY_FIGURES}
                  for moment in MOMENTS}
        cost = {figure: judge(cost_differences(entries, container, reference, figure))
                for figure in COST_FIGURES}
        judged[container] = {"memory": memory, "cost": cost}
    return {"reference": reference, "traces": list(entries), "containers": judged,
            "figures": {"memory": MEMORY_FIGURES, "stable": list(STABLE_FIGURES),
                        "purge_timing": list(PURGE_TIMING_FIGURES), "cost": COST_FIGURES}}


def judgement_text(judged: dict) -> str:
    """'+0.38 % [+0.04, +0.84] over 11 traces', '-0.12 % [-0.40, +0.15], not resolvable over
    8 traces', 'identical on 8 traces', '+0.21 % on its one trace (exact for that trace
    only)', 'not measured'."""
    outcome, count = judged["outcome"], judged["n_traces"]
    if outcome == "not measured":
        return "not measured"
    if outcome == "identical":
        return f"identical on {count} traces"
    if outcome == "exact for one trace":
        return f"{judged['percent']:+.2f} % on its one trace (exact for that trace only)"
    interval = f"{judged['percent']:+.2f} % [{judged['low']:+.2f}, {judged['high']:+.2f}]"
    return interval + (", not resolvable" if outcome == "not resolvable" else "") + \
        f" over {count} traces"


def group_judgements(entries: dict[str, dict]) -> dict:
    """A corpus group's judgements over its usable replays ({trace name: summary entry}):
    "judgement" against rb_first (REFERENCE), and "judgement_as_built" against moz_tree
    (AS_BUILT), bug 1857133's baseline, when every trace replayed it; None where there is
    nothing to judge."""
    as_built = bool(entries) and all(AS_BUILT in e["allocators"] for e in entries.values())
    return {"judgement": judge_corpus(entries, REFERENCE) if entries else None,
            "judgement_as_built": judge_corpus(entries, AS_BUILT) if as_built else None}


def answer_group(corpus: dict | None) -> str:
    """The corpus group the report's answer is judged on: the Firefox content logs under
    the installed Firefox's run sizes ("firefox") when the corpus of sessions was replayed,
    else the WebKit traces with the one Firefox session joined ("browsers"), else the
    WebKit traces."""
    groups = (corpus or {}).get("groups") or {}
    return "firefox" if "firefox" in groups else "browsers" if "browsers" in groups \
        else "webkit"
