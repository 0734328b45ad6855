#!/usr/bin/env python3
"""The harness: runs every workload under every allocator (each runsel variant, glibc,
jemalloc, mimalloc, tcmalloc), interleaved and repeated, checks which allocator served
each run, counts instructions, and writes results.json plus the report (Markdown and
self-contained HTML with pictures). `tools/runsel report` builds, then runs this.

    experiments/harness/harness.py [--quick] [--out DIR] [--build-dir DIR] ...
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-matplotlib installs


def ensure_matplotlib() -> None:
    """Re-runs this script under Debian's python3 when this interpreter lacks matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and \
                os.path.exists(SYSTEM_PYTHON):
            os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, __file__, *sys.argv[1:]])
        sys.exit("harness: matplotlib is missing (Debian: apt-get install python3-matplotlib)")


ensure_matplotlib()
sys.path[:0] = [str(HERE), str(ROOT / "tools")]

import allocators as allocator_discovery  # noqa: E402
import metrics  # noqa: E402
import runs  # noqa: E402
import runsel_report  # noqa: E402

WORKLOAD_PREFIX = "workload_"
REPLAY = "replay"  # workload_replay needs a trace: one replay:<name> workload per --trace
WEBKIT = "webkit"  # a browser engine: experiments/webkit/driver.py under Debian's python3
WEBKIT_DRIVER = ROOT / "experiments" / "webkit" / "driver.py"
# Run lengths: the default takes about 10 minutes on a 2-core machine, --quick about 1.
# A webkit run takes seconds per page, so it runs fewer rounds and pages than the others;
# --quick loads 2 pages under three allocators (a runsel variant pair and a peer).
DEFAULT = {"repeat": 21, "scale": 1.0, "instruction_scale": 0.05,
           "webkit_pages": 6, "webkit_repeat": 3, "webkit_allocators": ()}
QUICK = {"repeat": 3, "scale": 0.1, "instruction_scale": 0.01,
         "webkit_pages": 2, "webkit_repeat": 1, "webkit_allocators": ("rb_first", "lifo", "jemalloc")}
KEEP_CHUNK_MAPS = ("rb_first", "lifo")  # the occupancy pictures compare these two


def discover_workloads(build_dir: Path) -> list[runs.Workload]:
    """The workload programs the build defines, in meson's order."""
    targets = json.loads(subprocess.run(["meson", "introspect", str(build_dir), "--targets"],
                                        check=True, capture_output=True, text=True).stdout)
    found = [runs.Workload(target["name"][len(WORKLOAD_PREFIX):], Path(target["filename"][0]))
             for target in targets
             if target["type"] == "executable" and target["name"].startswith(WORKLOAD_PREFIX)]
    missing = [workload.program for workload in found if not workload.program.exists()]
    if missing:
        sys.exit(f"harness: not built: {', '.join(map(str, missing))} (run ninja -C {build_dir})")
    return found


def trace_workloads(programs: list[runs.Workload], traces: list[Path]) -> list[runs.Workload]:
    """One replay:<file name> workload per --trace, after checking that each trace is
    well formed (workload_replay validates the whole file before replaying)."""
    replayer = next((w.program for w in programs if w.name == REPLAY), None)
    if traces and replayer is None:
        sys.exit("harness: --trace needs the workload_replay program (run ninja)")
    found, names = [], set()
    for trace in traces:
        trace = trace.resolve()
        if not trace.is_file():
            sys.exit(f"harness: --trace {trace}: no such file")
        check = subprocess.run([str(replayer), "--trace", str(trace), "--scale", "1e-12",
                                "--no-introspection"], capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(f"harness: --trace {trace}: {check.stderr.strip()}")
        name, suffix = f"{REPLAY}:{trace.name}", 2
        while name in names:
            name, suffix = f"{REPLAY}:{trace.name}#{suffix}", suffix + 1
        names.add(name)
        found.append(runs.Workload(name, replayer, ("--trace", str(trace))))
    return found


def webkit_workload(args: argparse.Namespace) -> runs.Workload:
    """The browser engine: the driver loads args.webkit_pages pages of its pinned corpus;
    no instruction counts (a browser under callgrind would take hours)."""
    arguments = (str(WEBKIT_DRIVER), "--pages", str(args.webkit_pages),
                 "--time-limit", str(max(120, 60 * args.webkit_pages)))
    return runs.Workload(WEBKIT, Path(SYSTEM_PYTHON), arguments, repeat=args.webkit_repeat,
                         allocators=args.webkit_allocators, counted=False)


def check_webkit() -> None:
    """Fails early (not after the first runs) when the browser or its corpus is missing."""
    check = subprocess.run([SYSTEM_PYTHON, str(WEBKIT_DRIVER), "--check"], capture_output=True,
                           text=True)
    if check.returncode != 0:
        sys.exit(f"harness: the webkit workload cannot run: {check.stderr.strip()}\n"
                 f"(leave it out with --workload NAME for the others)")


def pick(items: list, wanted: list[str], what: str) -> list:
    if not wanted:
        return items
    if what == "workload" and REPLAY in wanted:  # --workload replay: every trace
        wanted = [name for name in wanted if name != REPLAY] + \
            [item.name for item in items if item.name.startswith(REPLAY + ":")]
    unknown = set(wanted) - {item.name for item in items}
    if unknown:
        sys.exit(f"harness: no such {what}: {', '.join(sorted(unknown))}")
    return [item for item in items if item.name in wanted]


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(),
            "load_average_1min": round(os.getloadavg()[0], 2)}


def trim_chunk_maps(summary: dict) -> None:
    """Chunk maps are large; results.json keeps those the report draws."""
    for workload in summary["workloads"].values():
        for name, pair in workload["allocators"].items():
            if name not in KEEP_CHUNK_MAPS:
                pair["chunk_maps"] = {}


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "report",
                        help="directory for results.json, report.md, report.html, pictures")
    parser.add_argument("--quick", action="store_true",
                        help=f"about a minute: {QUICK['repeat']} repetitions at scale "
                             f"{QUICK['scale']}")
    parser.add_argument("--repeat", type=int, help="repetitions per (workload, allocator)")
    parser.add_argument("--scale", type=float, help="workload size (1.0 = default run)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--instructions", choices=("auto", "perf", "callgrind", "off"),
                        default="auto", help="instruction counter; auto: perf when the "
                        "machine has counters, else callgrind (default: auto)")
    parser.add_argument("--instruction-scale", type=float,
                        help="workload size for callgrind runs (it is ~50x slower)")
    parser.add_argument("--workload", action="append", default=[], metavar="NAME")
    parser.add_argument("--trace", action="append", default=[], type=Path, metavar="PATH",
                        help="add a replay:<file name> workload replaying this recorded "
                             "trace (repeatable); --scale below 1 replays that fraction")
    parser.add_argument("--allocator", action="append", default=[], metavar="NAME")
    parser.add_argument("--webkit-pages", type=int, metavar="N",
                        help="pages of the webkit corpus each webkit run loads "
                             f"(default {DEFAULT['webkit_pages']}, --quick {QUICK['webkit_pages']})")
    parser.add_argument("--webkit-repeat", type=int, metavar="N",
                        help="rounds the webkit workload takes part in (default "
                             f"{DEFAULT['webkit_repeat']}, --quick {QUICK['webkit_repeat']})")
    parser.add_argument("--timeout", type=float, default=600, help="per run, seconds")
    parser.add_argument("--aslr", action="store_true",
                        help="keep address-space randomisation (default: runs use setarch -R "
                             "so every run of a variant sees the same address layout)")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else DEFAULT
    args.repeat = args.repeat or preset["repeat"]
    args.scale = args.scale or preset["scale"]
    args.instruction_scale = args.instruction_scale or preset["instruction_scale"]
    args.webkit_pages = args.webkit_pages or preset["webkit_pages"]
    args.webkit_repeat = min(args.repeat, args.webkit_repeat or preset["webkit_repeat"])
    args.webkit_allocators = () if args.allocator else preset["webkit_allocators"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    started = time.time()
    load_before = round(os.getloadavg()[0], 2)
    programs = discover_workloads(args.build_dir)
    workloads = pick([w for w in programs if w.name != REPLAY] + [webkit_workload(args)]
                     + trace_workloads(programs, args.trace), args.workload, "workload")
    if any(workload.name == WEBKIT for workload in workloads):
        check_webkit()
    system, missing = allocator_discovery.system_allocators()
    allocators = pick(allocator_discovery.runsel_variants(args.build_dir) + system,
                      args.allocator, "allocator")
    names = [allocator.name for allocator in allocators]
    print(f"harness: {len(workloads)} workloads × {len(allocators)} allocators × "
          f"{args.repeat} repetitions, scale {args.scale}", file=sys.stderr)
    print(f"harness: allocators: {', '.join(names)}"
          + (f" (not installed: {', '.join(missing)})" if missing else ""), file=sys.stderr)

    valid, discarded = runs.run_interleaved(workloads, allocators, args.repeat, args.scale,
                                            args.seed, args.timeout, not args.aslr)
    counter, counter_why = runs.choose_counter(args.instructions)
    print(f"harness: instructions: {counter_why}", file=sys.stderr)
    counts = ({} if counter == "off" else
              runs.run_instruction_counts(workloads, allocators, counter,
                                          args.instruction_scale if counter == "callgrind"
                                          else args.scale, args.seed, args.timeout))
    summary = metrics.summarize(valid, names, [workload.name for workload in workloads], counts,
                                allocator_discovery.same_choice_groups(args.build_dir))
    trim_chunk_maps(summary)
    results = {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "duration_seconds": round(time.time() - started, 1),
        "command": " ".join(["tools/runsel report", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {**machine(), "load_average_1min_at_start": load_before},
        "settings": {"repeat": args.repeat, "scale": args.scale, "seed": args.seed,
                     "quick": args.quick, "aslr": args.aslr, "instructions": counter,
                     "traces": {w.name: w.arguments[1] for w in workloads
                                if w.name.startswith(REPLAY + ":")},
                     "webkit": {"pages": args.webkit_pages, "repeat": args.webkit_repeat,
                                "allocators": list(args.webkit_allocators) or "all"},
                     "instructions_how": counter_why,
                     "instruction_scale": args.instruction_scale if counter == "callgrind"
                     else args.scale},
        "reference": allocator_discovery.REFERENCE,
        "allocators": [{"name": a.name, "runsel": a.runsel,
                        "preload": str(a.preload) if a.preload else None} for a in allocators],
        "missing_allocators": missing,
        "workloads": [workload.name for workload in workloads],
        "summary": summary["workloads"],
        "checks": summary["checks"],
        "discarded": discarded,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    markdown, html = runsel_report.write_report(results, args.out)
    print(runsel_report.summary_text(results))
    print(f"\nreport: {html}\n        {markdown}\nresults: {args.out / 'results.json'}")
    failed = [check for check in results["checks"] if not check["ok"]]
    return 1 if discarded or failed else 0


if __name__ == "__main__":
    sys.exit(main())
