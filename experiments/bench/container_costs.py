#!/usr/bin/env python3
"""Per-call instructions and simulated cache misses of every container, from
one valgrind (callgrind, cache simulation on) run of container_bench.

container_bench dumps callgrind's counters after each trial of each row, named
after the row, and prints how many calls the trial timed; this sums the dumps
and calls of each row and prints one Markdown table: instructions (Ir), L1 data
misses (D1mr + D1mw) and last-level misses (DLmr + DLmw) per call.

  experiments/bench/container_costs.py build/experiments/container_bench \
      --sizes 64,1024,16384 --out results/container_costs.md
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile

CALLS = ["insert_when_freed", "erase_when_full", "erase_when_empty", "pick", "fill_and_reopen"]
# What each row is called in the table (containers.md explains the rows).
LABELS = {"insert_when_freed": "insert", "erase_when_full": "erase (pick)",
          "erase_when_empty": "erase (any)", "pick": "pick",
          "fill_and_reopen": "current-run swap"}


TRIGGER = "desc: Trigger: Client Request: "


def run(bench: str, sizes: list[str], filter_containers: str, workdir: str) -> tuple[dict, dict]:
    pattern = f"^({filter_containers})(\\+page_map)?/({'|'.join(CALLS)})/({'|'.join(sizes)})/"
    command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--cache-sim=yes",
               "--D1=32768,8,64", "--LL=33554432,16,64",
               f"--callgrind-out-file={workdir}/callgrind.out",
               bench, f"--benchmark_filter={pattern}", "--benchmark_min_time=0.01",
               "--benchmark_repetitions=1"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"container_costs: valgrind exited with {done.returncode}: {done.stderr[-2000:]}")
    calls = collections.Counter()
    for line in done.stderr.splitlines():
        found = re.match(r"container_bench: (\S+): (\d+) timed iterations", line)
        if found:
            calls[found.group(1)] += int(found.group(2))
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path in glob.glob(f"{workdir}/callgrind.out*"):
        name, events, summary = None, None, None
        with open(path) as dump:
            for line in dump:
                if line.startswith(TRIGGER):
                    name = line[len(TRIGGER):].strip()
                elif line.startswith("events: "):
                    events = line.split()[1:]
                elif line.startswith("summary: ") or line.startswith("totals: "):
                    summary = [int(x) for x in line.split()[1:]]
        if name and events and summary:
            totals[name].update(dict(zip(events, summary)))
    return totals, calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench")
    parser.add_argument("--sizes", default="64,1024,16384")
    parser.add_argument("--containers", default=".*", help="regex of container names")
    parser.add_argument("--out")
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        totals, calls = run(args.bench, sizes, args.containers, workdir)
    names = sorted({name.split("/")[0].split("+")[0] for name in calls})
    header = ["call", "container", "hook in"] + [f"{n} runs: Ir / D1 / LL" for n in sizes]
    rows.append("| " + " | ".join(header) + " |")
    rows.append("| " + " | ".join(["---"] * 3 + ["---:"] * len(sizes)) + " |")
    for call in CALLS:
        for container in names:
            for placement in ("", "+page_map"):
                cells = []
                for n in sizes:
                    key = f"{container}{placement}/{call}/{n}"
                    if not calls.get(key):
                        cells.append("")
                        continue
                    t, c = totals[key], calls[key]
                    d1 = t["D1mr"] + t["D1mw"]
                    ll = t["DLmr"] + t["DLmw"]
                    cells.append(f"{t['Ir'] / c:.1f} / {d1 / c:.2f} / {ll / c:.2f}")
                where = "page map" if placement else "run header"
                rows.append(f"| {LABELS[call]} | `{container}` | {where} | "
                            + " | ".join(cells) + " |")
    table = "\n".join(rows) + "\n"
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as out:
            out.write(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
