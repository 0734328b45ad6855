"""The corpus of Firefox sessions without a browser: a fake Session writes tiny logalloc
logs where firefox_record's would be, so that the real caching, checks and leaving-out
run; fake replays stand in for the replayers when a log joins the Firefox group.

    python3 -m harness.test_firefox_corpus   (in experiments/)
"""

from __future__ import annotations

import gzip
import json
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from . import (
    anchors,
    firefox_corpus,
    firefox_groups,
    firefox_logs,
    firefox_record,
    firefox_replay,
    firefox_workload,
    replays,
    report_firefox_corpus,
)
from .marionette import MarionetteError

PARENT, CONTENT = 100, 200
MIB = 2 ** 20
# The fake replays' rows, each with figures of its own whichever rows a replay has.
ROWS = ["rb_first", "lifo", "rb_first@firefox", "lifo@firefox", "moz_tree", "moz_tree@firefox",
        "firefox"]
PAGES = [{"path": f"/page{n}.html", "title": f"page {n}", "sha256": [str(n)]} for n in (1, 2)]


def write_log(logs: Path, pid: int, labels: list[str], reuse: bool = False,
              for_browser: bool = True) -> None:
    """A log of 4 calls per mark and its marks file, with the allocator's figures."""
    lines, marks, calls = [], [], 0
    for number, label in enumerate(labels, 1):
        address = 0x1000 * number
        lines += [f"{pid} {pid} malloc(16)=0x{address:x}",
                  f"{pid} {pid} malloc(32)=0x{address if reuse else address + 0x800:x}",
                  f"{pid} {pid} free(0x{address:x})", f"{pid} {pid} calloc(1,8)=0x{address:x}",
                  f"{pid} {pid} jemalloc_stats()"]
        calls += 4
        marks.append({"mark": number, "line": len(lines), "calls": calls, "label": label,
                      "cmdline": "firefox-esr -contentproc -isForBrowser" if for_browser else "",
                      "stats": {"num_operations": calls, "committed": 1 << 20}})
    with gzip.open(logs / f"{pid}.log.gz", "wt") as log:
        log.write("\n".join(lines) + "\n")
    (logs / f"{pid}.marks.jsonl").write_text("".join(json.dumps(m) + "\n" for m in marks))


class FakeSession:
    """firefox_record.Session's stand-in: 'records' a parent and a content log."""
    started = 0
    fail, reuse = False, False

    def __init__(self, recorder, logs, marks_path, pages, page_timeout, scratch):
        type(self).started += 1
        self.logs, self.pages = Path(logs), pages
        self.process = mock.Mock(pid=PARENT)
        self.loaded = [{"url": page["path"]} for page in pages]
        (Path(scratch) / "firefox.stderr").write_text("")

    def run(self):
        if type(self).fail:
            raise MarionetteError("the browser went away")
        labels = [f"tab_{i + 1}_loaded" for i in range(len(self.pages))] + ["tabs_closed"]
        write_log(self.logs, PARENT, labels, for_browser=False)
        write_log(self.logs, CONTENT, labels, reuse=type(self).reuse)

    def quit(self):
        pass


class CorpusTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        root = Path(self.scratch.name)
        self.build, self.out = root / "build", root / "corpus"
        (self.build / firefox_record.RECORDER).parent.mkdir(parents=True)
        (self.build / firefox_record.RECORDER).write_bytes(b"recorder")
        self.sessions = root / "sessions.json"
        self.sessions.write_text(json.dumps({"sets": {
            "one": [{"id": "p1", "pages": [1], "repeat": 0}],
            "two": [{"set": "one"}, {"id": "p2", "pages": [2], "repeat": 0}],
            "none": []}}))
        FakeSession.started, FakeSession.fail, FakeSession.reuse = 0, False, False
        for patch in (mock.patch.object(firefox_record, "Session", FakeSession),
                      mock.patch.object(firefox_record, "firefox_version", lambda: "test-1"),
                      mock.patch.object(firefox_corpus.webkit_corpus, "corpus_pages",
                                        lambda path, first, pages: PAGES),
                      mock.patch.object(firefox_record.time, "sleep", lambda s: None)):
            patch.start()
            self.addCleanup(patch.stop)
        self.addCleanup(self.scratch.cleanup)

    def build_corpus(self, name: str, files=()) -> dict:
        return firefox_corpus.build(self.build, name, list(files), self.out,
                                    progress=lambda text: None, sessions_file=self.sessions)

    def test_a_one_page_session_is_recorded_then_reused_from_the_cache(self):
        first = self.build_corpus("one")
        self.assertEqual(([s["name"] for s in first["sessions"]], first["recorded"]),
                         (["p1-r0"], 1))
        run = first["sessions"][0]["run"]
        self.assertEqual(sorted(p["role"] for p in run["processes"]), ["content", "parent"])
        self.assertTrue(all(p["log"].endswith(".log.gz") for p in run["processes"]))
        again = self.build_corpus("two")  # p1 from the cache, p2 recorded
        self.assertEqual((again["reused"], again["recorded"], FakeSession.started), (1, 1, 2))
        self.assertEqual([s["name"] for s in again["sessions"]], ["p1-r0", "p2-r0"])

    def test_a_failed_browser_is_reported_and_left_out(self):
        FakeSession.fail = True
        document = self.build_corpus("one")
        self.assertEqual(document["sessions"], [])
        self.assertEqual(document["left_out"][0]["name"], "p1-r0")
        self.assertIn("the browser went away", document["left_out"][0]["reason"])

    def test_a_session_that_fails_its_checks_is_left_out_and_recorded_again(self):
        FakeSession.reuse = True  # an address handed out twice while live
        document = self.build_corpus("one")
        self.assertEqual(document["sessions"], [])
        self.assertIn("checks", document["left_out"][0]["reason"])
        FakeSession.reuse = False  # a failed recording is never reused from the cache
        self.assertEqual([s["name"] for s in self.build_corpus("one")["sessions"]], ["p1-r0"])
        self.assertEqual(FakeSession.started, 2)

    def test_an_unknown_set_is_refused(self):
        with self.assertRaises(firefox_corpus.CorpusError):
            self.build_corpus("missing")

    def fake_process(self, build_dir, session, process, containers, conf, timeout, progress,
                     at_firefox=("lifo",), classic=True):
        marks = firefox_logs.read_marks(session / process["marks_file"])
        self.replayed.append((session.name, process["role"], classic))
        names = list(containers) * classic + [f"{name}@firefox" for name in at_firefox]
        geometry = {name: [4096 if name in containers or self.same else 16384]
                    for name in names}
        # A repeat's log is shorter than the first recording's (costed_sessions picks it).
        records = 50 if "-r1-" in session.name else 100
        return {"role": process["role"], "trace": str(session / f"{process['role']}.trace"),
                "records": records, "geometry": geometry,
                "replay_tally": {name: {} for name in names},
                "profiles": {name: "as_built" for name in names}, "marks": [
                    {"label": mark["label"], "ops": 4 * mark["mark"], "figures": {
                        name: {"committed": 100 + ROWS.index(name), "dirty": 0,
                               "bin_unused": 10 + ROWS.index(name)}
                        for name in names}} for mark in marks]}

    def replay(self, corpus: dict, windows: replays.CostWindows | None = None,
               containers: tuple[str, ...] = ("rb_first", "lifo"),
               classic_parents: tuple[str, ...] = ()) -> dict:
        self.replayed = []
        with mock.patch.object(firefox_workload, "process_entry", self.fake_process), \
                mock.patch.object(firefox_replay, "geometry", lambda build: []), \
                mock.patch.object(firefox_replay, "run_pages_setting", lambda layout: "x"), \
                mock.patch.object(replays, "replayers", lambda build: {
                    name: Path(name) for name in containers}), \
                mock.patch.object(replays, "corpus_costs", self.fake_costs):
            return firefox_groups.replay_corpus(self.build, corpus, None, progress=lambda t: 0,
                                                windows=windows,
                                                classic_parents=classic_parents)

    def test_the_firefox_workload_takes_the_corpus_replays_of_its_session_as_its_own(self):
        self.same = False
        corpus = self.build_corpus("two")
        recorded = {**corpus["sessions"][0]["run"], "step_seconds": 0.0}
        entry = self.replay(corpus, classic_parents=(recorded["directory"],))
        # the workload's session's parent replayed classic too, the other session's not
        self.assertEqual(sorted(self.replayed), sorted([
            (Path(recorded["directory"]).name, "parent", True),
            (Path(recorded["directory"]).name, "content", True),
            (Path(corpus["sessions"][1]["run"]["directory"]).name, "parent", False),
            (Path(corpus["sessions"][1]["run"]["directory"]).name, "content", True)]))
        replayed = firefox_workload.corpus_replays(entry, recorded)
        self.assertIsNotNone(replayed)

        def summary(replayed):
            with mock.patch.object(firefox_workload, "process_entry", self.fake_process), \
                    mock.patch.object(firefox_replay, "geometry", lambda build: []), \
                    mock.patch.object(firefox_replay, "run_pages_setting", lambda layout: "x"), \
                    mock.patch.object(replays, "replayers", lambda build: {
                        "rb_first": Path("a"), "lifo": Path("b")}):
                return firefox_workload.firefox_summary(
                    self.build, self.out, 1, None, progress=lambda t: 0, recorded=recorded,
                    replayed=replayed)
        taken, own = summary(replayed), summary(None)
        self.assertNotIn("error", own)
        self.assertEqual(taken["processes"], own["processes"])
        self.assertEqual(sorted(taken["processes"][0]["marks"][0]["figures"]),
                         ["lifo", "lifo@firefox", "rb_first"])

    def fake_costs(self, traces, build_dir, twin, jobs, windows, timeout, progress, kind,
                   conf=None):
        """callgrind's stand-in: lifo costs 10 % more than rb_first on every log."""
        self.costed = (sorted(Path(path).parent.name for path in traces.values()), conf)
        return {job: {"calls": 100, "allocator_instructions": 11_000 if job[1] == "lifo"
                      else 10_000, "share": 0.5} for job in jobs}

    def test_the_shortest_content_log_of_each_page_set_is_costed_under_firefox_run_sizes(self):
        self.same = False
        self.sessions.write_text(json.dumps({"sets": {"three": [
            {"id": "p1", "pages": [1], "repeat": 0}, {"id": "p1", "pages": [1], "repeat": 1},
            {"id": "p2", "pages": [2], "repeat": 0}]}}))
        entry = self.replay(self.build_corpus("three"), replays.CostWindows(3, 4, 500),
                            ("rb_first", "lifo", "moz_tree"))
        self.assertEqual(entry["costed"], ["p1-r1", "p2-r0"])  # shortest first, one per set
        directories, conf = self.costed
        self.assertEqual([name.split("-", 2)[2].rsplit("-", 1)[0] for name in directories],
                         ["p1-r1", "p2-r0"])
        self.assertEqual(conf, "x")  # the installed Firefox's run sizes
        self.assertEqual(entry["cost"], {"windows": 4, "window_records": 500})
        # parent logs: Firefox's run sizes only; content logs: both
        self.assertEqual({(role, classic) for _, role, classic in self.replayed},
                         {("parent", False), ("content", True)})
        corpus = {"groups": {}}
        firefox_groups.join_groups(corpus, entry)
        cost = corpus["groups"]["firefox"]["judgement"]["containers"]["lifo"]["cost"]
        self.assertEqual(cost["instructions_per_call"]["n_traces"], 2)
        self.assertAlmostEqual(cost["instructions_per_call"]["percent"], 10.0)
        for group in ("firefox_classic", "firefox_parent"):
            self.assertEqual(corpus["groups"][group]["judgement"]["containers"]["lifo"]
                             ["cost"]["instructions_per_call"]["outcome"], "not measured")
        # the as-built tree against lifo as shipped, on the Firefox content logs
        built = anchors.build(corpus, None, firefox_groups.every_group_entries(entry))
        costed = {group["group"]: group for group in built["cost"]["groups"]}
        self.assertEqual(list(costed), ["firefox"])
        self.assertEqual([t["trace"] for t in costed["firefox"]["traces"]], ["p1-r1", "p2-r0"])
        self.assertAlmostEqual(costed["firefox"]["judged"]["difference"]["mean"], -10.0)

    def test_a_logalloc_log_added_with_corpus_file_joins_the_firefox_group(self):
        log = Path(self.scratch.name) / "elsewhere.log"
        log.write_text("7 7 malloc(16)=0x10\n7 7 jemalloc_stats()\n7 7 free(0x10)\n"
                       "7 7 jemalloc_stats()\n")
        corpus = self.build_corpus("one", [log])
        self.assertEqual([s["name"] for s in corpus["sessions"]], ["p1-r0", "file-elsewhere"])
        self.same = False
        entry = self.replay(corpus)
        self.assertEqual(entry["left_out"], [])
        groups = {"groups": {}}
        firefox_groups.join_groups(groups, entry)
        self.assertEqual(groups["groups"]["firefox"]["members"]["firefox"],
                         ["p1-r0", "file-elsewhere"])
        self.assertEqual(groups["groups"]["firefox_parent"]["members"]["firefox"], ["p1-r0"])
        marks = [c["name"] for c in firefox_groups.group_entries(entry, "firefox")[
            "file-elsewhere"]["allocators"]["lifo"]["exact"]["checkpoints"]]
        self.assertEqual(marks, ["mark_1", "mark_2"])
        judged = groups["groups"]["firefox"]["judgement"]["containers"]["lifo"]["memory"]
        self.assertEqual(sorted(judged), ["closed", "loaded", "mean", "peak"])

    def test_the_session_mean_and_the_peak_are_judged_over_every_mark(self):
        self.same = False
        entry = self.replay(self.build_corpus("two"))
        corpus = {"groups": {}}
        firefox_groups.join_groups(corpus, entry)
        lifo = corpus["groups"]["firefox"]["judgement"]["containers"]["lifo"]["memory"]
        # fake figures: rb_first@firefox's bin_unused is 12 at every mark, lifo@firefox's 13
        self.assertAlmostEqual(lifo["mean"]["bin_unused"]["percent"], 100 / 12)
        self.assertAlmostEqual(lifo["peak"]["bin_unused"]["percent"], 100 / 12)
        self.assertEqual(lifo["mean"]["bin_unused"]["n_traces"], 2)

    def test_the_report_tables_and_the_short_answer(self):
        self.same = False
        entry = self.replay(self.build_corpus("two"))
        for session in entry["sessions"]:
            for process in session["processes"]:
                process["recording"] = {"calls": 8, "coverage": 1.0, "frees_dropped_share": 0,
                                        "live_reuses": 0}
                for mark in process["marks"]:
                    mark["figures"]["firefox"] = {"bin_unused": 2 * MIB, "allocated": 20 * MIB,
                                                  "committed": 30 * MIB, "dirty": 0}
                    mark["figures"]["lifo@firefox"].update(bin_unused=2 * MIB + 1,
                                                           headroom_bound=0)
        results = {"firefox_corpus": entry, "corpus": {"groups": {}}}
        firefox_groups.join_groups(results["corpus"], entry)
        title, headers, rows, note = report_firefox_corpus.reference_table(results)
        self.assertEqual({row[-1] for row in rows}, {"yes"})
        self.assertIn("within the target", note)
        self.assertEqual(len(report_firefox_corpus.corpus_table(results)[2]), 2)
        short = report_firefox_corpus.short_answer(results)
        self.assertLessEqual(len(short.split()), 120)
        self.assertIn("over 2 content-process sessions", short)

    def test_the_short_answer_keeps_to_120_words_with_every_container_resolved(self):
        judged = {"outcome": "not resolvable", "percent": -12.345, "low": -23.456,
                  "high": +34.567, "half_width": 29.0, "n_traces": 9}
        names = [f"container_number_{n}" for n in range(12)]
        containers = {name: {"memory": {"mean": {"bin_unused": judged, "footprint": judged}},
                             "cost": {"instructions_per_call": judged}} for name in names}
        marks = [{"figures": {f"{name}@firefox": {"bin_unused": 5 * MIB, "headroom_bound": MIB}
                              for name in [*names, "lifo"]}}]
        results = {"corpus": {"groups": {"firefox": {"judgement": {
            "reference": "rb_first", "traces": list(range(9)), "containers": containers}}}},
            "firefox_corpus": {"sessions": [{"processes": [{"role": "content",
                                                            "marks": marks}]}]}}
        short = report_firefox_corpus.short_answer(results)
        self.assertLessEqual(len(short.split()), report_firefox_corpus.SHORT_ANSWER_WORDS)
        self.assertIn("container_number_0 -12.35 % [-23.46, +34.57] ?", short)

    def test_an_at_firefox_replay_with_the_classic_run_sizes_leaves_the_session_out(self):
        self.same = True  # NAME@firefox reports NAME's bytes_per_run
        entry = self.replay(self.build_corpus("one"))
        self.assertEqual(entry["sessions"], [])
        self.assertIn("classic run sizes", entry["left_out"][0]["reason"])


if __name__ == "__main__":
    unittest.main()
