"""meson test --suite harness (harness_headroom): the headroom figures (headroom.py) and
their table (report_headroom.py) on small synthetic replays whose answers are worked out
by hand below, in seconds and without a build.

    python3 -m harness.test_headroom  (in experiments/)
"""

from __future__ import annotations

import unittest

from . import headroom, report_headroom


def point(name: str, kind: str, bound: int, unused: int, kept: int = 0) -> dict:
    return {"name": name, "kind": kind, "bin_unused": unused, "headroom_bound": bound,
            "kept_empty_unused": kept}


def entry(figures: dict[str, list[tuple[int, int]]]) -> dict:
    """A corpus trace: {container: [(bound, bin_unused) at tab_1_loaded, tabs_closed,
    peak]}; the kept empty runs hold 100 bytes after the close."""
    places = (("tab_1_loaded", "mark"), ("tabs_closed", "mark"), ("peak", "peak"))
    return {"kind": "replay", "key_checkpoint": "tab_1_loaded", "allocators": {
        container: {"exact": {"checkpoints": [
            point(name, kind, bound, unused, 100 if name == "tabs_closed" else 0)
            for (name, kind), (bound, unused) in zip(places, values)]}}
        for container, values in figures.items()}}


# Excess over the bound, by hand: trace a at loaded, closed, peak: rb_first 600, 500,
# 400; lifo 1000, 1000, 1000; age_address 400, 250, 300. Trace b: 500, 1000, 200; 2000,
# 2000, 1000; 400, 500, 100.
TRACES = {
    "a": entry({"rb_first": [(1000, 1600), (200, 700), (500, 900)],
                "lifo": [(1000, 2000), (200, 1200), (500, 1500)],
                "age_address": [(1000, 1400), (200, 450), (500, 800)]}),
    "b": entry({"rb_first": [(3000, 3500), (100, 1100), (1000, 1200)],
                "lifo": [(3000, 5000), (100, 2100), (1000, 2000)],
                "age_address": [(3000, 3400), (100, 600), (1000, 1100)]}),
}


class HeadroomOfACorpus(unittest.TestCase):
    def setUp(self):
        self.built = headroom.build({"groups": {"webkit": {"entries": TRACES}}}, None)
        self.group = self.built["groups"][0]

    def test_the_excess_and_its_share_of_lifos_are_the_hand_arithmetic(self):
        loaded = self.group["moments"]["loaded"]
        self.assertEqual(loaded["bound"], 2000)
        self.assertEqual(loaded["excess"], {"rb_first": 550, "lifo": 1500, "age_address": 400})
        self.assertAlmostEqual(loaded["percent_of_scale"]["rb_first"], 100 * 1100 / 3000)
        self.assertAlmostEqual(loaded["percent_of_scale"]["age_address"], 100 * 800 / 3000)
        self.assertEqual(loaded["percent_of_scale"]["lifo"], 100)
        # The mean over the marks (loaded and closed; the peak is not a mark): a 550 and
        # b 750 for rb_first, a 1000 and b 2000 for lifo.
        session = self.group["moments"]["session"]
        self.assertEqual(session["excess"]["rb_first"], 650)
        self.assertAlmostEqual(session["percent_of_scale"]["rb_first"], 100 * 1300 / 3000)
        self.assertEqual(self.group["moments"]["closed"]["kept_empty"]["lifo"], 100)
        self.assertEqual((self.group["checked"], self.group["below"]), (18, []))

    def test_the_table_lays_the_figures_out(self):
        title, headers, rows, note = report_headroom.headroom_table(self.group, "lifo")
        self.assertEqual(title, "Headroom over the packing bound: WebKit corpus (2 traces)")
        self.assertEqual(headers[:3], ["container", "loaded: above the bound", "% of lifo's"])
        self.assertEqual(headers[-2], "mean over marks: above the bound")
        self.assertEqual(rows[0][:3], ["packing bound", "2.0 KiB", ""])
        cells = {row[0]: row for row in rows}
        self.assertEqual(cells["rb_first"][1:3], ["0.5 KiB", "36.7 %"])
        self.assertEqual(cells["age_address"][-2:], [f"{387.5 / 1024:,.1f} KiB", "25.8 %"])
        self.assertEqual(cells["lifo"][2], "100.0 %")
        self.assertIn("Every container at or above the bound at all 18 checkpoints.", note)
        self.assertIn("for lifo after the tabs close 0.1 KiB of its 1.5 KiB.", note)

    def test_a_container_below_the_bound_is_named(self):
        broken = entry({"rb_first": [(1000, 1600), (200, 700), (500, 900)],
                        "lifo": [(1000, 999), (200, 1200), (500, 1500)]})
        group = headroom.build({"groups": {"webkit": {"entries": {"c": broken}}}},
                               None)["groups"][0]
        self.assertEqual(group["below"], [{"trace": "c", "checkpoint": "tab_1_loaded",
                                           "container": "lifo", "bin_unused": 999,
                                           "bound": 1000}])
        note = report_headroom.headroom_table(group, "lifo")[3]
        self.assertIn("BELOW THE BOUND at 1 checkpoints (a wrong figure): lifo at c "
                      "tab_1_loaded.", note)
        check = headroom.checks({"groups": [group]})[0]
        self.assertEqual((check["ok"], check["detail"]),
                         (False, "lifo at c tab_1_loaded: 999 < 1000"))

    def test_each_group_gets_a_check_line(self):
        check = headroom.checks(self.built)[0]
        self.assertEqual((check["workload"], check["ok"], check["detail"]),
                         ("webkit", True, "18 checkpoints"))

    def test_without_lifo_there_is_no_share(self):
        alone = {"a": entry({"rb_first": [(1, 2), (1, 2), (1, 2)]})}
        group = headroom.build({"groups": {"webkit": {"entries": alone}}}, None)["groups"][0]
        rows = report_headroom.headroom_table(group, "lifo")[2]
        self.assertEqual(rows[1][1:3], ["0.0 KiB", "-"])


class HeadroomOfAFirefoxSession(unittest.TestCase):
    """Each process is a group of one; only the classic-geometry rows count."""

    def test_each_process_is_its_own_group(self):
        def figures(bound, unused):
            return {name: {"bin_unused": unused + extra, "headroom_bound": bound,
                           "kept_empty_unused": 0}
                    for name, extra in (("rb_first", 0), ("lifo", 100), ("lifo@firefox", 7))}
        marks = [{"label": label, "figures": figures(bound, unused)} for label, bound, unused in
                 (("every", 10, 20), ("tab_1_loaded", 30, 50), ("tabs_closed", 5, 5))]
        firefox = {"rows": {"rb_first": "classic run sizes", "lifo": "classic run sizes",
                            "lifo@firefox": "the installed Firefox's run sizes"},
                   "processes": [{"role": "content", "pid": 7, "marks": marks}]}
        built = headroom.build(None, firefox)
        group = built["groups"][0]
        self.assertEqual((group["group"], group["containers"]),
                         ("firefox content", ["rb_first", "lifo"]))
        self.assertEqual(set(group["moments"]), {"loaded", "closed", "session"})
        self.assertEqual(group["moments"]["loaded"]["excess"], {"rb_first": 20, "lifo": 120})
        self.assertEqual(group["moments"]["session"]["excess"]["rb_first"], 10)
        self.assertAlmostEqual(group["moments"]["closed"]["percent_of_scale"]["rb_first"], 0)
        title, headers, rows, _ = report_headroom.tables({"headroom": built})[0]
        self.assertEqual(title, "Headroom over the packing bound: Firefox content log")
        self.assertEqual(len(headers), 1 + 2 * 3)  # no peak among a session's marks


class HeadroomOfTheFirefoxCorpus(unittest.TestCase):
    """Each group of the Firefox corpus is one group, each session one trace; a row is
    the container's replay under the group's run sizes; the peak is the mark with the
    most live bytes."""

    @staticmethod
    def session(name, rows):
        """rows: (label, live, bound, rb_first's unused, lifo's unused) per mark; lifo@firefox
        and the classic replays hold 1 and 2 bytes more, the parent log 1,000 more."""
        def figures(live, bound, rb_first, lifo, extra):
            return {f"{container}{suffix}": {"bin_unused": unused + extra + shift,
                                             "headroom_bound": bound, "live_requested": live,
                                             "kept_empty_unused": 0}
                    for container, unused in (("rb_first", rb_first), ("lifo", lifo))
                    for suffix, shift in (("@firefox", 0), ("", 1))}
        return {"name": name, "processes": [
            {"role": role, "marks": [{"label": label, "figures": figures(*rest, extra)}
                                     for label, *rest in rows]}
            for role, extra in (("parent", 1000), ("content", 0))]}

    def test_the_three_groups_over_the_sessions(self):
        entry = {"containers": ["rb_first", "lifo"], "sessions": [
            self.session("a", [("tab_1_loaded", 100, 10, 30, 50),
                               ("every", 300, 20, 20, 120), ("tabs_closed", 50, 5, 15, 25)]),
            self.session("b", [("tab_1_loaded", 400, 10, 10, 10),
                               ("tabs_closed", 40, 5, 25, 45)])]}
        built = headroom.build(None, None, entry)
        groups = {group["group"]: group for group in built["groups"]}
        self.assertEqual(list(groups), ["firefox", "firefox_classic", "firefox_parent"])
        today = groups["firefox"]
        self.assertEqual(today["containers"], ["rb_first", "lifo"])
        self.assertEqual(set(today["moments"]), {"loaded", "closed", "peak", "session"})
        # loaded: a 20 and 40 over the bound, b 0 and 0; the mean over the two sessions.
        self.assertEqual(today["moments"]["loaded"]["excess"], {"rb_first": 10, "lifo": 20})
        # peak: a's "every" mark (300 live), b's tab_1_loaded (400 live).
        self.assertEqual(today["moments"]["peak"]["excess"], {"rb_first": 0, "lifo": 50})
        # session: each session's mean over its marks, then the mean over the sessions:
        # rb_first a (20, 0, 10) and b (0, 20); lifo a (40, 100, 20) and b (0, 40).
        session = today["moments"]["session"]
        self.assertEqual(session["excess"]["rb_first"], 10)
        self.assertAlmostEqual(session["excess"]["lifo"], (160 / 3 + 20) / 2)
        self.assertAlmostEqual(session["percent_of_scale"]["rb_first"],
                               100 * 10 / ((160 / 3 + 20) / 2))
        self.assertEqual(groups["firefox_classic"]["moments"]["closed"]["excess"],
                         {"rb_first": 16, "lifo": 31})
        self.assertEqual(groups["firefox_parent"]["moments"]["closed"]["excess"],
                         {"rb_first": 1015, "lifo": 1030})
        self.assertEqual(headroom.checks(built)[0]["detail"], "10 checkpoints")
        title = report_headroom.tables({"headroom": built})[0][0]
        self.assertEqual(title, "Headroom over the packing bound: Firefox corpus, content logs, "
                                "the installed Firefox's run sizes (2 traces)")

    def test_a_session_below_the_bound_fails_its_check(self):
        entry = {"containers": ["rb_first", "lifo"],
                 "sessions": [self.session("a", [("tab_1_loaded", 100, 40, 30, 50)])]}
        check = headroom.checks(headroom.build(None, None, entry))[0]
        self.assertFalse(check["ok"])
        self.assertIn("rb_first at a 0 tab_1_loaded: 30 < 40", check["detail"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
