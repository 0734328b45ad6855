"""meson test --suite harness (harness_trace): a recorded trace as a harness workload.

Records a small real program (python3 with PYTHONMALLOC=malloc, under
build/tools/librunsel-trace.so), runs the harness with `--workload replay --trace FILE`
under every allocator, and checks that replay:<file> is there for each of them with
sane numbers, that it replayed every record (the count runsel-replay-rb_first gives),
and that the containers that pick alike (meson.build's container table) end with
identical stats.
A truncated copy of the trace must be refused up front, with its byte offset. Then the
exact replays (replays.py): every container, the reference twice with identical
figures, blocks written (resident at least the live bytes), the same-policy containers
placing blocks alike.

    python3 -m harness.test_trace_workload --build-dir build  (in experiments/)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import replays, runs
from .allocators import runsel_variants, same_choice_groups
from .cost import build_profile_libraries, read_perf
from .interpreter import package_environment
from .test_harness import (
    SYSTEM_ALLOCATORS,
    Failures,
    check_agreement,
    check_allocators,
    check_numbers,
    container_names,
)

PYTHON = "/usr/bin/python3"  # the interpreter itself (a pyenv shim would fork a shell)
PROGRAM = """
import random
rng = random.Random(5)
table, kept = {}, []
for round in range(4):
    for i in range(6000):
        table[(round, i)] = ["x" * rng.randint(1, 300), list(range(rng.randint(0, 40)))]
    for key in rng.sample(sorted(table), len(table) // 2):
        kept.append(table.pop(key)[0]) if rng.random() < 0.1 else table.pop(key)
    blob = [bytes(rng.randint(1000, 70000)) for _ in range(20)]
print(len(table), len(kept), len(blob))
"""


def record(build_dir: Path, scratch: Path) -> Path:
    recorder = build_dir / "tools" / "librunsel-trace.so"
    environment = {**os.environ, "PYTHONMALLOC": "malloc", "LD_PRELOAD": str(recorder),
                   "RUNSEL_TRACE": str(scratch / "python.%p")}
    child = subprocess.Popen([PYTHON, "-c", PROGRAM], env=environment, stdout=subprocess.PIPE)
    child.communicate(timeout=60)
    if child.returncode != 0:
        sys.exit(f"recording python3 failed: exit {child.returncode}")
    return scratch / f"python.{child.pid}"


def replayed_records(build_dir: Path, trace: Path) -> int:
    """The record count by the trace tools' own replayer."""
    output = subprocess.run([str(build_dir / "tools" / "runsel-replay-rb_first"), str(trace)],
                            capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^replay ops=(\d+)", output, re.MULTILINE).group(1))


def check_exact_replays(build_dir: Path, trace: Path, variants: list[str], records: int,
                        failures: Failures) -> None:
    cost_records = 20000
    entry = replays.exact_replay_summary(trace, build_dir, cost_records=cost_records)
    pairs = entry["allocators"]
    failures.expect(entry["kind"] == "replay" and sorted(pairs) == sorted(variants),
                    f"exact replays: kind {entry['kind']}, containers {sorted(pairs)}")
    reference = pairs.get("rb_first", {}).get("exact", {})
    failures.expect(reference.get("repeated_identical") is True,
                    "two replays of the trace on rb_first differ")
    for name, pair in pairs.items():
        exact = pair["exact"]
        failures.expect(exact["writes_blocks"] and exact["replay"]["ops"] == records,
                        f"{name}: writes_blocks {exact['writes_blocks']}, {exact['replay']}")
        for point in exact["checkpoints"]:
            failures.expect(point["resident"] >= point["live_requested"] > 0 or
                            point["kind"] == "end",
                            f"{name} at {point['name']}: resident {point['resident']} below "
                            f"live {point['live_requested']}: blocks not written?")
    for name, pair in pairs.items():
        for build in ("cost", "cost_hardened"):
            cost = pair[build] or {}
            failures.expect(cost.get("calls") == min(records, cost_records)
                            and ordered_cost(cost), f"{name}: replay {build} {cost}")
    check_the_builds_differ(pairs, failures)
    for name, pair in pairs.items():
        bins = (pair["counters"] or {}).get("bins") or []
        failures.expect(bins and sum(b["picks"] for b in bins) >= sum(b["runs_created"]
                                                                     for b in bins) > 0,
                        f"{name}: pick counters {pair['counters']}")
    for group in same_choice_groups(build_dir):
        picked = [[(b["size"], b["picks"], b["runs_created"])
                   for b in pairs[name]["counters"]["bins"]]
                  for name in group
                  if name in pairs and pairs[name]["counters"]
                  and "bins" in pairs[name]["counters"]]
        failures.expect(all(p == picked[0] for p in picked),
                        f"{', '.join(group)} count different picks")
        same = [pairs[name]["exact"]["checkpoints"] for name in group if name in pairs]
        placed = [[(p["allocated"], p["waste"], p["bin_unused"],
                    [b["unused_bytes"] for b in p["bins"]]) for p in points] for points in same]
        failures.expect(all(figures == placed[0] for figures in placed),
                        f"{', '.join(group)} place blocks differently")


def check_the_builds_differ(pairs: dict[str, dict], failures: Failures,
                            container: str = "sorted_by_free") -> None:
    """The as-shipped cost is counted on another build than the hardened one: a tree
    container verifies O(log n) links per operation when hardened, none as shipped
    (sorted_by_free pays 21 instructions per call for it over the report's whole Firefox
    content log, 2.9 over its first 20,000 records). Counts are deterministic, so the
    same replayer twice would give exactly the same figure."""
    if container not in pairs:
        return
    shipped, hardened = (pairs[container][build] or {} for build in ("cost", "cost_hardened"))
    per_call = [block.get("allocator_instructions_per_call") for block in (shipped, hardened)]
    failures.expect(None not in per_call and per_call[1] - per_call[0] > 0.1,
                    f"{container}: instructions per call as shipped {per_call[0]}, hardened "
                    f"{per_call[1]}: the as-shipped replayer is not the unverified build")


def ordered_cost(cost: dict) -> bool:
    """All of a cost block's counts are there, the container's inside the allocator's
    inside the run's."""
    counts = [cost.get(key) for key in ("instructions", "allocator_instructions",
                                        "container_instructions", "d1_misses", "ll_misses")]
    if "error" in cost or any(count is None for count in counts):
        return False
    run, allocator, container, d1, ll = counts
    return run > allocator > container > 0 and d1 > 0 and ll >= 0


def check_perf_parsing(failures: Failures) -> None:
    """perf's CSV lines (no hardware counters here to run it): counted events become the
    cost block's figures, unsupported ones stay None."""
    text = ("# started on Sun Nov 22 23:00:00 2026\n\n"
            "1234567,,instructions:u,1000,100.00,,\n"
            "<not supported>,,cycles:u,0,100.00,,\n"
            "4321,,cache-misses:u,1000,100.00,,\n")
    cost = read_perf(text)
    failures.expect((cost["instructions"], cost["cycles"], cost["ll_misses"], cost["d1_misses"])
                    == (1234567, None, 4321, None), f"perf parsing: {cost}")


def check_live_cost(build_dir: Path, failures: Failures) -> None:
    """A synthetic workload's callgrind cost on rb_first's profiling twin: the allocator's
    and the container's instructions and the malloc+free calls are all counted."""
    reference = next(a for a in runsel_variants(build_dir) if a.name == "rb_first")
    program = build_dir / "experiments" / "workload_churn"
    build_profile_libraries(build_dir, ["rb_first"])
    result = runs.count_instructions(runs.Workload("churn", program), reference, "callgrind",
                                     0.002, 1, 300)
    cost = result.get("cost") or {}
    failures.expect((cost.get("calls") or 0) > 1000 and ordered_cost(cost),
                    f"churn under callgrind on rb_first: {result}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", type=Path, required=True)
    args = parser.parse_args()
    build_dir = args.build_dir.resolve()
    expected = container_names(build_dir) + list(SYSTEM_ALLOCATORS)  # not the harness's discovery
    failures = Failures()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="runsel-harness-trace-") as scratch_name:
        scratch = Path(scratch_name)
        trace = record(build_dir, scratch)
        records = replayed_records(build_dir, trace)
        print(f"recorded {trace.name}: {trace.stat().st_size} bytes, {records} records",
              flush=True)
        harness = [sys.executable, "-m", "harness.harness", "--build-dir", str(build_dir),
                   "--quick", "--scale", "1", "--instructions", "off", "--workload", "replay"]

        # A malformed trace is refused before any run, with the byte offset.
        cut = scratch / "cut"
        cut.write_bytes(trace.read_bytes()[:trace.stat().st_size // 2])
        refused = subprocess.run([*harness, "--trace", str(cut), "--out", str(scratch / "cut.out")],
                                 capture_output=True, text=True, env=package_environment())
        failures.expect(refused.returncode != 0 and "byte offset" in refused.stderr,
                        f"truncated trace not refused with an offset: exit {refused.returncode}, "
                        f"{refused.stderr.strip()[-300:]}")

        out = scratch / "report"
        command = [*harness, "--trace", str(trace), "--out", str(out)]
        print("+ " + " ".join(command), flush=True)
        failures.expect(subprocess.call(command, env=package_environment()) == 0,
                        "harness failed")
        results = json.loads((out / "results.json").read_text())
        name = f"replay:{trace.name}"
        failures.expect(results["workloads"] == [name], f"workloads: {results['workloads']}")
        failures.expect(name in results["summary"], f"{name} missing from the summary")
        check_allocators(results, expected, failures)
        check_numbers(results, failures)
        groups = same_choice_groups(build_dir)
        check_agreement(results, groups, failures)
        for allocator, pair in results["summary"].get(name, {}).get("allocators", {}).items():
            replay = pair.get("replay") or {}
            failures.expect(replay.get("ops") == records == replay.get("records"),
                            f"{allocator}: replayed {replay.get('ops')} of {records} records")
            failures.expect(replay.get("failed") == 0, f"{allocator}: failed {replay}")
            failures.expect(len(pair["checkpoints"]) == 7,  # start, five, end
                            f"{allocator}: checkpoints {[p['name'] for p in pair['checkpoints']]}")
            peak = max(point["live_requested"] for point in pair["checkpoints"])
            failures.expect(peak > 1 << 20, f"{allocator}: live requested peaks at {peak}")
        agreed = [check for check in results["checks"] if check["check"].startswith("same choices")]
        # One per group on the runs of the replay workload, and one per group on its exact
        # replays (every checkpoint of the trace).
        for workload in (name, f"exact:{trace.name}"):
            mine = [check for check in agreed if check["workload"] == workload]
            failures.expect(len(mine) == len(groups) and all(check["ok"] for check in mine),
                            f"{workload}: agreement checks {mine} for the groups {groups}")
        failures.expect(len(agreed) == 2 * len(groups), f"agreement checks {agreed}")
        failures.expect((out / "report.md").read_text().count(name) > 0, "report.md lacks it")
        check_exact_replays(build_dir, trace, container_names(build_dir), records, failures)
        check_live_cost(build_dir, failures)
        check_perf_parsing(failures)
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"trace workload test: {len(failures)} failure(s) in {time.monotonic() - started:.0f} s; "
          f"allocators: {', '.join(expected)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
