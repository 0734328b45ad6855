"""The verdict's figures: every runsel container against rb_first on every workload the
results hold (memory, cost, time), what that says about Mozilla bug 1857133's published
figures, and whether a container has lifo's time and rb_first's memory at once.
Everything here is computed from results["summary"] and kept in results["verdict"] as
numbers and judgements; a figure that was not measured stays None. The sentences are
the renderer's (verdict_text.py).
"""

from __future__ import annotations

from . import comparisons
from .allocators import FIREFOX_MATCHING, REFERENCE, is_setting
from .judgement import answer_group

# Mozilla bug 1857133, measured on Windows against mozjemalloc's tree as built: on the
# trace corpus they are judged against runsel's moz_tree (AS_BUILT) where the corpus
# replayed it, else against rb_first, the idealized lowest-address policy; the workload
# rows (published_comparison) compare with rb_first. Percent differences: sp3 as time
# (negative = faster), base and tp6 as resident memory (positive = more memory).
PUBLISHED = (
    {"container": "rb_root", "claim": "choosing the tree's root",
     "figures": {"sp3": -0.81, "base": 0.62}},
    {"container": FIREFOX_MATCHING, "claim": "a linked list",
     "figures": {"sp3": -1.54, "base": 0.02, "tp6": 1.23}},
    {"container": "array_heap", "claim": "an array heap",
     "figures": {"sp3": -1.42, "base": 1.62, "tp6": -0.18}},
)
# The anchors of the question the new containers answer: lifo's time, rb_first's memory.
# A published figure this small claims "no change": ours agrees when its interval lies
# within ±EQUIVALENCE_MARGIN, disagrees when it lies wholly outside.
NEGLIGIBLE = 0.25
EQUIVALENCE_MARGIN = 0.5
CONFIRMED, REFUTED, NOT_RESOLVABLE = "confirmed", "refuted", "not resolvable"


# --- per workload and container -------------------------------------------------------


def memory_comparison(workload: dict, pair: dict, reference: dict) -> dict | None:
    """Exact where replayed (resident at the key checkpoint; committed when the replay
    did not write its blocks), else the paired comparison of what each run's resident
    memory grew by from its first checkpoint to the key one (metrics.summarize)."""
    if workload["kind"] == "replay":
        exact, base = pair.get("exact"), reference.get("exact")
        if not exact or not base:
            return None
        figure = "resident" if exact.get("writes_blocks") else "committed"
        key = workload["key_checkpoint"]
        mine = next((p for p in exact["checkpoints"] if p["name"] == key), None)
        theirs = next((p for p in base["checkpoints"] if p["name"] == key), None)
        if mine is None or theirs is None:
            return None
        compared = comparisons.exact_difference(mine.get(figure), theirs.get(figure))
        peak = comparisons.exact_difference(exact.get("peak", {}).get(figure),
                                            base.get("peak", {}).get(figure))
        return compared and {**compared, "figure": figure, "peak": peak}
    return pair.get("memory_to_reference")


def cost_comparison(pair: dict, reference: dict) -> dict:
    """Instructions and simulated cache misses, each an exact difference or None."""
    mine, theirs = pair.get("cost") or {}, reference.get("cost") or {}
    return {name: comparisons.exact_difference(mine.get(name), theirs.get(name))
            for name in ("instructions", "d1_misses", "ll_misses")}


def verdict_row(name: str, workload: dict, container: str) -> dict:
    pairs = workload["allocators"]
    pair, reference = pairs.get(container, {}), pairs.get(REFERENCE, {})
    time = pair.get("delta_to_reference") if workload["kind"] == "live" else None
    memory = memory_comparison(workload, pair, reference)
    cost = cost_comparison(pair, reference)
    return {"workload": name, "label": workload.get("label") or name,
            "kind": workload["kind"], "family": workload.get("family", "synthetic"),
            "container": container, "memory": memory,
            "memory_comparable": workload["memory_comparable"],
            "memory_note": workload.get("memory_note"), "cost": cost, "time": time}


def verdict_rows(summary: dict) -> list[dict]:
    """One row per (workload, runsel container other than rb_first), in summary order."""
    rows = []
    for name, workload in summary.items():
        pairs = workload["allocators"]
        if REFERENCE not in pairs:
            continue
        containers = [c for c, pair in pairs.items()
                      if c != REFERENCE and not is_setting(c)
                      and (pair.get("identity", "").startswith("runsel:")
                           or workload["kind"] == "replay")]
        rows.extend(verdict_row(name, workload, container) for container in containers)
    return rows


# --- bug 1857133 ----------------------------------------------------------------------


def evidence_for(measure: str, row: dict) -> tuple[str, dict] | None:
    """(what, comparison) when this verdict row speaks to the published measure:
    sp3 ← time of churn (Speedometer-like) and of the live webkit workload; base ←
    memory of steady_state; tp6 ← memory of page_load and of webkit (live or replay)."""
    workload, family = row["workload"], row["family"]
    if measure == "sp3" and (workload == "churn" or (family == "webkit" and row["kind"] == "live")):
        return f"{row['label']} time", row["time"]
    if not row["memory_comparable"]:
        return None
    if measure == "base" and workload == "steady_state":
        return f"{row['label']} memory", row["memory"]
    if measure == "tp6" and (workload == "page_load" or family == "webkit"):
        return f"{row['label']} memory", row["memory"]
    return None


def judge(published: float, comparison: dict | None) -> str:
    """Does our comparison agree with a published percent difference?"""
    if not comparison or comparison.get("low") is None or comparison.get("high") is None:
        return NOT_RESOLVABLE
    low, high = comparison["low"], comparison["high"]
    if abs(published) < NEGLIGIBLE:
        if -EQUIVALENCE_MARGIN <= low and high <= EQUIVALENCE_MARGIN:
            return CONFIRMED
        if low > EQUIVALENCE_MARGIN or high < -EQUIVALENCE_MARGIN:
            return REFUTED
        return NOT_RESOLVABLE
    sign = 1 if published > 0 else -1
    low, high = sorted((sign * low, sign * high))  # now the claim is "positive"
    if high < abs(published) / 2:  # rules out even half the effect, or the other side
        return REFUTED
    if low > 0:
        return CONFIRMED
    return NOT_RESOLVABLE


def overall(judgements: list[str]) -> str:
    """One word when every judgement agrees; otherwise how many of each."""
    if len(set(judgements)) <= 1:
        return judgements[0] if judgements else NOT_RESOLVABLE
    counts = [f"{judgements.count(j)} {j}" for j in (CONFIRMED, REFUTED, NOT_RESOLVABLE)
              if judgements.count(j)]
    return "partly: " + ", ".join(counts)


def published_comparison(rows: list[dict]) -> list[dict]:
    """Per published claim: each figure with our evidence and its judgement."""
    claims = []
    for claim in PUBLISHED:
        figures = []
        for measure, value in claim["figures"].items():
            evidence = []
            for row in rows:
                if row["container"] != claim["container"]:
                    continue
                found = evidence_for(measure, row)
                if found:
                    what, comparison = found
                    evidence.append({"what": what, "comparison": comparison,
                                     "judgement": judge(value, comparison)})
            figures.append({"measure": measure, "published": value, "evidence": evidence,
                            "judgement": overall([e["judgement"] for e in evidence])})
        claims.append({**claim, "figures": figures,
                       "judgement": overall([e["judgement"] for f in figures
                                             for e in f["evidence"]])})
    return claims


# --- the question: lifo's time and rb_first's memory at once? ---------------------------


def shown_worse(comparison: dict | None) -> bool | None:
    """True when the comparison shows more (its interval, or its exact difference, lies
    above 0), False when it does not, None when it could not tell (not measured, no
    interval)."""
    if not comparison or comparison.get("percent") is None:
        return None
    if comparison.get("exact"):
        return comparison["difference"] > 0
    if comparison.get("low") is None:
        return None
    return comparison["low"] > 0


def time_against(workload: dict, container: str, anchor: str) -> dict | None:
    """The container's time against the anchor's, paired by round (live workloads)."""
    pairs = workload["allocators"]
    if workload["kind"] != "live" or container not in pairs or anchor not in pairs:
        return None
    mine, theirs = pairs[container], pairs[anchor]
    return comparisons.compare_paired(*comparisons.pairs_by_round(
        mine["times"], mine["repetitions"], theirs["times"], theirs["repetitions"]))


def question(summary: dict, rows: list[dict]) -> dict:
    """Is there a container whose time is no worse than lifo's and whose memory is no
    worse than rb_first's on every workload? Per container: each workload's time
    against lifo and memory against rb_first (its verdict row), where it is shown worse,
    and where the run could not tell."""
    containers = dict.fromkeys(row["container"] for row in rows
                               if row["container"] != FIREFOX_MATCHING)  # in row order, once each
    answers, intervals = [], 0
    for container in containers:
        cells, worse, untold = [], [], []
        for row in (r for r in rows if r["container"] == container):
            time = time_against(summary[row["workload"]], container, FIREFOX_MATCHING)
            memory = row["memory"] if row["memory_comparable"] else None
            checks = [("memory", memory)] if row["kind"] == "replay" else \
                [("time", time), ("memory", memory)]
            for figure, comparison in checks:
                said = shown_worse(comparison)
                intervals += bool(comparison and comparison.get("low") is not None
                                  and not comparison.get("exact")
                                  and not comparison.get("constant"))
                where = {"workload": row["workload"], "label": row["label"], "figure": figure}
                if said:
                    worse.append({**where, "comparison": comparison})
                elif said is None or (comparison.get("outcome") == comparisons.UNDERPOWERED):
                    untold.append(where)
            cells.append({"workload": row["workload"], "label": row["label"],
                          "time_vs_lifo": time, "memory_vs_reference": memory})
        answers.append({"container": container, "cells": cells, "worse": worse,
                        "untold": untold, "qualifies": not worse})
    return {"anchors": {"time": FIREFOX_MATCHING, "memory": REFERENCE}, "containers": answers,
            "intervals": intervals}


def time_resolution(rows: list[dict]) -> dict:
    """How many of the rows' time comparisons have an interval, and how many of those
    resolve the target (half-width at most comparisons.TARGET_PERCENT)."""
    timed = [row["time"] for row in rows
             if row["time"] and row["time"].get("half_width") is not None]
    return {"with_interval": len(timed),
            "resolving": sum(t["half_width"] <= comparisons.TARGET_PERCENT for t in timed)}


# --- over the trace corpus ---------------------------------------------------------------

# Which corpus figure speaks to which published measure: AWSY tp6 is resident memory with
# pages loaded, base with no content; the corpus judges them at the last tab loaded and
# after the tabs close, on the resident memory a forced purge leaves (purge timing cannot
# flip it), and beside it on plain resident memory (which it can). sp3 is a browser's
# time: the allocator's own instructions per call speak to it only in part.
CORPUS_EVIDENCE = {"tp6": (("loaded", "purged_resident"), ("loaded", "resident")),
                   "base": (("closed", "purged_resident"), ("closed", "resident")),
                   "sp3": (("cost", "instructions_per_call"),)}


def corpus_published(corpus: dict | None, group: str | None = None) -> list[dict]:
    """Bug 1857133's claims judged on the corpus's judgement of `group` (default: the
    answer's, judgement.answer_group) against moz_tree,
    the tree the bug measured against (its "judgement_as_built"), or against rb_first when
    the corpus did not replay moz_tree: each published figure against each corpus figure
    that speaks to it (CORPUS_EVIDENCE). Each claim names the reference it was judged
    against."""
    group = group or answer_group(corpus)
    found = (corpus or {}).get("groups", {}).get(group) or {}
    judged = found.get("judgement_as_built") or found.get("judgement")
    if not judged:
        return []
    claims = []
    for claim in PUBLISHED:
        mine = judged["containers"].get(claim["container"])
        if mine is None:
            continue
        figures = []
        for measure, value in claim["figures"].items():
            evidence = []
            for moment, figure in CORPUS_EVIDENCE[measure]:
                found = mine["cost"][figure] if moment == "cost" else mine["memory"][moment][figure]
                evidence.append({"moment": moment, "figure": figure, "comparison": found,
                                 "judgement": judge(value, found)})
            figures.append({"measure": measure, "published": value, "evidence": evidence,
                            "judgement": evidence[0]["judgement"]})
        claims.append({"container": claim["container"], "claim": claim["claim"],
                       "figures": figures, "n_traces": len(judged["traces"]),
                       "reference": judged["reference"]})
    return claims


def build(summary: dict, corpus: dict | None = None) -> dict:
    """results["verdict"], numbers and judgements only (report.py and verdict_text.py
    write the sentences): the rows, the published comparison, the question, how many
    time comparisons resolve the target, bug 1857133 judged on the trace corpus, and the
    rules applied."""
    rows = verdict_rows(summary)
    return {"rows": rows, "published": published_comparison(rows),
            "published_on_corpus": corpus_published(corpus),
            "question": question(summary, rows), "time_resolution": time_resolution(rows),
            "rules": {"negligible_published_percent": NEGLIGIBLE,
                      "equivalence_margin_percent": EQUIVALENCE_MARGIN,
                      "time_target_percent": comparisons.TARGET_PERCENT}}
