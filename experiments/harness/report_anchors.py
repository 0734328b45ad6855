"""The report's anchor tables (results.json's "anchors", anchors.py): moz_tree, the tree
mozjemalloc shipped, against rb_first, the idealized tree, on every replayed trace; and
moz_tree's and lifo's own instructions per allocator call. Data in, (title, headers,
rows, note) out, like report.py's other tables; no statistics here."""

from __future__ import annotations

from .allocators import AS_BUILT, FIREFOX_MATCHING, REFERENCE
from .corpus_report import FIGURE_WORDS, MOMENT_WORDS


def percent_cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:+.{digits}f} %"


def interval_cell(judged: dict, unit: str = " %", digits: int = 3, signed: bool = True) -> str:
    """'+0.41 % [+0.12, +0.70]'; one trace: its value, exact for it; for a difference
    (signed), '?' when the interval straddles 0."""
    if judged["mean"] is None:
        return "-"
    sign = "+" if signed else ""
    mean = f"{judged['mean']:{sign}.{digits}f}{unit}"
    if judged["outcome"] == "identical":
        return mean + " (identical on every trace)"
    if judged["low"] is None:
        return mean + " (one trace)"
    text = f"{mean} [{judged['low']:{sign}.{digits}f}, {judged['high']:{sign}.{digits}f}]"
    return text + (" ?" if signed and judged["outcome"] == "not resolvable" else "")


def mean_label(group: dict) -> str:
    count = len(group["traces"])
    return f"mean over {count} trace" + ("s" if count != 1 else "")


def idealized_table(results: dict):
    """moz_tree against rb_first, each trace and each group's interval over its traces."""
    anchors = results.get("anchors") or {}
    memory = anchors.get("memory") or {}
    title = ("How far the idealized tree is from the one mozjemalloc shipped: "
             f"{anchors.get('shipped', AS_BUILT)} against {anchors.get('idealized', REFERENCE)}")
    if not memory.get("groups"):
        return title, [], [], ""
    headers = ["traces", "trace", *[f"{FIGURE_WORDS[figure]}, {moment}"
                                     for moment, figure in memory["columns"]]]
    rows = []
    for group in memory["groups"]:
        for trace in group["traces"]:
            rows.append([group["label"], trace["trace"],
                         *[percent_cell(value) for value in trace["differences"]]])
        rows.append([group["label"], mean_label(group),
                     *[interval_cell(judged) for judged in group["judged"]]])
    moments = "; ".join(f"{moment} = {MOMENT_WORDS[moment]}" for moment in ("loaded", "closed"))
    note = (f"{anchors['shipped']} (mozjemalloc's bin until 2024: a current run outside the "
            "tree; a run that regains a free region while there is no current run becomes "
            f"current whatever its address) minus {anchors['idealized']} (always the lowest "
            f"non-full run), in percent of {anchors['idealized']}'s figure on the same trace: "
            f"positive = the shipped tree holds more. {moments}. Each trace's difference is "
            "exact for that trace (deterministic replays); the mean row has the 95 % interval "
            "over the traces of its group (Student's t; \"?\" = it straddles 0), groups never "
            "pooled. A dash: a figure the replays did not give.")
    return title, headers, rows, note


def cost_table(results: dict):
    """moz_tree's and lifo's own instructions per allocator call, and their difference."""
    anchors = results.get("anchors") or {}
    cost = anchors.get("cost") or {}
    shipped, today = anchors.get("shipped", AS_BUILT), anchors.get("today", FIREFOX_MATCHING)
    title = (f"The change Firefox made, in instructions: {shipped} and {today} per "
             "allocator call")
    if not cost.get("groups"):
        return title, [], [], ""
    headers = ["traces", "trace", f"{shipped}", f"{today}", f"{shipped} − {today}",
               f"in % of {today}", f"{shipped} − {today}, hardened", "calls counted"]
    rows = []
    for group in cost["groups"]:
        for trace in group["traces"]:
            hardened = trace.get("difference_hardened")
            rows.append([group["label"], trace["trace"], f"{trace['shipped']:.1f}",
                         f"{trace['today']:.1f}", f"{trace['difference']:+.1f}",
                         percent_cell(trace["percent"], 2),
                         "-" if hardened is None else f"{hardened:+.1f}",
                         f"{trace['calls']:,d}"])
        judged = group["judged"]
        rows.append([group["label"], mean_label(group),
                     interval_cell(judged["shipped"], "", 1, signed=False),
                     interval_cell(judged["today"], "", 1, signed=False),
                     interval_cell(judged["difference"], "", 1),
                     interval_cell(judged["percent"], digits=2),
                     interval_cell(judged["difference_hardened"], "", 1)
                     if judged.get("difference_hardened") else "-", ""])
    note = ("The allocator's own instructions per allocator call as shipped (no link "
            "verification; callgrind over the corpus's windows, the replayer's own work "
            "left out, as in the corpus table), exact for each trace and window; beside it "
            "the difference on the hardened builds, every link verified (\"-\": not counted "
            "hardened on that trace; the price of the checks has its own table). The mean "
            "row has the 95 % interval over the traces (Student's t; \"?\" = the "
            "difference's interval straddles 0).")
    return title, headers, rows, note
