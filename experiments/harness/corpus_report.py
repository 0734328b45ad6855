"""The report's answer over the trace corpus: the opening paragraph, the table behind it,
purge timing on its own, bug 1857133 judged on the corpus, and the size classes that
differ most. Sentences are written here from the numbers of results["corpus"] (the
judgements of judgement.py) and results["verdict"]["published_on_corpus"]; nothing is
computed that the run did not measure.
"""

from __future__ import annotations

from . import report_firefox_corpus
from .allocators import AS_BUILT, REFERENCE
from .judgement import answer_group

MOMENT_WORDS = {"loaded": "with the pages loaded", "closed": "after the tabs close",
                "peak": "at the peak"}
FIGURE_WORDS = {"purged_resident": "resident after a forced purge",
                "footprint": "committed − dirty", "bin_unused": "bin_unused",
                "resident": "resident", "committed": "committed",
                "dirty": "dirty (share of committed)",
                "instructions_per_call": "allocator instructions per call",
                "d1_misses_per_call": "allocator D1 misses per call",
                "ll_misses_per_call": "allocator LL misses per call"}
# The answer table's columns, (moment or "cost", figure); the paragraph above it quotes
# the first three and the instructions per call.
ANSWER_COLUMNS = (("closed", "purged_resident"), ("loaded", "purged_resident"),
                  ("closed", "footprint"), ("closed", "bin_unused"),
                  ("cost", "instructions_per_call"), ("cost", "ll_misses_per_call"))
PURGE_COLUMNS = (("closed", "resident"), ("closed", "committed"), ("closed", "dirty"),
                 ("loaded", "resident"))
TOP_CLASSES = 8


def group_judgement(results: dict, group: str | None = None) -> dict | None:
    corpus = results.get("corpus") or {}
    found = corpus.get("groups", {}).get(group or answer_group(corpus)) or {}
    return found.get("judgement")


def judged_cell(judged: dict | None) -> str:
    if not judged or judged["outcome"] == "not measured":
        return "not measured"
    if judged["outcome"] == "identical":
        return "identical"
    if judged["outcome"] == "exact for one trace":
        return f"{judged['percent']:+.2f} % (one trace)"
    text = f"{judged['percent']:+.2f} [{judged['low']:+.2f}, {judged['high']:+.2f}]"
    return text if judged["outcome"] != "not resolvable" else text + " ?"


def pick(judged: dict, container: str, column: tuple[str, str]) -> dict:
    moment, figure = column
    mine = judged["containers"][container]
    return mine["cost"][figure] if moment == "cost" else mine["memory"][moment][figure]


def corpus_words(results: dict) -> str:
    """'8 WebKit traces (corpus pages 1-4 ×5, 5-8, 9-12, 13-16; 8 reused from the cache)'."""
    firefox = ((results.get("corpus") or {}).get("groups") or {}).get("firefox")
    if firefox:  # the answer's group (judgement.answer_group)
        sessions = firefox["members"]["firefox"]
        return (f"the content logs of {counted(len(sessions), 'Firefox session')} under the "
                f"installed Firefox's run sizes (set "
                f"{(results.get('firefox_corpus') or {}).get('set')}: {', '.join(sessions)})")
    recordings = (results.get("corpus") or {}).get("recordings") or []
    ranges: dict[str, int] = {}
    for recording in recordings:
        key = "{}-{}".format(*recording["pages"])
        ranges[key] = ranges.get(key, 0) + 1
    listed = ", ".join(key + (f" ×{count}" if count > 1 else "") for key, count in ranges.items())
    reused = sum(1 for recording in recordings if recording.get("reused"))
    words = (f"{len(recordings)} WebKit traces (corpus pages {listed}; {reused} reused from the "
             "cache)")
    joined = ((results.get("corpus") or {}).get("groups") or {}).get("browsers")
    if joined:
        logs = joined["members"]["firefox"]
        words += (f" and {len(logs)} Firefox {joined['firefox']} log{'s' * (len(logs) > 1)} "
                  "of the same corpus "
                  f"({', '.join(name.split(' ', 1)[1] for name in logs)} process)")
    return words


def ranked(judged: dict, column: tuple[str, str]) -> dict[str, list]:
    """The containers by outcome for one column ("other": exact for one trace, not
    measured), each list sorted by its mean."""
    found: dict[str, list] = {"lower": [], "higher": [], "not resolvable": [], "identical": [],
                              "other": []}
    for container in judged["containers"]:
        one = pick(judged, container, column)
        found.get(one["outcome"], found["other"]).append((container, one))
    for values in found.values():
        values.sort(key=lambda item: item[1]["percent"] if item[1]["percent"] is not None else 0)
    return found


def interval_words(container: str, judged: dict) -> str:
    return f"{container} {judged['percent']:+.2f} % [{judged['low']:+.2f}, {judged['high']:+.2f}]"


def column_sentence(judged: dict, column: tuple[str, str], reference: str) -> str:
    moment, figure = column
    groups = ranked(judged, column)
    what = FIGURE_WORDS[figure] + ("" if moment == "cost" else f" {MOMENT_WORDS[moment]}")
    parts = []
    if groups["lower"]:
        best, best_judged = groups["lower"][0]
        parts.append(f"{best} is lowest, " + interval_words(best, best_judged).split(" ", 1)[1])
        if len(groups["lower"]) > 1:
            parts.append("also lower: " + ", ".join(interval_words(c, j)
                                                     for c, j in groups["lower"][1:]))
    else:
        parts.append(f"no container is resolved below {reference}")
    if groups["higher"]:
        parts.append("higher: " + ", ".join(interval_words(c, j) for c, j in groups["higher"]))
    if groups["not resolvable"]:
        parts.append("not resolvable: " + ", ".join(
            f"{c} ({j['percent']:+.2f} ± {j['half_width']:.2f})"
            for c, j in groups["not resolvable"]))
    if groups["identical"]:
        parts.append("identical to " + reference + " on every trace: "
                     + ", ".join(c for c, _ in groups["identical"]))
    return f"{what.capitalize()}: " + "; ".join(parts) + "."


# The report's first screen: the short answer in at most this many words, then the picture.
SHORT_ANSWER_WORDS = 120
NAMED = 4  # a list of containers in the short answer names this many, then counts the rest
SHORT_MEMORY, SHORT_COST = ("closed", "purged_resident"), ("cost", "instructions_per_call")


def named(containers: list[str]) -> str:
    """'a', 'a and b', 'a, b and c', 'a, b, c and 5 more' (NAMED at most)."""
    if len(containers) > NAMED:
        containers = [*containers[:NAMED - 1], f"{len(containers) - NAMED + 1} more"]
    return (", ".join(containers[:-1]) + " and " + containers[-1] if len(containers) > 1
            else "".join(containers))


def favoured(judged: dict, column: tuple[str, str], reference: str) -> str:
    """Which container the data favours on one figure (lower is better: less memory, fewer
    instructions), with its interval: the lowest of those resolved below the reference;
    else the reference over those resolved above it; else none."""
    groups = ranked(judged, column)
    lower, higher = groups["lower"], groups["higher"]
    if lower:
        best, best_judged = lower[0]
        return (f"the data favours {interval_words(best, best_judged)}"
                + (f" ({len(lower) - 1} more also below {reference})" if len(lower) > 1 else ""))
    if higher:
        nearest, nearest_judged = higher[0]
        over = (interval_words(nearest, nearest_judged) if len(higher) == 1 else
                f"{len(higher)} containers, the nearest {interval_words(nearest, nearest_judged)}")
        return f"the data favours {reference} over {over}, and no container over {reference}"
    return f"the data favours none: no container is resolved above or below {reference}"


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def traces_words(results: dict, judged: dict) -> str:
    """'3 WebKit traces', or with the Firefox logs joined '3 WebKit traces and 1 Firefox
    log' (the answer's group, judgement.answer_group)."""
    corpus = results.get("corpus")
    members = (((corpus or {}).get("groups") or {}).get("browsers") or {}).get("members")
    if answer_group(corpus) == "browsers" and members:
        return (f"{counted(len(members['webkit']), 'WebKit trace')} and "
                f"{counted(len(members['firefox']), 'Firefox log')}")
    return counted(len(judged["traces"]), "WebKit trace")


def short_answer(results: dict) -> str:
    """The report's opening (at most SHORT_ANSWER_WORDS words; the picture follows it, then
    answer_paragraph): which container the data favours on memory and on cost over the
    trace corpus, with the interval, and what the run could not resolve. Written from the
    judgement in results["corpus"], as answer_paragraph is."""
    firefox = report_firefox_corpus.short_answer(results)
    if firefox:
        return firefox
    judged = group_judgement(results)
    if not judged:
        words = answer_paragraph(results).split()
        return " ".join(words if len(words) <= SHORT_ANSWER_WORDS
                        else [*words[:SHORT_ANSWER_WORDS - 1], "…"])
    reference = judged["reference"]
    memory_what = f"{FIGURE_WORDS[SHORT_MEMORY[1]]} {MOMENT_WORDS[SHORT_MEMORY[0]]}"
    unresolved = []
    for what, column in (("memory", SHORT_MEMORY), ("cost", SHORT_COST),
                         ("plain resident, which purge timing moves,", ("closed", "resident"))):
        groups = ranked(judged, column)
        left = [container for container, _ in groups["not resolvable"]]
        if left:
            unresolved.append(f"{what} for {named(left)}" if column != ("closed", "resident")
                              else f"{what} for {len(left)} of "
                                   f"{sum(map(len, groups.values()))}")
    return " ".join([
        f"**In short**, over {traces_words(results, judged)}, each container against "
        f"{reference}, mean difference [95 % interval]:",
        f"**Memory** ({memory_what}): {favoured(judged, SHORT_MEMORY, reference)}.",
        f"**Cost** ({FIGURE_WORDS[SHORT_COST[1]]}): "
        f"{favoured(judged, SHORT_COST, reference)}.",
        "**Not resolved** (the interval straddles 0): " + "; ".join(unresolved) + "."
        if unresolved else "Every container is resolved on both.",
    ])


def cost_words(results: dict, count: int) -> str:
    """Which logs the answer's cost was counted on: '24 windows of 25000 records spread over
    each of 3 traces', with the Firefox group the sessions' names and run sizes."""
    corpus = results.get("corpus") or {}
    if answer_group(corpus) == "firefox":
        entry = results.get("firefox_corpus") or {}
        cost = entry.get("cost") or {}
        return (f"{cost.get('windows')} windows of {cost.get('window_records')} records spread "
                f"over the content log of each of {counted(count, 'session')} "
                f"({', '.join(entry['costed'])}: the shortest of each page set), under the "
                "installed Firefox's run sizes")
    cost = corpus.get("cost") or {}
    return (f"{cost.get('windows')} windows of {cost.get('window_records')} records spread "
            f"over each of {counted(count, 'trace')}")


def cost_shares(results: dict) -> list[float]:
    """The shares of their traces' records the answer group's callgrind windows covered."""
    corpus = results.get("corpus") or {}
    if answer_group(corpus) == "firefox":
        blocks = [cost for session in (results.get("firefox_corpus") or {}).get("sessions", [])
                  for process in session["processes"]
                  for cost in (process.get("cost") or {}).values()]
    else:
        blocks = [pair.get("cost") for entry in
                  ((corpus.get("groups") or {}).get("webkit") or {}).get("entries", {}).values()
                  for pair in entry.get("allocators", {}).values()]
    return sorted({block["share"] for block in blocks
                   if block and block.get("share") is not None})


def answer_paragraph(results: dict) -> str:
    """The report's first paragraph: which container, for memory and for cost, with the
    intervals over the corpus and what could not be resolved."""
    judged = group_judgement(results)
    if not judged:
        why = ((results.get("corpus") or {}).get("error")
               or "no trace corpus in this run (the webkit workload was left out)")
        return f"No answer over a trace corpus: {why}. The tables below are per workload."
    reference = judged["reference"]
    costed = pick(judged, next(iter(judged["containers"])), ("cost", "instructions_per_call"))
    sentences = [
        f"Over {corpus_words(results)}, each container against {reference} on the same trace, "
        "mean difference with a 95 % interval over the traces (a difference whose interval "
        "straddles 0 is not resolvable; one trace's exact difference is exact for that trace "
        "only):",
        "**Memory** (figures that purge timing cannot flip). "
        + column_sentence(judged, ("closed", "purged_resident"), reference),
        column_sentence(judged, ("loaded", "purged_resident"), reference),
        column_sentence(judged, ("closed", "footprint"), reference),
        f"**Cost** (the allocator's own instructions as shipped, counted by callgrind over "
        f"{cost_words(results, costed['n_traces'])}; the share covered is in the table "
        "below). " + column_sentence(judged, ("cost", "instructions_per_call"), reference)
        if costed["n_traces"] else
        "**Cost**: not measured (no callgrind windows over this group's logs in this run).",
    ]
    webkit = group_judgement(results, "webkit")
    if webkit is not judged and webkit:
        sentences.append(
            f"**The WebKit traces alone** ({len(webkit['traces'])} traces; pooled with the "
            "Firefox logs, any difference between the two browsers widens the interval): "
            + column_sentence(webkit, ("closed", "purged_resident"), reference))
    resident = ranked(judged, ("closed", "resident"))
    unresolved = len(resident["not resolvable"])
    total = sum(len(values) for values in resident.values())
    widest = max((j["sd"] for values in resident.values() for _, j in values
                  if j.get("sd") is not None), default=None)
    sentences.append(
        f"**Purge timing**, reported apart: plain resident memory after the close is not "
        f"resolvable for {unresolved} of {total} containers"
        + (f" (per-trace SD of the difference up to {widest:.2f} %)" if widest is not None else "")
        + "; see \"Purge timing over the corpus\".")
    return " ".join(sentences)


def answer_table(results: dict):
    """Containers against the figures the answer rests on, judged over the corpus."""
    judged = group_judgement(results)
    if not judged:
        return "Over the trace corpus", [], [], ""
    headers = ["container", *[FIGURE_WORDS[f] + ("" if m == "cost" else f", {m}")
                              for m, f in ANSWER_COLUMNS]]
    rows = [[container, *[judged_cell(pick(judged, container, column))
                          for column in ANSWER_COLUMNS]]
            for container in judged["containers"]]
    shares = cost_shares(results)
    note = (f"Percent against {judged['reference']}, mean over "
            f"{counted(len(judged['traces']), 'trace')} "
            "[95 % interval, Student's t on the per-trace differences, paired by trace]; "
            "\"?\" = not resolvable (the interval straddles 0); identical = the same figure on "
            "every trace. Every replay is exact for its trace; the traces are the replicates. "
            "Cost: the allocator's own instructions and simulated misses per call as shipped, "
            "without link verification (hardened beside it: \"The price of the link checks\"; "
            "callgrind, the replayer's own work left out), "
            + (f"covering {100 * shares[0]:.2f}–{100 * shares[-1]:.2f} % of each trace's records."
               if shares else "not measured."))
    return "Over the trace corpus", headers, rows, note


def purge_timing_table(results: dict):
    judged = group_judgement(results)
    if not judged:
        return "Purge timing over the corpus", [], [], ""
    headers = ["container", *[FIGURE_WORDS[f] + f", {m}" for m, f in PURGE_COLUMNS],
               "resident, closed: SD over traces"]
    rows = [[container, *[judged_cell(pick(judged, container, column)) for column in PURGE_COLUMNS],
             (f"{pick(judged, container, ('closed', 'resident'))['sd']:.2f} %"
              if pick(judged, container, ('closed', 'resident')).get("sd") is not None else "-")]
            for container in judged["containers"]]
    return ("Purge timing over the corpus", headers, rows,
            "The figures that move with when the deferred purge ran: resident and committed "
            "include dirty pages waiting for it; dirty is shown as a share of the reference's "
            "committed memory. Compare their spread with the table above.")


def published_corpus_table(results: dict):
    claims = results["verdict"].get("published_on_corpus") or []
    headers = ["claim", "published", "on the corpus", "judgement"]
    rows = []
    for claim in claims:
        for figure in claim["figures"]:
            for evidence in figure["evidence"]:
                where = ("" if evidence["moment"] == "cost" else
                         f" {MOMENT_WORDS[evidence['moment']]}")
                rows.append([f"{claim['claim']} ({claim['container']}): {figure['measure']}",
                             f"{figure['published']:+.2f} %",
                             f"{FIGURE_WORDS[evidence['figure']]}{where}: "
                             f"{judged_cell(evidence['comparison'])}",
                             evidence["judgement"]])
    reference = claims[0].get("reference", REFERENCE) if claims else REFERENCE
    against = ("moz_tree, mozjemalloc's tree as Firefox shipped it, the bug's own baseline"
               if reference == AS_BUILT else
               f"{reference} (the corpus did not replay moz_tree, the bug's own baseline)")
    return (f"Bug 1857133 judged on the corpus, against {reference}", headers, rows,
            f"Against {against}. "
            "Each published effect against the corpus's interval: confirmed when the interval "
            "lies on the published side and reaches half the effect, refuted when it rules out "
            "half of it, not resolvable otherwise; a published figure under 0.25 % claims "
            "\"no change\". tp6 ↔ the last tab loaded, base ↔ after the tabs close; sp3 is a "
            "browser's time, which the allocator's instructions per call speak to only in part.")


def per_class_table(results: dict, moment: str = "closed"):
    """bin_unused per size class on the corpus's first trace: only the classes where the
    containers differ most from the reference (the largest spread), not every class."""
    groups = (results.get("corpus") or {}).get("groups", {})
    entries = [entry for entry in (groups.get("webkit") or {}).get("entries", {}).values()
               if "error" not in entry]
    judged = group_judgement(results)
    if not entries or not judged:
        return "Size classes that differ most", [], [], ""
    entry, reference = entries[0], judged["reference"]
    name = "tabs_closed" if moment == "closed" else entry["key_checkpoint"]

    def bins(container):
        points = entry["allocators"][container]["exact"]["checkpoints"]
        point = next((p for p in points if p["name"] == name), points[-1])
        return {b["size"]: b["unused_bytes"] for b in point.get("bins") or []}
    base = bins(reference)
    containers = [c for c in entry["allocators"] if c != reference]
    table = {c: bins(c) for c in containers}
    spread = {size: max(abs(table[c].get(size, 0) - value) for c in containers)
              for size, value in base.items()}
    top = sorted((size for size in spread if spread[size] > 0),
                 key=lambda s: -spread[s])[:TOP_CLASSES]
    if not top:
        return "Size classes that differ most", [], [], ""
    headers = ["container", *[f"{size} B" for size in sorted(top)]]
    rows = [[reference, *[f"{base[size] / 1024:.0f} KiB" for size in sorted(top)]]]
    rows += [[c, *[f"{(table[c].get(size, 0) - base[size]) / 1024:+.0f}" for size in sorted(top)]]
             for c in containers]
    return (f"Size classes that differ most ({entry['label']}, {name})", headers, rows,
            f"bin_unused per size class: {reference} in KiB, the others' difference to it in KiB; "
            f"the {len(top)} classes of {len(base)} where some container differs most.")
