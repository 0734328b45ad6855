#!/usr/bin/env python3
"""How much one build's pairs cost against another's, over every container:
reads a compare.py --out file whose allocators are named OLD_<container> and
NEW_<container>, and prints, per container, per benchmark and over all of
them, NEW's time against OLD's.

Each figure is paired by round: in every round, the geometric mean over the
chosen benchmarks (and containers) of NEW's ns/op against the same of OLD's;
then the rounds' ratios are judged as compare.py judges one benchmark (20 %
trimmed mean of the log ratios, paired BCa bootstrap: harness/comparisons.py).
The interval's half-width is the smallest difference the run could resolve.

  PYTHONPATH=experiments python3 experiments/bench/compare.py --no-glibc \\
      --filter BM_pair --rounds 6 --out pairs.json \\
      --preload old_lifo=OLD/libmalloc-lifo.so --preload new_lifo=build/libmalloc-lifo.so ...
  PYTHONPATH=experiments python3 experiments/bench/pair_cost.py pairs.json old new
"""
import argparse
import json
import sys

import numpy as np

from harness import comparisons


def judged(samples: dict, old: str, new: str, keys: list[tuple[str, str]],
           metric: str) -> dict:
    """compare_paired of the per-round geometric means over (benchmark, container) keys."""
    def log_mean(prefix: str) -> np.ndarray:
        return np.mean([np.log(np.asarray(samples[b][f"{prefix}_{c}"][metric], dtype=float))
                        for b, c in keys], axis=0)
    return comparisons.compare_paired(np.exp(log_mean(new)), np.exp(log_mean(old)))


def formatted(result: dict) -> str:
    if result["low"] is None:
        return f"{result['percent']:+.1f} % (no interval: {result['method']})"
    return (f"{result['percent']:+.1f} % [{result['low']:+.1f}, {result['high']:+.1f}] "
            f"(±{result['half_width']:.1f} %)")


def summary(samples: dict, old: str, new: str, metric: str = "ns_per_op") -> dict:
    """{"container": {c: result}, "benchmark": {b: result}, "all": result}: NEW_<c>
    against OLD_<c>, for the containers that have both, by compare_paired."""
    benchmarks = sorted(samples)
    containers = sorted({name[len(old) + 1:] for b in benchmarks for name in samples[b]
                         if name.startswith(old + "_")
                         and f"{new}_{name[len(old) + 1:]}" in samples[b]})
    if not containers:
        raise ValueError(f"no allocator named {old}_<c> with a {new}_<c> beside it")
    return {
        "container": {c: judged(samples, old, new, [(b, c) for b in benchmarks], metric)
                      for c in containers},
        "benchmark": {b: judged(samples, old, new, [(b, c) for c in containers], metric)
                      for b in benchmarks},
        "all": judged(samples, old, new, [(b, c) for b in benchmarks for c in containers],
                      metric),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="compare.py --out file")
    parser.add_argument("old", help="prefix of the reference allocators (OLD_<container>)")
    parser.add_argument("new", help="prefix of the allocators judged (NEW_<container>)")
    parser.add_argument("--metric", default="ns_per_op")
    args = parser.parse_args()
    samples = json.loads(open(args.results).read())["samples"]
    try:
        judged_all = summary(samples, args.old, args.new, args.metric)
    except ValueError as error:
        sys.exit(f"pair_cost: {error}")
    for kind in ("container", "benchmark"):
        print(f"| {kind} | {args.new} against {args.old} |\n|---|---|")
        for name, result in judged_all[kind].items():
            print(f"| {name} | {formatted(result)} |")
        print()
    print(f"**{len(judged_all['container'])} containers × {len(judged_all['benchmark'])} "
          f"benchmarks: {formatted(judged_all['all'])}**")


if __name__ == "__main__":
    main()
