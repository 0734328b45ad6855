"""The anchors side by side on every replayed trace: how far rb_first, the idealized
lowest-address tree, is from moz_tree, the tree mozjemalloc shipped until 2024 (memory
that purge timing cannot flip), and what the change Firefox made, moz_tree to lifo, did
to the allocator's own instructions per call. Computed when the run ends from the corpus
replays (results["corpus"]) and the Firefox log replays (results["firefox"]); kept in
results["anchors"] as numbers; report.py's anchor tables only lay them out.

Each trace's difference is exact for that trace; a group of traces (the WebKit corpus,
the --corpus-file traces, Firefox's processes) gets the judgement's interval over its
traces (judgement.judge), never pooled with another group.
"""

from __future__ import annotations

from . import judgement
from .allocators import AS_BUILT, FIREFOX_MATCHING, REFERENCE
from .firefox_names import CORPUS_GROUP_LABELS

# (moment, figure): the figures purge timing cannot flip, with the pages loaded and after
# the tabs close (judgement.moments).
MEMORY_COLUMNS = (("loaded", "purged_resident"), ("closed", "purged_resident"),
                  ("closed", "footprint"), ("closed", "bin_unused"))
COST_FIGURE = "instructions_per_call"
GROUP_LABELS = {"webkit": "WebKit corpus", "files": "--corpus-file traces",
                "firefox_workload": "Firefox logs (the firefox workload's session)",
                **CORPUS_GROUP_LABELS}


def interval(values: dict[str, float | None]) -> dict:
    """Mean of the per-trace values with judgement.judge's 95 % interval (Student's t over
    the traces): {mean, low, high, n, outcome}."""
    judged = judgement.judge(values)
    return {"mean": judged["percent"], "low": judged["low"], "high": judged["high"],
            "n": judged["n_traces"], "outcome": judged["outcome"]}


def memory_group(group: str, traces: dict[str, dict[tuple[str, str], float | None]]) -> dict:
    """traces: {trace: {(moment, figure): AS_BUILT's percent difference to REFERENCE}}."""
    return {"group": group, "label": GROUP_LABELS.get(group, group),
            "traces": [{"trace": name, "differences": [found.get(column)
                                                       for column in MEMORY_COLUMNS]}
                       for name, found in traces.items()],
            "judged": [interval({name: found.get(column) for name, found in traces.items()})
                       for column in MEMORY_COLUMNS]}


def corpus_memory(entries: dict[str, dict]) -> dict[str, dict]:
    """{trace: {column: percent}} for the traces whose replays hold both containers."""
    usable = {name: entry for name, entry in entries.items()
              if "error" not in entry and AS_BUILT in entry["allocators"]
              and REFERENCE in entry["allocators"]}
    found: dict[str, dict] = {name: {} for name in usable}
    for moment, figure in MEMORY_COLUMNS:
        for name, value in judgement.trace_differences(usable, AS_BUILT, REFERENCE,
                                                       moment, figure).items():
            found[name][(moment, figure)] = value
    return found


def firefox_point(process: dict, container: str, moment: str) -> dict | None:
    """A Firefox process's figures on `container` at "loaded" (its last tab_N_loaded mark)
    or "closed" (tabs_closed)."""
    marks = [mark for mark in process["marks"] if mark["label"] != "every"]
    if moment == "loaded":
        chosen = [m for m in marks
                  if m["label"].startswith("tab_") and m["label"].endswith("_loaded")]
    else:
        chosen = [m for m in marks if m["label"] == "tabs_closed"]
    return chosen[-1]["figures"].get(container) if chosen else None


def firefox_memory(firefox: dict) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for process in firefox.get("processes", []):
        name = f"{process['role']} ({process['pid']})"
        found[name] = {}
        for moment, figure in MEMORY_COLUMNS:
            mine, base = (firefox_point(process, AS_BUILT, moment),
                          firefox_point(process, REFERENCE, moment))
            value = reference = None
            if mine and base:
                value, reference = (judgement.memory_value(mine, figure),
                                    judgement.memory_value(base, figure))
            found[name][(moment, figure)] = (
                None if value is None or reference is None
                else judgement.percent_difference(value, reference))
    return found if any(any(v is not None for v in d.values()) for d in found.values()) else {}


def cost_group(group: str, entries: dict[str, dict]) -> dict | None:
    """AS_BUILT's and FIREFOX_MATCHING's own instructions per allocator call on each trace with
    callgrind windows, and their difference (AS_BUILT - FIREFOX_MATCHING, and in percent of
    FIREFOX_MATCHING's)."""
    traces = []
    for name, entry in entries.items():
        pairs = entry.get("allocators", {})
        if "error" in entry or AS_BUILT not in pairs or FIREFOX_MATCHING not in pairs:
            continue
        shipped = judgement.cost_value(pairs[AS_BUILT].get("cost"), COST_FIGURE)
        today = judgement.cost_value(pairs[FIREFOX_MATCHING].get("cost"), COST_FIGURE)
        if shipped is None or today is None:
            continue
        # Beside it, the same difference on the hardened builds (None where not counted).
        hardened = [judgement.cost_value(pairs[name].get("cost_hardened"), COST_FIGURE)
                    for name in (AS_BUILT, FIREFOX_MATCHING)]
        traces.append({"trace": name, "shipped": shipped, "today": today,
                       "difference": shipped - today,
                       "percent": judgement.percent_difference(shipped, today),
                       "difference_hardened": None if None in hardened
                       else hardened[0] - hardened[1],
                       "calls": pairs[AS_BUILT]["cost"]["calls"],
                       "share": pairs[AS_BUILT]["cost"].get("share")})
    if not traces:
        return None
    return {"group": group, "label": GROUP_LABELS.get(group, group), "traces": traces,
            "judged": {key: interval({t["trace"]: t.get(key) for t in traces})
                       for key in ("shipped", "today", "difference", "percent",
                                   "difference_hardened")}}


def build(corpus: dict | None, firefox: dict | None,
          sessions: dict[str, dict[str, dict]] | None = None) -> dict | None:
    """results["anchors"]; None when no replayed trace holds both anchors of either table.
    sessions: the Firefox corpus's groups' entries ({group: {session: summary entry}},
    firefox_groups.group_entries'), which corpus["groups"] names without holding them."""
    memory, cost = [], []
    for group, data in ((corpus or {}).get("groups") or {}).items():
        entries = data.get("entries") or (sessions or {}).get(group) or {}
        found = corpus_memory(entries)
        if found:
            memory.append(memory_group(group, found))
        costed = cost_group(group, entries)
        if costed:
            cost.append(costed)
    if firefox and "error" not in firefox:
        found = firefox_memory(firefox)
        if found:
            memory.append(memory_group("firefox_workload", found))
    if not memory and not cost:
        return None
    return {"shipped": AS_BUILT, "idealized": REFERENCE, "today": FIREFOX_MATCHING,
            "memory": {"columns": [list(column) for column in MEMORY_COLUMNS], "groups": memory},
            "cost": {"figure": COST_FIGURE, "groups": cost}}
