"""The report's tables on the corpus of Firefox sessions (results.json's "firefox_corpus"
and the firefox groups of "corpus"): the sessions kept and left out, each group's
judgement on the session mean and the peak, and lifo@firefox against Firefox's own
allocator at every mark of every session. Data in, (title, headers, rows, note) out."""

from __future__ import annotations

from .allocators import FIREFOX_MATCHING, REFERENCE
from .firefox_names import GROUPS, REFERENCE_NAME
from .judgement import judgement_text

MIB = 2 ** 20
JUDGED_LIVE, JUDGED_UNUSED = 16 * MIB, 1 * MIB  # the marks the ±2 % target applies to
TARGET_PERCENT = 2.0
GROUP_WORDS = {"firefox": "content logs, the installed Firefox's run sizes (the headline)",
               "firefox_classic": "content logs, the classic run sizes",
               "firefox_parent": "parent logs, the installed Firefox's run sizes"}


def corpus_table(results: dict):
    """One row per session kept: its pages, its content log's size and checks."""
    entry = results.get("firefox_corpus") or {}
    headers = ["session", "pages", "content calls", "marks", "coverage", "frees dropped",
               "live reuses", "recording"]
    rows = []
    for session in entry.get("sessions", []):
        content = next(p for p in session["processes"] if p["role"] == "content")
        recording = content["recording"]
        rows.append([session["name"], ",".join(map(str, session["pages"])) or session["source"],
                     f"{recording['calls']:,d}", len(content["marks"]),
                     "-" if recording["coverage"] is None else f"{recording['coverage']:.1%}",
                     f"{recording['frees_dropped_share']:.2%}", recording["live_reuses"],
                     "reused" if session["reused"] else "recorded"])
    left = "; ".join(f"{s['name']}: {s['reason']}" for s in entry.get("left_out", []))
    note = (f"Set {entry.get('set')}: {len(rows)} sessions kept"
            + (f", left out: {left}" if left else ", none left out")
            + f". Run sizes @firefox: {entry.get('run_pages_setting', '-')}."
            + (f" {entry['error']}" if "error" in entry else ""))
    return "The Firefox corpus", headers, rows, note


def groups_table(results: dict):
    """Each Firefox group's judgement against rb_first, paired by session: bin_unused and
    committed - dirty as the session mean and at the peak."""
    groups = (results.get("corpus") or {}).get("groups") or {}
    headers = ["group", "container", "bin_unused, session mean", "bin_unused, peak",
               "committed - dirty, session mean", "committed - dirty, peak"]
    rows = []
    for group in GROUPS:
        judged = (groups.get(group) or {}).get("judgement")
        if not judged:
            continue
        for container, found in judged["containers"].items():
            memory = found["memory"]
            rows.append([group, container, judgement_text(memory["mean"]["bin_unused"]),
                         judgement_text(memory["peak"]["bin_unused"]),
                         judgement_text(memory["mean"]["footprint"]),
                         judgement_text(memory["peak"]["footprint"])])
    note = ("Each container against " + REFERENCE + " under the same run sizes, percent "
            "difference, mean over sessions with a 95 % interval (Student's t, paired by "
            "session). Session mean: the mean of the figure over every mark of the log; "
            "peak: its highest value at any mark. Groups: " +
            "; ".join(f"{name}: {words}" for name, words in GROUP_WORDS.items()) +
            ". Never pooled with each other or with the WebKit traces.")
    return "The Firefox groups: session mean and peak", headers, rows, note


def reference_rows(results: dict) -> list[dict]:
    """lifo@firefox against Firefox's own allocator at every mark of every session's
    content log: {session, label, live, unused, ours, theirs, footprint_ours,
    footprint_theirs, judged}."""
    found = []
    matching = f"{FIREFOX_MATCHING}@firefox"
    for session in (results.get("firefox_corpus") or {}).get("sessions", []):
        for process in session["processes"]:
            if process["role"] != "content":
                continue
            for mark in process["marks"]:
                ours, theirs = mark["figures"].get(matching), mark["figures"].get(REFERENCE_NAME)
                if not ours or not theirs:
                    continue
                live = theirs.get("live_requested") or theirs["allocated"]
                found.append({
                    "session": session["name"], "label": mark["label"], "live": live,
                    "ours": ours["bin_unused"], "theirs": theirs["bin_unused"],
                    "footprint_ours": ours["committed"] - ours["dirty"],
                    "footprint_theirs": theirs["committed"] - theirs["dirty"],
                    "judged": live >= JUDGED_LIVE and theirs["bin_unused"] >= JUDGED_UNUSED})
    return found


def percent(ours: int, theirs: int) -> float | None:
    return None if not theirs else 100.0 * (ours - theirs) / theirs


def reference_table(results: dict):
    """lifo@firefox's bin_unused and committed - dirty against the installed Firefox's
    allocator at every mark of every session, the judged marks marked."""
    headers = ["session", "mark", "live MiB", "bin_unused MiB (lifo@firefox / Firefox)",
               "bin_unused diff", "committed - dirty diff", "judged (>= 16 MiB live, "
               ">= 1 MiB unused)"]
    found = reference_rows(results)
    rows = []
    for row in found:
        unused = percent(row["ours"], row["theirs"])
        rows.append([row["session"], row["label"], f"{row['live'] / MIB:.1f}",
                     f"{row['ours'] / MIB:.2f} / {row['theirs'] / MIB:.2f}",
                     "-" if unused is None else f"{unused:+.2f} %",
                     f"{percent(row['footprint_ours'], row['footprint_theirs']):+.2f} %",
                     "yes" if row["judged"] else ""])
    judged = [row for row in found if row["judged"]]
    worst = max(judged, key=lambda row: abs(percent(row["ours"], row["theirs"])), default=None)
    note = (f"{len(judged)} of {len(found)} marks judged; target ±{TARGET_PERCENT:g} % "
            "bin_unused at every judged mark. " +
            (f"Worst judged difference: {percent(worst['ours'], worst['theirs']):+.2f} % "
             f"({worst['session']} {worst['label']}); "
             + ("within the target." if abs(percent(worst['ours'], worst['theirs']))
                <= TARGET_PERCENT else "OUTSIDE the target.") if worst else
             "no mark reaches 16 MiB live and 1 MiB unused."))
    return "lifo@firefox against Firefox's own allocator, every mark", headers, rows, note


def tables(results: dict) -> list:
    if not results.get("firefox_corpus"):
        return []
    return [corpus_table(results), groups_table(results), reference_table(results)]


def excess_over_bound(results: dict, group: str = "firefox") -> dict[str, float]:
    """Each container's bin_unused above the packing bound (headroom_bound, the fewest
    runs its live regions fit in), the mean over a session's marks, then over sessions,
    in bytes, under the group's run sizes."""
    role, suffix = GROUPS[group]
    per_container: dict[str, list[float]] = {}
    for session in (results.get("firefox_corpus") or {}).get("sessions", []):
        process = next((p for p in session["processes"] if p["role"] == role), None)
        if process is None or not process["marks"]:
            continue
        for row, _ in process["marks"][0]["figures"].items():
            if not row.endswith(suffix) or (not suffix and "@" in row) or row == REFERENCE_NAME:
                continue
            excess = [m["figures"][row]["bin_unused"] - m["figures"][row]["headroom_bound"]
                      for m in process["marks"]
                      if m["figures"][row].get("headroom_bound") is not None]
            if excess:
                per_container.setdefault(row.removesuffix(suffix), []).append(
                    sum(excess) / len(excess))
    return {name: sum(values) / len(values) for name, values in per_container.items()}


SHORT_ANSWER_WORDS = 120


def compact(judged: dict) -> str:
    """A judgement in the short answer's few words: '+0.99 % [-2.83, +4.80] ?' ('?': the
    interval straddles 0), 'identical', '+0.21 % (one session)', 'not measured'."""
    if judged["outcome"] in ("not measured", "identical"):
        return judged["outcome"]
    if judged["outcome"] == "exact for one trace":
        return f"{judged['percent']:+.2f} % (one session)"
    return (f"{judged['percent']:+.2f} % [{judged['low']:+.2f}, {judged['high']:+.2f}]"
            + (" ?" if judged["outcome"] == "not resolvable" else ""))


def short_answer(results: dict) -> str | None:
    """At most SHORT_ANSWER_WORDS words: which container today's Firefox should use, on
    the session mean of bin_unused and committed - dirty over the content logs @firefox,
    with intervals, the cost per call, and each one's excess over the bound against
    lifo's. None without the group."""
    judged = (((results.get("corpus") or {}).get("groups") or {}).get("firefox") or {}) \
        .get("judgement")
    if not judged:
        return None
    containers = judged["containers"]

    def text(name: str, moment: str, figure: str) -> str:
        return f"{name} {compact(containers[name]['memory'][moment][figure])}"
    # Containers that pick as the reference does are identical to it: not listed.
    order = sorted((name for name in containers
                    if containers[name]["memory"]["mean"]["bin_unused"]["outcome"]
                    != "identical"),
                   key=lambda name: containers[name]["memory"]["mean"]["bin_unused"]
                   ["percent"] or 0.0)
    lower = [name for name in order
             if containers[name]["memory"]["mean"]["bin_unused"]["outcome"] == "lower"]
    costs = sorted(((name, found["cost"]["instructions_per_call"])
                    for name, found in containers.items()
                    if found["cost"]["instructions_per_call"]["outcome"]
                    not in ("not measured", "identical")),
                   key=lambda item: item[1]["percent"])
    excess = excess_over_bound(results)
    base = excess.get(FIREFOX_MATCHING)
    sessions = len(judged["traces"])
    choice = (f"**Use {lower[0]}**: lowest resolved bin_unused" if lower else
              f"**No container is resolved below {judged['reference']}**: keep it")

    def words(listed: int) -> str:
        bound = "; ".join(f"{name} {value / MIB:.2f} MiB" + (
            f" ({100 * value / base:.0f} % of lifo's)" if base else "")
            for name, value in sorted(excess.items(), key=lambda item: item[1])[:listed])
        cost = ("Allocator instructions per call: " + "; ".join(
            f"{name} {compact(judged_cost)}" for name, judged_cost in
            [costs[0], costs[-1]][:min(len(costs), 2)]) + "." if costs else "")
        return " ".join(filter(None, [
            f"**In short**, for today's Firefox (its own run sizes), over {sessions} content-"
            f"process session{'s' * (sessions != 1)}, each container against "
            f"{judged['reference']}, session mean [95 % interval; ?: straddles 0]:",
            f"{choice}.",
            "bin_unused: " + "; ".join(text(name, "mean", "bin_unused")
                                       for name in order[:listed]) + ".",
            "Committed − dirty: " + "; ".join(text(name, "mean", "footprint")
                                              for name in order[:min(listed, 2)]) + ".",
            cost,
            f"Above the packing bound (mean bin_unused excess): {bound}." if bound else ""]))
    # As many containers in each list as the words allow (3 at most, 1 at least).
    for listed in (3, 2, 1):
        if len(words(listed).split()) <= SHORT_ANSWER_WORDS:
            break
    return words(listed)
