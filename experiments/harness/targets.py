"""The speed and memory targets runsel is held to, judged from the figures of one run.

A target bounds a ratio: runsel's figure over another allocator's, measured in the same
run. Where both ran in the same rounds, the ratio is paired by round and carries the 95 %
interval of comparisons.py; it is judged from that interval:
  met         the whole interval is at or below the bound;
  missed      the whole interval is above it;
  unresolved  the interval straddles the bound (the run was too noisy to tell).
Without an interval (too few rounds, or a figure kept only as a median) the point
estimate decides, and the cell says so. A missed target says how far it is: the change of
runsel's figure that would just meet the bound ("needs -34 %" = a third less); a met one
how far below the bound it is.

The harness's targets (judge_workloads) and malloc_bench's (judge_bench, from
experiments/bench/compare.py) share judge(), cell() and target_text(); their lists are
below.
"""

from __future__ import annotations

import statistics

from . import comparisons
from .allocators import GLIBC, PEERS

MET, MISSED, UNRESOLVED = "met", "missed", "unresolved"

# The harness: (workload or None for every live workload, figure, against, bound).
# "slowest peer" is whichever of PEERS has the highest median time on that workload.
WORKLOAD_TARGETS = (
    ("threads", "minor faults", GLIBC, 2.0),
    ("threads", "time", GLIBC, 1.0),
    (None, "time", "slowest peer", 1.0),
    (None, "resident at key", GLIBC, 1.0),
)

# malloc_bench: (benchmark, figure, against, bound, aim or None). "best peer" is
# whichever of PEERS has the lowest median time on that benchmark.
BENCH_TARGETS = (
    *((f"BM_pair_ring/{size}", "time", GLIBC, 2.0, 1.5) for size in (16, 64, 256, 1024)),
    *((f"BM_pair_immediate/{size}", "time", GLIBC, 2.0, None) for size in (256, 1024)),
    ("BM_mixed", "time", GLIBC, 1.0, None),
    ("BM_mixed", "resident", GLIBC, 0.5, None),
    ("BM_mixed/real_time/threads:2", "time", GLIBC, 1.0, None),
    ("BM_huge_loop/real_time", "time", "best peer", 1.5, None),
    ("BM_producer_consumer/real_time/threads:2", "time", GLIBC, 1.0, None),
    ("BM_producer_consumer/real_time/threads:4", "time", GLIBC, 1.0, None),
)


def judge(values: list[float], reference: list[float], bound: float, paired: bool) -> dict:
    """values[i] over reference[i] (the same round when `paired`) against `bound`.
    Unpaired figures are judged on the ratio of their medians, without an interval."""
    unmeasured = {"status": None, "ratio": None, "low": None, "high": None, "bound": bound,
                  "text": "-"}
    if not values or not reference:
        return unmeasured
    if paired:
        compared = comparisons.compare_paired(values, reference)
        percent, low, high = compared["percent"], compared["low"], compared["high"]
        if percent is None:  # a figure of zero: no ratio
            return unmeasured
    else:
        percent = 100 * (statistics.median(values) / statistics.median(reference) - 1)
        low = high = None
    ratio = 1 + percent / 100
    low = None if low is None else 1 + low / 100
    high = None if high is None else 1 + high / 100
    if low is None:
        status = MET if ratio <= bound else MISSED
    else:
        status = MET if high <= bound else MISSED if low > bound else UNRESOLVED
    judged = {"status": status, "ratio": ratio, "low": low, "high": high, "bound": bound,
              "distance_percent": 100 * (bound / ratio - 1)}
    judged["text"] = cell(judged)
    return judged


def cell(judged: dict) -> str:
    """"4.02× [3.90, 4.15]: missed, needs -50 %"."""
    interval = (f" [{ratio_text(judged['low'])}, {ratio_text(judged['high'])}]"
                if judged["low"] is not None else " (no interval)")
    if judged["status"] == MET:
        tail = f"met, {percent(100 * (1 - judged['ratio'] / judged['bound']))} below the bound"
    elif judged["status"] == MISSED:
        tail = f"missed, needs {percent(judged['distance_percent'], sign=True)}"
    else:
        tail = "unresolved"
    return f"{ratio_text(judged['ratio'])}×{interval}: {tail}"


def ratio_text(ratio: float) -> str:
    """Two decimals; two significant digits below 0.1 (a ratio of 0.0018 is not 0.00)."""
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


def percent(value: float, sign: bool = False) -> str:
    """Whole percent, one decimal below 10 % (a 1.3 % miss should not read "1 %")."""
    digits = 1 if abs(value) < 10 else 0
    return f"{value:{'+' if sign else ''}.{digits}f} %"


def target_text(row: dict) -> str:
    """"minor faults ≤ 2× glibc", "time ≤ slowest peer (mimalloc)", "... (aim 1.5×)"."""
    against = row["against"]
    if row.get("opponent") and row["opponent"] != against:
        against += f" ({row['opponent']})"
    bound = "" if row["bound"] == 1 else f"{row['bound']:g}× "
    aim = f" (aim {row['aim']:g}×)" if row.get("aim") else ""
    return f"{row['figure']} ≤ {bound}{against}{aim}"


# --- the harness ----------------------------------------------------------------------


def subjects(allocator_names: list[str], reference: str) -> list[str]:
    """The runsel allocators the targets are judged for: the reference container as
    built, then under each of its settings (reference@purge:NAME, reference@classes48)."""
    return [name for name in allocator_names
            if name == reference or name.startswith(reference + "@")]


def _series(pair: dict, figure: str) -> tuple[list[float], list[int], bool]:
    """(per-run values, their rounds, paired) of one figure; faults fall back to the
    median alone when the results predate per-run faults."""
    if figure == "time":
        return pair["times"], pair["repetitions"], True
    if figure == "resident at key":
        return pair["key_resident"], pair["repetitions"], True
    faults = pair.get("faults")
    if faults and None not in faults:
        return faults, pair["repetitions"], True
    median = pair.get("minor_faults")
    return ([] if median is None else [median]), [0], False


def judge_pair(pair: dict, against: dict, figure: str, bound: float) -> dict:
    values, rounds, paired = _series(pair, figure)
    theirs, their_rounds, their_paired = _series(against, figure)
    if paired and their_paired:
        values, theirs = comparisons.pairs_by_round(values, rounds, theirs, their_rounds)
        return judge(list(values), list(theirs), bound, paired=True)
    return judge(values, theirs, bound, paired=False)


def judge_workloads(summary: dict, reference: str) -> dict:
    """{"subjects": [...], "rows": [{workload, figure, against, opponent, bound, text,
    judged: {subject: judgement}}]} for every live workload of results["summary"]."""
    names = []
    for data in summary.values():
        names += [name for name in data["allocators"] if name not in names]
    judged_for = subjects(names, reference)
    rows = []
    for workload_filter, figure, against, bound in WORKLOAD_TARGETS:
        for workload, data in summary.items():
            if data.get("kind", "live") != "live":
                continue
            if workload_filter is not None and workload != workload_filter:
                continue
            pairs = data["allocators"]
            opponent = against
            if against == "slowest peer":
                present = [peer for peer in PEERS if peer in pairs]
                opponent = max(present, key=lambda peer: pairs[peer]["median_seconds"],
                               default=None)
            if opponent not in pairs:
                continue
            row = {"workload": workload, "figure": figure, "against": against,
                   "opponent": opponent, "bound": bound,
                   "judged": {name: judge_pair(pairs[name], pairs[opponent], figure, bound)
                              for name in judged_for if name in pairs}}
            rows.append({**row, "text": target_text(row)})
    return {"subjects": judged_for, "rows": rows}


# --- malloc_bench -------------------------------------------------------------------


def judge_bench(samples: dict, subject: str) -> list[dict]:
    """malloc_bench's targets for one allocator, from compare.py's samples
    (samples[benchmark][allocator][metric] = one value per round, rounds aligned)."""
    rows = []
    for benchmark, figure, against, bound, aim in BENCH_TARGETS:
        runs = samples.get(benchmark, {})
        metric = "ns_per_op" if figure == "time" else "rss_bytes"
        opponent = against
        if against == "best peer":
            present = [peer for peer in PEERS if runs.get(peer, {}).get(metric)]
            opponent = min(present, key=lambda peer: statistics.median(runs[peer][metric]),
                           default=None)
        mine = runs.get(subject, {}).get(metric, [])
        theirs = runs.get(opponent, {}).get(metric, []) if opponent else []
        count = min(len(mine), len(theirs))
        rows.append({"benchmark": benchmark, "figure": figure, "against": against,
                     "opponent": opponent, "bound": bound, "aim": aim,
                     "judged": judge(mine[:count], theirs[:count], bound, paired=True)})
    return rows
