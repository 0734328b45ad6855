"""meson test --suite harness (harness_report): the report rendered from a small
checked-in results.json (fixtures/results.json, a trimmed --quick run with its trace
corpus) in seconds.

The tables hold the fixture's figures (each cell checked against the number it
formats), the short answer and its picture open the report (the first screen, at most 120
words) before the long answer and the tables, rendering twice gives the same bytes, and the
rendered report.md is fixtures/report.md byte for byte: a change of layout or wording
shows as a diff of that file, reviewed with the change.

    python3 -m harness.test_report  (in experiments/)
    python3 -m harness.test_report --regenerate RESULTS_JSON   remakes both fixtures
        from a run's results.json (after a change of results.json's layout or of the
        report's text)
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import unittest
from pathlib import Path

from . import (
    anchors,
    corpus_report,
    report,
    report_anchors,
    report_cells,
    report_check_price,
    report_firefox_corpus,
    report_fixture,
    report_headroom,
    report_tables,
    results,
    verdict_text,
)
from .allocators import AS_BUILT, FIREFOX_MATCHING, REFERENCE


class RenderedFromTheFixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = results.load(report_fixture.FIXTURE)
        cls.tables = {title: (headers, rows, note)
                      for title, headers, rows, note in report_tables.tables(cls.results)}
        cls.scratch = tempfile.TemporaryDirectory(prefix="runsel-report-test-")
        cls.out = Path(cls.scratch.name)
        cls.markdown, cls.html = report.write_report(cls.results, cls.out)

    @classmethod
    def tearDownClass(cls):
        cls.scratch.cleanup()

    def test_bug_1857133_is_judged_against_the_tree_as_built(self):
        """moz_tree, the bug's baseline, is the reference where the corpus replayed it (the
        fixture's does), rb_first where it did not; each claim's figures are moz_tree's
        judgement of that container."""
        from . import judgement, verdict
        corpus = self.results["corpus"]
        answered = judgement.answer_group(corpus)  # the WebKit traces, with Firefox's joined
        group = corpus["groups"][answered]
        claims = verdict.corpus_published(corpus)
        self.assertTrue(claims)
        for claim in claims:
            self.assertEqual(claim["reference"], "moz_tree")
            judged = group["judgement_as_built"]["containers"][claim["container"]]
            evidence = claim["figures"][0]["evidence"][0]
            expected = (judged["cost"] if evidence["moment"] == "cost"
                        else judged["memory"][evidence["moment"]])[evidence["figure"]]
            self.assertEqual(evidence["comparison"], expected)
        without = {**corpus, "groups": {answered: {**group, "judgement_as_built": None}}}
        self.assertEqual({c["reference"] for c in verdict.corpus_published(without)},
                         {"rb_first"})
        self.assertIn("Bug 1857133 judged on the corpus, against moz_tree", self.tables)

    def rows_of(self, title: str) -> list[dict]:
        headers, rows, _ = self.tables[title]
        return [dict(zip(headers, row)) for row in rows]

    def test_the_verdict_table_holds_every_row_and_its_sentence(self):
        rows = self.rows_of("Verdict")
        verdict = self.results["verdict"]
        self.assertEqual(len(rows), len(verdict["rows"]))
        target = verdict["rules"]["time_target_percent"]
        for cells, row in zip(rows, verdict["rows"]):
            self.assertEqual((cells["workload"], cells["container"]),
                             (row["label"], row["container"]))
            self.assertEqual(cells["verdict"], verdict_text.row_line(row, target))
            if row["kind"] == "live" and row["time"] and row["time"].get("low") is not None \
                    and not row["time"].get("constant"):
                self.assertEqual(cells["detects"], f"±{row['time']['half_width']:.1f} %")
                self.assertIn(f"{row['time']['percent']:+.1f} %",
                              cells["time vs rb_first (95 % CI)"])
        resolution = verdict["time_resolution"]
        self.assertIn(f"{resolution['resolving']} of {resolution['with_interval']} time "
                      "comparisons resolve", self.tables["Verdict"][2])

    def test_the_summary_table_quotes_each_pair(self):
        rows = self.rows_of("Summary")
        live = {name: data for name, data in self.results["summary"].items()
                if data["kind"] == "live"}
        self.assertEqual(len(rows), sum(len(data["allocators"]) for data in live.values()))
        expected = [(name, allocator, pair) for name, data in live.items()
                    for allocator, pair in data["allocators"].items()]
        for cells, (name, allocator, pair) in zip(rows, expected):
            self.assertTrue(cells["workload"].startswith(name))
            self.assertEqual(cells["allocator"], allocator)
            self.assertEqual(cells["median ms"], f"{pair['median_seconds'] * 1e3:.1f}")
            self.assertEqual(cells["peak MiB"], report_cells.mib(pair["peak_resident"]))

    def test_the_choices_table_quotes_the_stored_totals(self):
        rows = self.rows_of("What the containers had to choose between")
        self.assertTrue(rows)
        for cells in rows:
            pair = self.results["summary"][cells["workload"]]["allocators"][cells["container"]]
            total = pair["counters"]["total"]
            self.assertEqual(cells["picks"], f"{total['picks']:,d}")
            self.assertEqual(cells["non-full runs at a pick (median bucket)"],
                             report_tables.BUCKET_NAMES[total["median_nonfull_bucket"]])
            self.assertEqual(cells["picked run's fullness (mean)"],
                             f"{total['mean_picked_fullness_percent']:.0f} %")

    def test_the_exact_replays_table_quotes_the_stored_differences(self):
        rows = self.rows_of("Exact replays")
        entry = self.results["summary"]["webkit replay"]
        self.assertEqual(len(rows), sum(len(pair["exact_vs_reference"])
                                        for pair in entry["allocators"].values()))
        for cells in rows:
            compared = entry["allocators"][cells["container"]]["exact_vs_reference"]
            resident = compared[cells["checkpoint"]]["resident"]
            self.assertEqual(cells["resident vs rb_first"], report_cells.bytes_cell(resident))

    def test_the_report_opens_with_the_answer_then_the_verdict_and_its_sentences(self):
        markdown = self.markdown.read_text()
        sections = [line for line in markdown.splitlines() if line.startswith("## ")]
        # The answer over the fixture's trace corpus, its tables (the anchors' two right
        # after the corpus table), then the verdict.
        anchors_title = report_anchors.idealized_table(self.results)[0]
        firefox = [f"## {table[0]}" for table in report_firefox_corpus.tables(self.results)]
        self.assertEqual(firefox, ["## The Firefox corpus", "## " + report_firefox_corpus
                                   .groups_table(self.results)[0], "## " +
                                   report_firefox_corpus.reference_table(self.results)[0]])
        self.assertEqual(sections[:7], ["## Answer", "## Over the trace corpus", *firefox,
                                        f"## {anchors_title}",
                                        f"## {report_anchors.cost_table(self.results)[0]}"])
        self.assertLess(sections.index(f"## {anchors_title}"), sections.index("## Verdict"))
        self.assertIn(corpus_report.answer_paragraph(self.results), markdown)
        verdict = self.results["verdict"]
        self.assertIn(verdict_text.agreement_paragraph(verdict["published"]), markdown)
        self.assertIn(verdict_text.question_answer(verdict["question"]), markdown)
        self.assertIn("<h2>Verdict</h2>", self.html.read_text())

    def test_the_first_screen_is_the_short_answer_then_the_picture(self):
        """Under "## Answer": the short answer (at most 120 words, written from the
        corpus's judgement), then the picture, then the long paragraph; alike in HTML."""
        lines = self.markdown.read_text().splitlines()
        start = lines.index("## Answer") + 1
        shown = [line for line in lines[start:] if line.strip()]
        short, picture, heading, full = shown[:4]
        self.assertEqual(short, corpus_report.short_answer(self.results))
        self.assertLessEqual(len(short.replace("**", "").split()),
                             corpus_report.SHORT_ANSWER_WORDS)
        self.assertEqual(picture, "![The answer over the trace corpus](answer.png)")
        self.assertEqual((heading, full), (f"### {report.FULL_ANSWER}",
                                           corpus_report.answer_paragraph(self.results)))
        page = self.html.read_text()
        opening = page[page.index("<h2>Answer</h2>") + len("<h2>Answer</h2>"):].lstrip()
        self.assertTrue(opening.startswith(report.html_paragraph(short) + "\n<img alt='The answer "
                                           "over the trace corpus' src='data:image/png;base64,"),
                        opening[:300])
        self.assertLess(opening.index("<img"), opening.index(f"<h3>{report.FULL_ANSWER}</h3>"))
        # The fixture's figures, formatted: on memory and on cost, the container the
        # answer group's judgement resolves lowest below rb_first (or none), and the
        # containers not resolved on memory named.
        from . import judgement
        corpus = self.results["corpus"]
        if judgement.answer_group(corpus) == "firefox":  # the Firefox sessions' own answer
            self.assertEqual(short, report_firefox_corpus.short_answer(self.results))
            self.assertLessEqual(len(short.split()), 120)
            self.assertIn("for today's Firefox (its own run sizes)", short)
            return
        judged = corpus["groups"][judgement.answer_group(corpus)]["judgement"]["containers"]
        for what, pick in (("(resident after a forced purge after the tabs close)",
                            lambda figures: figures["memory"]["closed"]["purged_resident"]),
                           ("(allocator instructions per call)",
                            lambda figures: figures["cost"]["instructions_per_call"])):
            lower = sorted((pick(figures)["percent"], name) for name, figures in judged.items()
                           if pick(figures)["outcome"] == "lower")
            if lower:
                best = pick(judged[lower[0][1]])
                self.assertIn(f"{what}: the data favours {lower[0][1]} {best['percent']:+.2f} % "
                              f"[{best['low']:+.2f}, {best['high']:+.2f}]", short)
            else:  # the reference over those above it, or none (ShortAnswer tests both)
                self.assertRegex(short, re.escape(what) + ": the data favours (rb_first over|none)")
        memory = {name: figures["memory"]["closed"]["purged_resident"]
                  for name, figures in judged.items()}
        unresolved = sorted((name for name in memory if memory[name]["outcome"]
                             == "not resolvable"), key=lambda name: memory[name]["percent"])
        if unresolved:
            self.assertIn(f"memory for {corpus_report.named(unresolved)};", short)
        else:
            self.assertNotIn("memory for", short)

    def test_the_idealized_tree_table_shows_every_trace_and_the_interval(self):
        stored = self.results["anchors"]
        rows = self.rows_of(report_anchors.idealized_table(self.results)[0])
        groups = stored["memory"]["groups"]
        self.assertEqual(len(rows), sum(len(group["traces"]) + 1 for group in groups))
        webkit = self.results["corpus"]["groups"]["webkit"]
        judged = webkit["judgement"]["containers"][AS_BUILT]["memory"]
        group = next(group for group in groups if group["group"] == "webkit")
        self.assertEqual([t["trace"] for t in group["traces"]], list(webkit["entries"]))
        for column, (moment, figure) in enumerate(stored["memory"]["columns"]):
            header = f"{corpus_report.FIGURE_WORDS[figure]}, {moment}"
            for trace, cells in zip(group["traces"], rows):
                # The exact difference, from the two replays' own figures.
                entry = webkit["entries"][trace["trace"]]
                name = judgement_moments(entry)[moment]
                mine, base = (point_named(entry, AS_BUILT, name),
                              point_named(entry, REFERENCE, name))
                expected = (100 * (figure_of(mine, figure) - figure_of(base, figure))
                            / figure_of(base, figure))
                self.assertAlmostEqual(trace["differences"][column], expected)
                self.assertEqual(cells[header], f"{expected:+.3f} %")
            mean = rows[len(group["traces"])]
            self.assertEqual(mean["trace"], f"mean over {len(group['traces'])} traces")
            self.assertAlmostEqual(group["judged"][column]["mean"],
                                   judged[moment][figure]["percent"])
            self.assertTrue(mean[header].startswith(f"{judged[moment][figure]['percent']:+.3f} %"))

    def test_the_instructions_table_gives_both_anchors_and_their_difference(self):
        stored = self.results["anchors"]["cost"]["groups"]
        rows = self.rows_of(report_anchors.cost_table(self.results)[0])
        self.assertEqual(len(rows), sum(len(group["traces"]) + 1 for group in stored))
        entries = self.results["corpus"]["groups"]["webkit"]["entries"]
        for trace, cells in zip(stored[0]["traces"], rows):
            pairs = entries[trace["trace"]]["allocators"]
            shipped, today = (pairs[name]["cost"]["allocator_instructions"]
                              / pairs[name]["cost"]["calls"]
                              for name in (AS_BUILT, FIREFOX_MATCHING))
            self.assertAlmostEqual(trace["difference"], shipped - today)
            self.assertEqual(cells[AS_BUILT], f"{shipped:.1f}")
            self.assertEqual(cells[FIREFOX_MATCHING], f"{today:.1f}")
            self.assertEqual(cells[f"{AS_BUILT} − {FIREFOX_MATCHING}"],
                             f"{shipped - today:+.1f}")
        judged = stored[0]["judged"]["difference"]
        self.assertEqual(judged["n"], len(stored[0]["traces"]))
        self.assertAlmostEqual(judged["mean"], sum(t["difference"] for t in stored[0]["traces"])
                               / len(stored[0]["traces"]))

    def costed_webkit_pairs(self, build: str) -> dict[str, dict[str, float]]:
        """{trace: {container: allocator instructions per call}} of one build's cost
        blocks ("cost": as shipped, "cost_hardened") on the fixture's WebKit traces."""
        found = {}
        for trace, entry in self.results["corpus"]["groups"]["webkit"]["entries"].items():
            for name, pair in entry["allocators"].items():
                block = pair.get(build)
                if block and not block.get("error") and block.get("calls"):
                    found.setdefault(trace, {})[name] = (block["allocator_instructions"]
                                                         / block["calls"])
        return found

    def test_the_verdict_costs_are_as_shipped_and_the_hardened_ones_are_beside(self):
        """The corpus judgement (the verdict's and bug 1857133's sp3 figure) and the
        anchors' difference come from the as-shipped cost blocks; the hardened ones, a
        different build (they differ), are shown beside in the anchors' table."""
        shipped, hardened = (self.costed_webkit_pairs(build)
                             for build in ("cost", "cost_hardened"))
        self.assertTrue(hardened, "the fixture has no hardened cost: --regenerate")
        self.assertTrue(any(hardened[trace][name] != shipped[trace][name]
                            for trace in hardened for name in hardened[trace]))
        judged = self.results["corpus"]["groups"]["webkit"]["judgement"]
        reference = judged["reference"]
        for name, mine in judged["containers"].items():
            per_trace = mine["cost"]["instructions_per_call"]["per_trace"]
            for trace, value in per_trace.items():
                if value is None:
                    continue
                expected = 100 * (shipped[trace][name] - shipped[trace][reference]) \
                    / shipped[trace][reference]
                self.assertAlmostEqual(value, expected, msg=f"{name} on {trace}")
        stored = self.results["anchors"]["cost"]["groups"][0]
        rows = self.rows_of(report_anchors.cost_table(self.results)[0])
        column = f"{AS_BUILT} − {FIREFOX_MATCHING}, hardened"
        for trace, cells in zip(stored["traces"], rows):
            mine = shipped[trace["trace"]]
            self.assertAlmostEqual(trace["difference"],
                                   mine[AS_BUILT] - mine[FIREFOX_MATCHING])
            if trace["trace"] in hardened:
                theirs = hardened[trace["trace"]]
                difference = theirs[AS_BUILT] - theirs[FIREFOX_MATCHING]
                self.assertAlmostEqual(trace["difference_hardened"], difference)
                self.assertEqual(cells[column], f"{difference:+.1f}")
            else:
                self.assertEqual(cells[column], "-")

    def test_the_check_price_table_quotes_the_stored_figures(self):
        shipped, hardened = (self.costed_webkit_pairs(build)
                             for build in ("cost", "cost_hardened"))
        title = report_check_price.table(self.results)[0]
        rows = [cells for cells in self.rows_of(title) if cells["traces"] == "WebKit corpus"]
        containers = sorted({name for trace in hardened for name in hardened[trace]})
        self.assertEqual(sorted(cells["container"] for cells in rows), containers)
        for cells in rows:
            name = cells["container"]
            traces = [trace for trace in hardened if name in hardened[trace]]
            mean = {key: sum(figures[trace][name] for trace in traces) / len(traces)
                    for key, figures in (("hardened", hardened), ("shipped", shipped))}
            self.assertEqual(cells["counted on"],
                             f"{len(traces)} trace" + ("s" if len(traces) != 1 else ""))
            self.assertTrue(cells["hardened"].startswith(f"{mean['hardened']:.2f}"), cells)
            self.assertTrue(cells["as shipped"].startswith(f"{mean['shipped']:.2f}"), cells)
            self.assertTrue(cells["the checks' price"].startswith(
                f"{mean['hardened'] - mean['shipped']:+.2f}"), cells)

    def test_the_headroom_tables_quote_the_stored_figures(self):
        stored = self.results["headroom"]
        self.assertTrue(stored["groups"])
        for group in stored["groups"]:
            title = report_headroom.headroom_table(group, stored["scale"])[0]
            rows = {cells["container"]: cells for cells in self.rows_of(title)}
            closed = group["moments"]["closed"]
            self.assertEqual(rows["packing bound"]["closed: above the bound"],
                             report_headroom.kib_cell(closed["bound"]))
            for container in group["containers"]:
                self.assertEqual(rows[container]["closed: above the bound"],
                                 report_headroom.kib_cell(closed["excess"][container]))

    def test_rendering_is_repeatable_and_matches_the_expected_report(self):
        with tempfile.TemporaryDirectory(prefix="runsel-report-again-") as again:
            markdown, html = report.write_report(results.load(report_fixture.FIXTURE), Path(again))
            self.assertEqual(markdown.read_bytes(), self.markdown.read_bytes())
            self.assertEqual(html.read_bytes(), self.html.read_bytes())
        self.assertEqual(self.markdown.read_text(), report_fixture.EXPECTED_MARKDOWN.read_text(),
                         "report.md differs from fixtures/report.md (a layout or wording "
                         "change: --regenerate, and review the diff)")


def judgement_moments(entry: dict) -> dict:
    from . import judgement
    return judgement.moments(entry)


def point_named(entry: dict, container: str, name: str) -> dict:
    return next(point for point in entry["allocators"][container]["exact"]["checkpoints"]
                if point["name"] == name)


def figure_of(point: dict, figure: str) -> int:
    """A replay checkpoint's figure; footprint is committed less dirty."""
    return point["committed"] - point["dirty"] if figure == "footprint" else point[figure]


class AnchorsOfFirefoxLogs(unittest.TestCase):
    """The Firefox logs' rows of the anchor table: a process's last tab mark and
    tabs_closed, moz_tree against rb_first; a figure the replay lacks stays a dash."""

    def test_each_process_is_a_trace_of_its_own_group(self):
        def figures(committed, dirty, unused):
            return {"committed": committed, "dirty": dirty, "bin_unused": unused,
                    "purged_resident": None}
        marks = [{"label": "tab_1_loaded", "figures": {"rb_first": figures(1000, 100, 50),
                                                        "moz_tree": figures(1100, 100, 60)}},
                 {"label": "tabs_closed", "figures": {"rb_first": figures(800, 0, 40),
                                                       "moz_tree": figures(820, 20, 30)}}]
        firefox = {"processes": [{"role": "content", "pid": 7, "marks": marks}]}
        built = anchors.build(None, firefox)
        group = built["memory"]["groups"][0]
        self.assertEqual((group["group"], group["traces"][0]["trace"]),
                         ("firefox_workload", "content (7)"))
        columns = [tuple(column) for column in built["memory"]["columns"]]
        differences = dict(zip(columns, group["traces"][0]["differences"]))
        self.assertIsNone(differences["loaded", "purged_resident"])
        self.assertAlmostEqual(differences["closed", "footprint"], 0.0)
        self.assertAlmostEqual(differences["closed", "bin_unused"], -25.0)
        self.assertEqual(built["cost"]["groups"], [])
        rows = report_anchors.idealized_table({"anchors": built})[2]
        self.assertEqual(rows[0][2:], ["-", "-", "+0.000 %", "-25.000 %"])
        self.assertEqual(rows[1][1], "mean over 1 trace")


class AnswerOverACorpus(unittest.TestCase):
    """The opening answer, its tables and its picture from a small synthetic corpus (the
    judgement's own test corpus: lifo 3 % above rb_first on every trace, "noisy" not)."""

    def test_the_answer_names_the_resolved_and_the_unresolved(self):
        from . import judgement, test_judgement, verdict
        entries = test_judgement.corpus(5, 8, 1.03, 0.004, 0.0)
        entries = {name: {**entry, "label": name} for name, entry in entries.items()}
        corpus = {"recordings": [{"name": f"pages-1-4.r{i + 1}", "pages": [1, 4],
                                  "reused": True} for i in range(8)],
                  "cost": {"traces": 8, "windows": 20, "window_records": 25000},
                  "groups": {"webkit": {"entries": entries, "judgement":
                                        judgement.judge_corpus(entries, "rb_first")}}}
        run = {**results.load(report_fixture.FIXTURE), "corpus": corpus}
        run["verdict"]["published_on_corpus"] = verdict.corpus_published(corpus)
        paragraph = corpus_report.answer_paragraph(run)
        self.assertIn("Over 8 WebKit traces (corpus pages 1-4 ×8; 8 reused", paragraph)
        self.assertIn("no container is resolved below rb_first", paragraph)
        self.assertRegex(paragraph, r"higher: planted \+3\.\d\d % \[\+2\.\d\d, \+3\.\d\d\]")
        self.assertRegex(paragraph, r"not resolvable: noisy \([+-]0\.\d\d ± 0\.\d\d\)")
        title, headers, rows, note = corpus_report.answer_table(run)
        self.assertEqual([row[0] for row in rows], ["noisy", "planted"])  # judge_corpus sorts
        self.assertTrue(rows[0][1].endswith("?"), rows[0])
        self.assertFalse(rows[1][1].endswith("?"), rows[1])
        self.assertEqual(len(headers), 1 + len(corpus_report.ANSWER_COLUMNS))
        self.assertEqual(corpus_report.per_class_table(run)[2], [])  # no bins: no table
        with tempfile.TemporaryDirectory(prefix="runsel-answer-") as scratch:
            from . import pictures
            drawn = pictures.corpus_answer(run, Path(scratch) / "answer.png")
            self.assertTrue(drawn.exists() and drawn.stat().st_size > 1000)


class ShortAnswer(unittest.TestCase):
    """The first screen's answer, written from the judgement: the favoured container on
    memory and on cost with its interval, what was not resolved, in at most 120 words."""

    MEMORY, COST = ("closed", "purged_resident"), ("cost", "instructions_per_call")

    def test_the_lowest_resolved_container_is_favoured(self):
        run = report_fixture.run_judged({
            "age_address": {self.MEMORY: report_fixture.judged_as("lower", -0.72, 0.24),
                            self.COST: report_fixture.judged_as("higher", 4.0, 1.0)},
            "je_slabs": {self.MEMORY: report_fixture.judged_as("lower", -0.30, 0.2),
                         self.COST: report_fixture.judged_as("lower", -2.5, 1.0)},
            "lifo": {self.COST: report_fixture.judged_as("lower", -9.0, 3.0)}})
        short = corpus_report.short_answer(run)
        self.assertIn("over 7 WebKit traces and 1 Firefox log, each container", short)
        self.assertIn("the data favours age_address -0.72 % [-0.96, -0.48] (1 more also below "
                      "rb_first)", short)
        self.assertIn("**Cost** (allocator instructions per call): the data favours lifo "
                      "-9.00 % [-12.00, -6.00] (1 more also below rb_first)", short)
        self.assertIn("**Not resolved** (the interval straddles 0): memory for lifo; plain "
                      "resident", short)

    def test_the_reference_is_favoured_over_the_containers_above_it(self):
        run = report_fixture.run_judged({
            "moz_tree": {self.COST: report_fixture.judged_as("higher", 21.57, 7.45),
                         self.MEMORY: report_fixture.judged_as("higher", 0.5, 0.1)},
            "wavl": {self.COST: report_fixture.judged_as("higher", 30.0, 5.0)}})
        short = corpus_report.short_answer(run)
        self.assertIn("the data favours rb_first over moz_tree +0.50 % [+0.40, +0.60], and no "
                      "container over rb_first", short)
        self.assertIn("the data favours rb_first over 2 containers, the nearest moz_tree "
                      "+21.57 % [+14.12, +29.02]", short)
        self.assertIn("**Not resolved** (the interval straddles 0): memory for wavl; plain "
                      "resident", short)

    def test_every_container_unresolved_stays_within_the_first_screen(self):
        """Twelve containers, nothing resolved: the lists name four and count the rest."""
        names = ["rb_root", "lifo", "array_heap", "pairing_heap", "fullest_first",
                 "sorted_by_free", "age_address", "pairing_heap_lazy", "wavl", "moz_tree",
                 "je_slabs"]
        short = corpus_report.short_answer(report_fixture.run_judged({name: {} for name in names}))
        self.assertLessEqual(len(short.replace("**", "").split()),
                             corpus_report.SHORT_ANSWER_WORDS, short)
        self.assertIn("the data favours none: no container is resolved above or below rb_first",
                      short)
        self.assertIn("and 8 more;", short)
        self.assertIn("for 11 of 11.", short)

    def test_without_a_corpus_the_short_answer_says_why_within_the_bound(self):
        run = {"corpus": {"error": "recording failed: " + "word " * 300, "groups": {}}}
        short = corpus_report.short_answer(run)
        self.assertTrue(short.startswith("No answer over a trace corpus: recording failed:"))
        self.assertLessEqual(len(short.split()), corpus_report.SHORT_ANSWER_WORDS)
        self.assertEqual(report.opening({"corpus": None})[1], None)  # said once, not twice


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regenerate", type=Path, metavar="RESULTS_JSON")
    options, rest = parser.parse_known_args()
    if options.regenerate:
        report_fixture.regenerate(options.regenerate)
        sys.exit(0)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=1)
