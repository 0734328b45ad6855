"""Cost without noise: a run's instructions and simulated cache misses under callgrind,
split into the allocator and, within it, the container's own functions.

The profiling twin of each runsel variant (build/libprofile-malloc-<container>.so, and
build/tools/runsel-profile-replay-<container> linked with it) keeps the container's
calls out of line (memory/containers/selected.h), so the container's instructions are
the inclusive cost of its four members; the allocator's are the instructions executed
inside the library itself. Each variant has two: hardened, as the drop-in libraries run
(every link verified), and as shipped (libprofile-malloc-shipped-<container>.so and
tools/runsel-profile-replay-shipped-<container>, built with -DRUNSEL_VERIFY_LINKS=0: no
link verification, every check the containers share kept). A replay's cost is counted on
both (BUILDS): as shipped is the verdict's figure, hardened is shown beside it. The cache
is simulated with fixed parameters, so counts do not depend on the machine: I1 and D1
32 KiB 8-way, LL 8 MiB 16-way, 64-byte lines.

    python3 -m harness.cost --build-dir build --trace PATH [--records N]  (PYTHONPATH=experiments)
        [--windows K [--window-records W]] [--container NAME ...]
builds the profiling twins it needs, then prints the replay cost of a trace as JSON on
every runsel variant of the build, or on each --container given: {container: {"cost": as
shipped, "cost_hardened": hardened}}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .allocators import (
    PROFILE_REPLAYER_PREFIX,
    PROFILE_TARGET_PREFIX,
    runsel_variants,
    with_as_built,
)

CALLGRIND = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--I1=32768,8,64",
             "--D1=32768,8,64", "--LL=8388608,16,64", "--compress-strings=no",
             "--compress-pos=no"]
TOOL = "callgrind --cache-sim=yes (I1, D1 32 KiB 8-way; LL 8 MiB 16-way; 64 B lines)"
# Address-space randomisation off: chunks are chosen by address, and where the kernel
# places each mapping (and whether a huge realloc can grow in place) must not vary
# between runs, or two runs of one variant make different choices. Under valgrind the
# replayer cannot switch it off itself (its own re-execution), so callgrind runs get it too.
FIXED_LAYOUT = ["setarch", "-R"]
PROFILE_LIBRARY = f"lib{PROFILE_TARGET_PREFIX}{{}}.so"
PROFILE_REPLAYER = f"tools/{PROFILE_REPLAYER_PREFIX}{{}}"
# The builds a replay's cost is counted on, by their key in results.json's replay
# entries: the prefix each adds to the container's name in its profiling twins' names
# (meson.build). As shipped first: the verdict's figure; hardened, shown beside it.
SHIPPED, HARDENED = "cost", "cost_hardened"
BUILDS = {SHIPPED: "shipped-", HARDENED: ""}
REPLAY_REGION = "runsel_replay_measured*"  # tools/trace/replay.cpp
NO_AGEING = "huge_cache_ms:10000000000"  # as tools/trace/replay.cpp sets it (kNoAgeing)
# Replays counted under callgrind stop after this many records: ~50x slower than native.
DEFAULT_RECORDS = 500_000
# Or, over the whole trace: windows of WINDOW_RECORDS records spread evenly across it,
# callgrind uninstrumented in between (a 22 M-record WebKit trace: ~50 s of CPU for 40
# windows against ~15 minutes instrumented throughout). windows * records >= the trace's
# records counts every record.
DEFAULT_WINDOWS = 40
WINDOW_RECORDS = 25_000
ALLOCATION_CALLS = {"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
                    "aligned_alloc", "memalign", "valloc", "pvalloc"}
CONTAINER_FUNCTION = re.compile(r"OutOfLineRuns<.*>::(insert|erase|pick|touched)\(")


class CostFailed(Exception):
    pass


# --- reading callgrind's output ----------------------------------------------------------


def read_callgrind(path: Path, allocator_object: str | None) -> dict:
    """The cost block of one callgrind profile (written with --compress-strings=no and
    --compress-pos=no). allocator_object: the allocator's shared object (a path or a file
    name), or None when the allocator cannot be told apart (glibc)."""
    events: list[str] = []
    totals: list[int] = []
    self_cost: dict[tuple[str, str], list[int]] = {}
    inclusive_calls: dict[tuple[str, str], list[int]] = {}
    api_calls = 0
    obj = function = called_obj = called_function = ""
    pending_call = None  # (count, callee object, callee function) until its cost line

    def add(table: dict, key: tuple[str, str], values: list[int]) -> None:
        row = table.setdefault(key, [0] * len(events))
        for i, value in enumerate(values):
            row[i] += value

    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith(("summary:", "totals:")):
            totals = [int(word) for word in line.split()[1:]]
        elif line.startswith("ob="):
            obj = line[3:]
        elif line.startswith("fn="):
            function, called_obj, called_function = line[3:], "", ""
        elif line.startswith("cob="):
            called_obj = line[4:]
        elif line.startswith("cfn="):
            called_function = line[4:]
        elif line.startswith("calls="):
            pending_call = (int(line.split()[0][6:]), called_obj or obj, called_function)
        elif line[:1].isdigit() or line[:1] in "+-*":
            values = [int(word) for word in line.split()[1:]]
            if pending_call is not None:
                count, callee_obj, callee = pending_call
                add(inclusive_calls, (obj, function), values)
                if allocator_object and is_object(callee_obj, allocator_object) and \
                        not is_object(obj, allocator_object) and callee in ALLOCATION_CALLS:
                    api_calls += count
                pending_call = None
            else:
                add(self_cost, (obj, function), values)
    if not events or not totals:
        raise CostFailed(f"{path}: no events or totals (not a callgrind profile?)")

    def event(values: list[int], *names: str) -> int:
        return sum(values[events.index(name)] for name in names
                   if name in events and events.index(name) < len(values))

    def summed(rows) -> list[int]:
        total = [0] * len(events)
        for row in rows:
            for i, value in enumerate(row):
                total[i] += value
        return total

    cost = {"tool": TOOL, "instructions": event(totals, "Ir"),
            "d1_misses": event(totals, "D1mr", "D1mw"),
            "ll_misses": event(totals, "ILmr", "DLmr", "DLmw"),
            "allocator_instructions": None, "allocator_d1_misses": None,
            "allocator_ll_misses": None, "container_instructions": None,
            "container_d1_misses": None, "container_ll_misses": None,
            "calls": api_calls if allocator_object else None}
    if allocator_object:
        allocator = summed(row for (o, _), row in self_cost.items()
                           if is_object(o, allocator_object))
        cost.update(allocator_instructions=event(allocator, "Ir"),
                    allocator_d1_misses=event(allocator, "D1mr", "D1mw"),
                    allocator_ll_misses=event(allocator, "ILmr", "DLmr", "DLmw"))
        container_keys = [key for key in set(self_cost) | set(inclusive_calls)
                          if CONTAINER_FUNCTION.search(key[1])]
        if container_keys:
            container = summed([*(self_cost.get(key, []) for key in container_keys),
                                *(inclusive_calls.get(key, []) for key in container_keys)])
            cost.update(container_instructions=event(container, "Ir"),
                        container_d1_misses=event(container, "D1mr", "D1mw"),
                        container_ll_misses=event(container, "ILmr", "DLmr", "DLmw"))
    return with_ratios(cost)


def is_object(name: str, wanted: str) -> bool:
    return name == wanted or Path(name).name == Path(wanted).name


def with_ratios(cost: dict) -> dict:
    """Adds the container's instructions per malloc+free pair (per two calls counted in
    `calls`, any allocation call) and its share of the allocator's instructions, where
    both are known (None otherwise); returns the block."""
    container, allocator, calls = (cost["container_instructions"],
                                   cost["allocator_instructions"], cost["calls"])
    cost["container_instructions_per_pair"] = (round(2 * container / calls, 2)
                                               if container is not None and calls else None)
    cost["container_share"] = (round(container / allocator, 4)
                               if container is not None and allocator else None)
    return cost


# --- perf, where the machine has hardware counters ------------------------------------------

PERF_EVENTS = "instructions:u,cycles:u,cache-misses:u"


def read_perf(text: str) -> dict:
    """The cost block from `perf stat -x, -e PERF_EVENTS` (whole process): instructions,
    cycles and the hardware's cache misses (counted as LL misses). An event the machine
    cannot count ("<not supported>", "<not counted>") stays None; so do D1 misses and
    everything perf cannot split (the allocator's and the container's share, calls)."""
    counts: dict[str, int | None] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        event = fields[2].split(":")[0]
        counts[event] = int(fields[0]) if fields[0].isdigit() else None
    cost = {"tool": f"perf stat -e {PERF_EVENTS} (whole process)",
            "instructions": counts.get("instructions"), "cycles": counts.get("cycles"),
            "d1_misses": None, "ll_misses": counts.get("cache-misses"),
            "allocator_instructions": None, "allocator_d1_misses": None,
            "allocator_ll_misses": None, "container_instructions": None,
            "container_d1_misses": None, "container_ll_misses": None, "calls": None}
    return with_ratios(cost)


# --- running ------------------------------------------------------------------------------


def twin(container: str, build: str = SHIPPED) -> str:
    """The container's name in the names of its profiling twins of that build (BUILDS):
    shipped-NAME as shipped, NAME hardened (cached-NAME: the thread cache's)."""
    return BUILDS[build] + container


def profile_targets(build_dir: Path, containers: list[str],
                    builds: tuple[str, ...] = (SHIPPED, HARDENED)) -> list[Path]:
    """The profiling libraries and replayers of these containers, in these builds."""
    names = [twin(c, build) for build in builds for c in containers]
    return [build_dir / PROFILE_LIBRARY.format(name) for name in names] + \
        [build_dir / PROFILE_REPLAYER.format(name) for name in names]


def build_profile_twins(build_dir: Path, containers: list[str],
                        builds: tuple[str, ...] = (SHIPPED, HARDENED)) -> None:
    """Builds the profiling twins, libraries and replayers, of these builds (meson builds
    them only when asked)."""
    ninja(build_dir, profile_targets(build_dir, containers, builds))


def build_profile_libraries(build_dir: Path, containers: list[str]) -> None:
    ninja(build_dir, [build_dir / PROFILE_LIBRARY.format(c) for c in containers])


def ninja(build_dir: Path, outputs: list[Path]) -> None:
    targets = [str(path.relative_to(build_dir)) for path in outputs]
    print("+ ninja -C " + str(build_dir) + " " + " ".join(targets), file=sys.stderr, flush=True)
    done = subprocess.run(["ninja", "-C", str(build_dir), *targets], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise CostFailed(f"building the profiling twins failed: {done.stdout[-1500:]}")


def replay_environment(conf: str | None = None) -> dict[str, str]:
    """The environment a replay under valgrind needs, in the as-built profile with `conf`'s
    entries (run sizes) after it (by default RUNSEL_CONF's): the replayer cannot re-execute
    itself there to add what it adds to RUNSEL_CONF (tools/trace/replay.cpp, kNoAgeing)."""
    conf = with_as_built(os.environ.get("RUNSEL_CONF") if conf is None else conf)
    if "huge_cache_ms:" not in conf:
        conf = ",".join(filter(None, [conf, NO_AGEING]))
    return {**os.environ, "RUNSEL_CONF": conf}


def replay_cost(trace: Path, build_dir: Path, container: str, records: int = DEFAULT_RECORDS,
                timeout: float = 600, windows: int | None = None,
                window_records: int = WINDOW_RECORDS, replayer: Path | None = None,
                library: Path | None = None, build: str = SHIPPED,
                conf: str | None = None) -> dict:
    """The cost of replaying the trace on one container (the replay loop only: reading and
    checking the trace is left out) in one build (BUILDS: its profiling twin as shipped,
    or hardened): its first `records` records, or with `windows`, that many windows of
    `window_records` records spread evenly over the whole trace. The block says what it
    covered: `records` counted, `trace_records`, `share` of the trace.
    replayer and library: another build of the container than its profiling twins (the
    container's own share is then None: its calls are inlined). conf: RUNSEL_CONF's
    entries after the as-built profile (replay_environment)."""
    replayer = replayer or build_dir / PROFILE_REPLAYER.format(twin(container, build))
    library = library or build_dir / PROFILE_LIBRARY.format(twin(container, build))
    if not replayer.is_file():
        raise CostFailed(f"no {replayer} on this machine (build_profile_twins builds it)")
    with tempfile.TemporaryDirectory(prefix="runsel-cost-") as scratch:
        out = Path(scratch) / "callgrind.out"
        if windows:
            what = ["--instr-atstart=no", "--collect-atstart=no", f"--callgrind-out-file={out}",
                    str(replayer), "--windows", str(windows), "--window-records",
                    str(window_records)]
        else:
            what = ["--collect-atstart=no", f"--toggle-collect={REPLAY_REGION}",
                    f"--callgrind-out-file={out}", str(replayer), "--records", str(records)]
        command = [*FIXED_LAYOUT, *CALLGRIND, *what, str(trace)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=replay_environment(conf))
        except subprocess.TimeoutExpired as failure:
            raise CostFailed(f"callgrind replay on {container}: timed out") from failure
        if done.returncode != 0 or not out.exists():
            raise CostFailed(f"callgrind replay on {container}: exit {done.returncode}: "
                             f"{done.stderr.strip()[-500:]}")
        cost = read_callgrind(out, str(library.resolve()))
    replayed = int(re.search(r"^replay ops=(\d+)", done.stdout, re.MULTILINE).group(1))
    window = re.search(r"^windows count=(\d+) records=(\d+) covered=(\d+) of=(\d+)",
                       done.stdout, re.MULTILINE)
    cost["scale"] = None
    if window:
        count, length, covered, total = map(int, window.groups())
        cost.update(records=covered, windows=count, window_records=length, trace_records=total)
    else:
        total = int(re.search(r"(\d+) records", done.stdout).group(1))
        cost.update(records=replayed, windows=None, window_records=None, trace_records=total)
    cost["share"] = round(cost["records"] / cost["trace_records"], 6) if cost["trace_records"] \
        else None
    for name in ("instructions", "d1_misses", "ll_misses"):
        value = cost.get("allocator_" + name)
        cost[f"allocator_{name}_per_call"] = (round(value / cost["calls"], 3)
                                              if value is not None and cost["calls"] else None)
    return cost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--windows", type=int, help="count this many windows spread evenly "
                        "over the whole trace instead of its first --records")
    parser.add_argument("--window-records", type=int, default=WINDOW_RECORDS)
    parser.add_argument("--container", action="append", default=[])
    args = parser.parse_args()
    containers = args.container or [variant.name for variant in runsel_variants(args.build_dir)]
    try:
        build_profile_twins(args.build_dir.resolve(), containers)
        costs = {c: {build: replay_cost(args.trace.resolve(), args.build_dir.resolve(), c,
                                        args.records, windows=args.windows,
                                        window_records=args.window_records, build=build)
                     for build in BUILDS}
                 for c in containers}
    except CostFailed as failure:
        sys.exit(f"cost: {failure}")
    print(json.dumps(costs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
