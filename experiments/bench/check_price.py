#!/usr/bin/env python3
"""The price of the link checks: each container's instructions per call, hardened and as
shipped, from callgrind over a trace replay.

Every container verifies each link it follows in a run header before following it
(memory/containers/README.md, "Links are not trusted"). The libraries programs load
(build/libmalloc-<container>.so, replayed by tools/runsel-replay-<container>) do;
their shipped twins (build/libshipped-malloc-<container>.so, tools/runsel-shipped-
replay-<container>, built with -DRUNSEL_VERIFY_LINKS=0) do not, and keep every other
check (the run header's keyed check on free, the bitmap's double-free check, the page
map). With --profile, the profiling twins instead (libprofile-malloc-<container>.so,
the report's cost figures, and libprofile-malloc-shipped-<container>.so): the
container's four members out of line, so the container's own instructions are counted
too, at the price of a call (and a prologue) per member call. This replays one trace on
both builds of each container under callgrind (harness/cost.py's replay_cost: the
replay loop only, its first --records records) and prints one Markdown table: the
allocator's instructions per call hardened and as shipped, their difference (what the
checks cost per call), with --profile the container's own instructions per call both
ways, and each allocator figure's premium over lifo when lifo is among them.
Deterministic: a rerun gives the same figures.

  PYTHONPATH=experiments /usr/bin/python3 experiments/bench/check_price.py \\
      --build-dir build --trace TRACE [--records N] [--container NAME ...] [--profile] \\
      [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import cost

# The premiums are over FIREFOX_MATCHING, the container of today's Firefox.
from harness.allocators import (
    FIREFOX_MATCHING,
    REPLAYER_PREFIX,
    SHIPPED_REPLAYER_PREFIX,
    SHIPPED_TARGET_PREFIX,
    VARIANT_TARGET_PREFIX,
    runsel_variants,
)

# (replayer, library) of each build, by container.
BUILDS = {"hardened": (f"tools/{REPLAYER_PREFIX}{{}}", f"lib{VARIANT_TARGET_PREFIX}{{}}.so"),
          "shipped": (f"tools/{SHIPPED_REPLAYER_PREFIX}{{}}", f"lib{SHIPPED_TARGET_PREFIX}{{}}.so")}
PROFILE_BUILDS = {build: (cost.PROFILE_REPLAYER.format(cost.twin("{}", key)),
                          cost.PROFILE_LIBRARY.format(cost.twin("{}", key)))
                  for build, key in (("hardened", cost.HARDENED), ("shipped", cost.SHIPPED))}


def per_call(block: dict) -> dict:
    """The allocator's and the container's instructions per call of a cost block."""
    calls = block["calls"]
    if not calls or block["allocator_instructions"] is None:
        raise cost.CostFailed("no allocator calls counted (wrong library loaded?)")
    own = block["container_instructions"]
    return {"allocator": block["allocator_instructions"] / calls,
            "container": own / calls if own is not None else None,
            "calls": calls, "records": block["records"]}


def measure(build_dir: Path, trace: Path, containers: list[str], records: int, jobs: int,
            profile: bool) -> dict[str, dict[str, dict]]:
    """{container: {"hardened": per_call, "shipped": per_call}}."""
    builds = PROFILE_BUILDS if profile else BUILDS
    jobs_list = [(c, kind) for c in containers for kind in builds]
    paths = {(c, kind): (build_dir / builds[kind][0].format(c),
                         build_dir / builds[kind][1].format(c))
             for c, kind in jobs_list}
    cost.ninja(build_dir, [path for pair in paths.values() for path in pair])

    def one(job: tuple[str, str]) -> dict:
        replayer, library = paths[job]
        block = cost.replay_cost(trace, build_dir, job[0], records, timeout=3600,
                                           replayer=replayer, library=library)
        print(f"check_price: {job[0]} {job[1]}: {block['allocator_instructions_per_call']} "
              "per call", file=sys.stderr, flush=True)
        return per_call(block)
    with ThreadPoolExecutor(jobs) as pool:
        counted = dict(zip(jobs_list, pool.map(one, jobs_list)))
    return {c: {kind: counted[(c, kind)] for kind in builds} for c in containers}


def figure(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def table(results: dict[str, dict[str, dict]]) -> str:
    """One row per container; the premiums over lifo when lifo was measured."""
    reference = results.get(FIREFOX_MATCHING)
    profiled = any(both["hardened"]["container"] is not None for both in results.values())
    header = ["container", "hardened", "as shipped", "checks' price"]
    if profiled:
        header += ["container's own, hardened", "as shipped"]
    if reference:
        header += ["over lifo, hardened", "as shipped"]
    rows = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for name, both in results.items():
        hardened, shipped = both["hardened"], both["shipped"]
        cells = [f"`{name}`", figure(hardened["allocator"]), figure(shipped["allocator"]),
                 figure(hardened["allocator"] - shipped["allocator"])]
        if profiled:
            cells += [figure(hardened["container"]), figure(shipped["container"])]
        if reference:
            cells += [figure(hardened["allocator"] - reference["hardened"]["allocator"]),
                      figure(shipped["allocator"] - reference["shipped"]["allocator"])]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--records", type=int, default=cost.DEFAULT_RECORDS)
    parser.add_argument("--container", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    parser.add_argument("--profile", action="store_true",
                        help="the profiling twins: the container's own instructions too")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not args.trace.is_file():
        sys.exit(f"check_price: no trace at {args.trace}")
    build_dir = args.build_dir.resolve()
    containers = args.container or [v.name for v in runsel_variants(build_dir)]
    try:
        results = measure(build_dir, args.trace.resolve(), containers, args.records,
                          args.jobs, args.profile)
    except cost.CostFailed as failure:
        sys.exit(f"check_price: {failure}")
    if args.json:
        args.json.write_text(json.dumps({"trace": str(args.trace), "records": args.records,
                                         "profile": args.profile, "containers": results},
                                        indent=1))
    builds = "profiling twins" if args.profile else "libraries as loaded"
    sys.stdout.write(f"Allocator instructions per call ({builds}), `{args.trace.name}` "
                     f"({next(iter(results.values()))['hardened']['records']} records):\n\n")
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
