#!/usr/bin/env python3
"""meson test --suite harness (bench_pair_cost): pair_cost.py's summary on synthetic
compare.py samples with known answers.

    PYTHONPATH=experiments /usr/bin/python3 experiments/bench/test_pair_cost.py
"""

from __future__ import annotations

import math
import unittest

import numpy as np
from bench import pair_cost

ROUNDS = 8
BENCHMARKS = ("BM_pair_immediate/64", "BM_pair_ring/64", "BM_pair_ring/65536")


def samples(factors: dict[str, dict[str, float]], noise: float = 0.0) -> dict:
    """old_<c> drifts from round to round (the machine's load); new_<c> is
    factors[c][benchmark] times it in the same round, times a seeded noise."""
    rng = np.random.default_rng(7)
    out: dict = {}
    for benchmark in BENCHMARKS:
        per_allocator = out.setdefault(benchmark, {})
        for container, factor in factors.items():
            drift = [10.0 * (1 + 0.3 * r) for r in range(ROUNDS)]
            noisy = [factor[benchmark] * d * math.exp(noise * rng.standard_normal())
                     for d in drift]
            per_allocator[f"old_{container}"] = {"ns_per_op": drift}
            per_allocator[f"new_{container}"] = {"ns_per_op": noisy}
    return out


class PairCost(unittest.TestCase):
    def test_exact_factors(self):
        factors = {"lifo": {"BM_pair_immediate/64": 1.0, "BM_pair_ring/64": 1.0,
                            "BM_pair_ring/65536": 1.331},
                   "rb_first": dict.fromkeys(BENCHMARKS, 0.9)}
        result = pair_cost.summary(samples(factors), "old", "new")
        self.assertAlmostEqual(result["container"]["lifo"]["percent"], 10.0, places=6)
        self.assertAlmostEqual(result["container"]["rb_first"]["percent"], -10.0, places=6)
        ring = math.sqrt(1.331 * 0.9)
        self.assertAlmostEqual(result["benchmark"]["BM_pair_ring/65536"]["percent"],
                               100 * (ring - 1), places=6)
        overall = (1.331 * 0.9 ** 3) ** (1 / 6)
        self.assertAlmostEqual(result["all"]["percent"], 100 * (overall - 1), places=6)
        self.assertEqual(result["all"]["low"], result["all"]["high"])  # constant ratio

    def test_noise_gives_an_interval_near_the_truth(self):
        factors = {c: dict.fromkeys(BENCHMARKS, 1.05) for c in ("lifo", "wavl")}
        result = pair_cost.summary(samples(factors, noise=0.02), "old", "new")["all"]
        self.assertLess(result["low"], result["percent"])
        self.assertLess(result["percent"], result["high"])
        self.assertLess(abs(result["percent"] - 5.0), 1.0)  # 8 rounds of 2 % noise, averaged
        self.assertLess(result["half_width"], 3.0)

    def test_only_containers_with_both_builds(self):
        data = samples({"lifo": dict.fromkeys(BENCHMARKS, 1.0)})
        for benchmark in BENCHMARKS:
            data[benchmark]["old_wavl"] = {"ns_per_op": [1.0] * ROUNDS}
        self.assertEqual(list(pair_cost.summary(data, "old", "new")["container"]), ["lifo"])
        with self.assertRaises(ValueError):
            pair_cost.summary(data, "old", "newer")


if __name__ == "__main__":
    unittest.main()
