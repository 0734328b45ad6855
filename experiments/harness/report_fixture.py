"""The report tests' results documents (test_report.py): the checked-in fixture
(fixtures/results.json, a --quick run's results trimmed by shrink(), and
fixtures/report.md, its report), remade from a run by regenerate(); and synthetic runs
whose answer group has a given judgement (run_judged). Not a test module itself.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from . import derived, report, results
from .allocators import FIREFOX_MATCHING, REFERENCE

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE = FIXTURES / "results.json"
EXPECTED_MARKDOWN = FIXTURES / "report.md"
# What the fixture keeps of a run: live workloads with time and memory evidence for bug
# 1857133's figures (churn: sp3, steady_state: base), the live webkit workload and its
# exact replay; the containers of bug 1857133, two peers and one setting.
KEEP_WORKLOADS = ("churn", "steady_state", "webkit", "webkit replay")
KEEP_ALLOCATORS = (REFERENCE, "rb_root", FIREFOX_MATCHING, "array_heap", "glibc", "jemalloc",
                   f"{REFERENCE}@purge:decay")


def judged_as(outcome: str, percent: float, half: float = 1.0) -> dict:
    """One judgement (judgement.judge's keys the report reads) with this outcome."""
    return {"outcome": outcome, "percent": percent, "low": percent - half,
            "high": percent + half, "half_width": half, "sd": half, "n_traces": 8}


def run_judged(containers: dict[str, dict[tuple[str, str], dict]], traces: int = 8) -> dict:
    """A results.json whose answer group has this judgement: {container: {(moment or
    "cost", figure): judgement}} (every other figure not resolvable)."""
    judged = {}
    for container, figures in containers.items():
        memory = {moment: {figure: figures.get((moment, figure), judged_as("not resolvable", 0.1))
                           for figure in ("purged_resident", "footprint", "bin_unused",
                                          "resident", "committed", "dirty")}
                  for moment in ("loaded", "closed", "peak")}
        cost = {figure: figures.get(("cost", figure), judged_as("not resolvable", 0.1))
                for figure in ("instructions_per_call", "d1_misses_per_call",
                               "ll_misses_per_call")}
        judged[container] = {"memory": memory, "cost": cost}
    judgement = {"reference": REFERENCE, "traces": [f"t{i}" for i in range(traces)],
                 "containers": judged}
    return {"corpus": {"recordings": [], "cost": {}, "groups": {
        "webkit": {"entries": {}, "judgement": judgement},
        "browsers": {"entries": {}, "members": {"webkit": [f"t{i}" for i in range(traces - 1)],
                                                "firefox": ["content (7)"]},
                     "firefox": "128", "judgement": judgement}}}}


def shrink(run: dict) -> dict:
    """A run's results, kept to KEEP_WORKLOADS and KEEP_ALLOCATORS, with the verdict, the
    targets and the derived figures computed again by the harness's own modules."""
    from . import anchors, headroom, targets, verdict  # statistics: to remake the fixture only
    run = results.load(run) if isinstance(run, Path) else run
    # Before the corpus is trimmed: the mean over marks needs every mark.
    bounds = headroom.build(run.get("corpus"), run.get("firefox"))
    summary = {name: data for name, data in run["summary"].items() if name in KEEP_WORKLOADS}
    for data in summary.values():
        data["allocators"] = {name: pair for name, pair in data["allocators"].items()
                              if name in KEEP_ALLOCATORS}
        for pair in data["allocators"].values():
            if "runsel" in pair:  # the report reads runsel's stats at the key only
                pair["runsel"] = {name: stats for name, stats in pair["runsel"].items()
                                  if name == data["key_checkpoint"]}
            if pair.get("exact"):  # and an exact replay's figures at the key and the peak
                pair["exact"]["checkpoints"] = [point for point in pair["exact"]["checkpoints"]
                                                if point["name"] == data["key_checkpoint"]]
    corpus = trimmed_corpus(run.get("corpus"))
    run.update(summary=summary, workloads=list(summary), corpus=corpus,
               anchors=anchors.build(corpus, run.get("firefox")), headroom=bounds,
               allocators=[a for a in run["allocators"] if a["name"] in KEEP_ALLOCATORS],
               checks=[c for c in run["checks"] if c["workload"] in summary],
               discarded=[d for d in run["discarded"] if d["workload"] in summary],
               verdict=verdict.build(summary, corpus),
               targets=targets.judge_workloads(summary, run["reference"]))
    derived.derive(summary)
    for data in summary.values():  # the report reads the counters' totals only
        for pair in data["allocators"].values():
            if pair.get("counters") and "bins" in pair["counters"]:
                del pair["counters"]["bins"]
    return run


def trimmed_corpus(corpus: dict | None) -> dict | None:
    """The trace corpus with each replay's checkpoints kept to those the report reads (the
    moments judged, judgement.moments), the size classes only where the per-class table
    reads them (the first trace after the close), and the judgement computed again."""
    from . import judgement
    if not corpus:
        return corpus
    for group in corpus.get("groups", {}).values():
        entries = group.get("entries", {})
        for index, entry in enumerate(entries.values()):
            if "error" in entry:
                continue
            kept = set(judgement.moments(entry).values())
            for pair in entry["allocators"].values():
                pair["exact"]["checkpoints"] = [point for point in pair["exact"]["checkpoints"]
                                                if point["name"] in kept]
                for point in [pair["exact"]["peak"], *pair["exact"]["checkpoints"]]:
                    if index > 0 or point["name"] != judgement.moments(entry)["closed"]:
                        point.pop("bins", None)
        usable = {name: entry for name, entry in entries.items() if "error" not in entry}
        if entries:  # "browsers" holds no entries (it joins the others'): kept as the run judged it
            group.update(judgement.group_judgements(usable))
    cached = corpus.get("behind_cache") or {}
    for entry in (cached.get("entries") or {}).values():  # its table reads its judgements
        for pair in entry.get("allocators", {}).values():
            for point in [pair["exact"]["peak"], *pair["exact"]["checkpoints"]]:
                point.pop("bins", None)
    return corpus


def regenerate(source: Path) -> None:
    FIXTURES.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(shrink(source), indent=1) + "\n")
    with tempfile.TemporaryDirectory(prefix="runsel-report-fixture-") as scratch:
        markdown, _ = report.write_report(results.load(FIXTURE), Path(scratch))
        EXPECTED_MARKDOWN.write_text(markdown.read_text())
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size:,d} bytes) and {EXPECTED_MARKDOWN}")
