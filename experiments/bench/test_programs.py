#!/usr/bin/env python3
"""meson test --suite harness (bench_programs_summary): programs.py's tables on synthetic
runs with known answers: exact ratios to glibc, the geometric mean over programs, the
time against the per-round fastest peer, and the allocator spec NAME=PATH:VAR=VALUE.

    PYTHONPATH=experiments /usr/bin/python3 experiments/bench/test_programs.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import unittest
from pathlib import Path

from bench import programs

from harness.allocators import Allocator

ROUNDS = 6


def synthetic_runs(factors: dict[str, dict[str, float]]) -> list[dict]:
    """Every (program, allocator) once per round; glibc's values drift from round to
    round, every other allocator's are `factor` times glibc's in the same round."""
    runs = []
    for round_index in range(ROUNDS):
        drift = 1 + 0.1 * round_index
        for program, per_allocator in factors.items():
            for allocator, factor in {"glibc": 1.0, **per_allocator}.items():
                runs.append({"program": program, "allocator": allocator, "round": round_index,
                             "seconds": 0.5 * drift * factor,
                             "peak_rss": 10000 * drift * factor,
                             "minor_faults": 1000 * drift * factor})
    return runs


def arguments(names: list[str], program_names: list[str]) -> argparse.Namespace:
    return argparse.Namespace(
        allocators=[Allocator("glibc", False, None)] +
                   [Allocator(n, n == "rb_first", Path(f"/x/{n}.so")) for n in names],
        programs=[p for p in programs.PROGRAMS if p.name in program_names],
        rounds=ROUNDS, scale=1.0)


class Summary(unittest.TestCase):
    def setUp(self):
        self.factors = {"larson": {"rb_first": 2.0, "tcmalloc": 0.5},
                        "stress": {"rb_first": 1.25, "tcmalloc": 0.8}}
        self.args = arguments(["rb_first", "tcmalloc"], list(self.factors))
        self.summary = programs.summarise(synthetic_runs(self.factors), self.args)

    def test_each_ratio_is_the_planted_factor(self):
        for metric in ("seconds", "peak_rss", "minor_faults"):
            for program, per_allocator in self.factors.items():
                for allocator, factor in per_allocator.items():
                    entry = self.summary["metrics"][metric][program][allocator]
                    self.assertAlmostEqual(entry["ratio"], factor, places=9)
                    self.assertAlmostEqual(entry["low"], factor, places=9)

    def test_geometric_mean_over_programs(self):
        entry = self.summary["metrics"]["seconds"]["geometric mean"]["rb_first"]
        self.assertAlmostEqual(entry["ratio"], (2.0 * 1.25) ** 0.5, places=9)

    def test_time_against_the_fastest_peer(self):
        larson = self.summary["metrics"]["seconds"]["larson"]["vs_best_peer"]["rb_first"]
        self.assertAlmostEqual(larson["ratio"], 2.0 / 0.5, places=9)
        stress = self.summary["metrics"]["seconds"]["stress"]["vs_best_peer"]["rb_first"]
        self.assertAlmostEqual(stress["ratio"], 1.25 / 0.8, places=9)
        self.assertNotIn("tcmalloc", self.summary["metrics"]["seconds"]["larson"]["vs_best_peer"])

    def test_the_build_profiles_are_named(self):
        runs = synthetic_runs(self.factors)
        for run in runs:
            if run["allocator"] == "rb_first":
                run["identity"] = {"name": "runsel:rb_first", "profile": "fast"}
        summary = programs.summarise(runs, self.args)
        self.assertEqual(summary["profiles"], {"rb_first": "fast"})
        self.assertIn("build profiles (runsel_build_profile(), every run): rb_first fast.",
                      programs.markdown(summary, self.args, (1.0, 2.0)))
        runs[-1 if runs[-1]["allocator"] == "rb_first" else 1]["identity"] = {"profile": "x"}
        self.assertEqual(programs.profiles_of(runs)["rb_first"], "mixed")

    def test_the_tables_name_every_allocator_and_program(self):
        text = programs.markdown(self.summary, self.args, (1.0, 2.0))
        for title in ("time ÷ glibc", "peak RSS ÷ glibc", "minor faults ÷ glibc",
                      "time ÷ the best peer"):
            self.assertIn(title, text)
        self.assertIn("| larson | 0.", text)
        self.assertIn("2.00 [2.00, 2.00]", text)


class Specs(unittest.TestCase):
    def test_a_library_with_a_variable(self):
        with tempfile.TemporaryDirectory() as directory:
            library = Path(directory) / "libmalloc-rb_first.so"
            library.write_bytes(b"")
            spec = programs.parse_preload(f"rb_first@budget={library}:RUNSEL_CONF=purge:budget")
            self.assertTrue(spec.runsel)
            self.assertEqual(spec.environment, (("RUNSEL_CONF", "purge:budget"),))
            self.assertEqual(programs.expected(spec).expected_identity(), "runsel:rb_first")

    def test_a_renamed_runsel_library_is_refused(self):
        """Its file name is what says which container a run must report, so a runsel
        library under another name is refused up front, not at its first run."""
        built = Path(os.environ["RUNSEL_TEST_LIBRARY"])  # meson: a built libmalloc-<c>.so
        with tempfile.TemporaryDirectory() as directory:
            renamed = Path(directory) / "after.so"
            shutil.copyfile(built, renamed)
            with self.assertRaisesRegex(argparse.ArgumentTypeError, "is a runsel library"):
                programs.parse_preload(f"new={renamed}")
            self.assertTrue(programs.parse_preload(f"new={built}").runsel)

    def test_bad_specs_are_refused(self):
        for bad in ("rb_first", "=x.so", "a=/no/such/file.so"):
            with self.assertRaises(argparse.ArgumentTypeError):
                programs.parse_preload(bad)


if __name__ == "__main__":
    unittest.main()
