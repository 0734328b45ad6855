#!/usr/bin/env python3
"""meson test --suite harness: runs the harness in --quick mode into a temporary
directory, then checks its output: the files exist, every allocator is present for
every workload, the numbers are sane, runsel's stats identity holds, and rb_first,
array_heap, pairing_heap and every other container that picks alike (meson.build's
container table) make the same choices.

    experiments/harness/test_harness.py --build-dir build
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from allocators import built_same_choice_groups, runsel_variants, system_allocators  # noqa: E402

PICTURES = ("time_vs_memory.png", "resident_over_checkpoints.png", "timing_distributions.png",
            "bin_utilization.png")
IDENTITY_TERMS = ("allocated", "waste", "dirty", "bookkeeping", "bin_unused")


class Failures(list):
    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.append(message)


def check_files(out: Path, failures: Failures) -> None:
    for name in ("results.json", "report.md", "report.html", *PICTURES):
        failures.expect((out / name).is_file() and (out / name).stat().st_size > 0,
                        f"{name} missing or empty")
    page = (out / "report.html").read_text() if (out / "report.html").exists() else ""
    failures.expect(page.count("data:image/png;base64,") >= len(PICTURES),
                    "report.html does not embed every picture")


def check_allocators(results: dict, expected: list[str], failures: Failures) -> None:
    failures.expect(not results["missing_allocators"],
                    f"system allocators not installed: {results['missing_allocators']} "
                    "(tools/runsel installs libjemalloc2, libmimalloc2.0, libtcmalloc-minimal4)")
    failures.expect(not results["discarded"], f"runs discarded: {results['discarded'][:3]}")
    webkit = results["settings"]["webkit"]
    for workload, data in results["summary"].items():
        wanted, rounds = expected, results["settings"]["repeat"]
        if workload == "webkit":  # fewer rounds, and in --quick fewer allocators
            wanted = expected if webkit["allocators"] == "all" else webkit["allocators"]
            rounds = webkit["repeat"]
        missing = [name for name in wanted if name not in data["allocators"]]
        failures.expect(not missing, f"{workload}: no results for {missing}")
        for name, pair in data["allocators"].items():
            failures.expect(pair["runs"] == rounds,
                            f"{workload} × {name}: {pair['runs']} valid runs")


def check_numbers(results: dict, failures: Failures) -> None:
    for workload, data in results["summary"].items():
        for name, pair in data["allocators"].items():
            where = f"{workload} × {name}"
            failures.expect(0 < pair["median_seconds"] < 120, f"{where}: median time "
                            f"{pair['median_seconds']}")
            failures.expect(pair["peak_resident"] > 0, f"{where}: no resident memory")
            for point in pair["checkpoints"]:
                failures.expect(0 < point["resident"] < 8 << 30,
                                f"{where} {point['name']}: resident {point['resident']}")
                # Every block is written when allocated, so it is resident; there is no
                # upper bound: allocators that keep freed memory have huge ratios.
                if point["fragmentation"] is not None:
                    failures.expect(point["fragmentation"] > 0.8,
                                    f"{where} {point['name']}: fragmentation "
                                    f"{point['fragmentation']:.2f}")
            if pair["instructions"] is not None and results["settings"]["instructions"] != "off":
                failures.expect(pair["instructions"].get("instructions", 0) > 0,
                                f"{where}: instruction count {pair['instructions']}")
            for checkpoint, stats in pair["runsel"].items():
                gap = stats["committed"] - sum(stats[term] for term in IDENTITY_TERMS)
                failures.expect(gap == 0, f"{where} {checkpoint}: runsel identity off by {gap}")
            failures.expect(bool(pair["runsel"]) == (pair["identity"].startswith("runsel:")),
                            f"{where}: runsel stats present only under runsel")


def check_agreement(results: dict, groups: list[list[str]], failures: Failures) -> None:
    for check in results["checks"]:
        failures.expect(check["ok"], f"{check['workload']}: {check['check']}: {check['detail']}")
    if groups:
        deterministic = [w for w, data in results["summary"].items()
                         if all(pair["deterministic"] for pair in data["allocators"].values())]
        agreeing = {check["workload"] for check in results["checks"]
                    if check["check"].startswith("same choices") and check["ok"]}
        failures.expect(set(deterministic) <= agreeing,
                        f"no passing agreement check for {set(deterministic) - agreeing}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--keep", type=Path, help="write the output here instead of a temp dir")
    args = parser.parse_args()
    variants = [allocator.name for allocator in runsel_variants(args.build_dir)]
    expected = variants + [allocator.name for allocator in system_allocators()[0]]
    with tempfile.TemporaryDirectory(prefix="runsel-harness-") as scratch:
        out = args.keep or Path(scratch)
        command = [sys.executable, str(HERE / "harness.py"), "--quick", "--build-dir",
                   str(args.build_dir), "--out", str(out)]
        print("+ " + " ".join(command), flush=True)
        code = subprocess.call(command)
        failures = Failures()
        failures.expect(code == 0, f"harness exited with {code}")
        check_files(out, failures)
        if (out / "results.json").exists():
            results = json.loads((out / "results.json").read_text())
            failures.expect("webkit" in results["summary"], "no webkit workload in --quick")
            check_allocators(results, expected, failures)
            check_numbers(results, failures)
            check_agreement(results, built_same_choice_groups(args.build_dir, variants),
                            failures)
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"harness test: {len(failures)} failure(s); allocators expected: {', '.join(expected)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
