"""Command-line options declared once, standard library only: the options of every
subcommand that builds (build_options: --container, --build-dir) and the report's
options (add_report_options), which tools/runsel's report subcommand (cli_report.py) and
the harness's own parser (harness.py) both take, so that `tools/runsel report` hands the
harness its options as they were typed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .presets import DEFAULT, QUICK, positive

BUILD_DIR = Path("build")  # from the repository root, as the commands run there
RESULTS_DIR = Path("results")
REPORT_DIR = RESULTS_DIR / "report"


class PresetText(dict):
    """A harness preset for help text: numbers as %g."""

    def __getitem__(self, key: str) -> str:
        value = super().__getitem__(key)
        return format(value, "g") if isinstance(value, float) else str(value)


def build_options() -> argparse.ArgumentParser:
    """Options shared by every subcommand that builds."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--container", metavar="NAME",
                         help="container of build/libmalloc.so (meson -Drun_container=NAME)")
    options.add_argument("--build-dir", type=Path, metavar="DIR",
                         help=f"meson build directory (default: {BUILD_DIR})")
    return options


def add_report_options(report: argparse.ArgumentParser) -> None:
    """The report's options (the harness adds --extend and --counters of its own)."""
    default, quick = PresetText(DEFAULT), PresetText(QUICK)
    report.add_argument("--quick", action="store_true",
                        help=f"a short run: {quick['repeat']} repetitions at scale "
                             f"{quick['scale']}")
    report.add_argument("--out", type=Path, default=REPORT_DIR, metavar="DIR",
                        help="output directory (default: %(default)s)")
    report.add_argument("--repeat", type=positive(int), metavar="N",
                        help="runs per workload and allocator, at least 1 (default: "
                             f"{default['repeat']}, quick: {quick['repeat']})")
    report.add_argument("--scale", type=positive(float), metavar="X",
                        help=f"workload size, above 0 (default: {default['scale']}, "
                             f"quick: {quick['scale']})")
    report.add_argument("--seed", type=int, default=1, metavar="N",
                        help="workload seed (default: 1)")
    report.add_argument("--instructions", choices=("auto", "perf", "callgrind", "off"),
                        default="auto", help="instruction counts: perf stat where the machine "
                        "has counters, else valgrind's callgrind (default: auto)")
    report.add_argument("--instruction-scale", type=positive(float), metavar="X",
                        help="workload size under callgrind (default: "
                             f"{default['instruction_scale']}, quick: "
                             f"{quick['instruction_scale']})")
    report.add_argument("--workload", action="append", default=[], metavar="NAME",
                        help="only this workload (repeatable); firefox: the recorded stock "
                             "Firefox session, replayed exactly")
    report.add_argument("--allocator", action="append", default=[], metavar="NAME",
                        help="only this allocator (repeatable): a container, glibc, jemalloc, "
                             "mimalloc or tcmalloc")
    report.add_argument("--trace", action="append", default=[], type=Path, metavar="PATH",
                        help="also replay this recorded trace (runsel trace -- CMD) as workload "
                             "replay:<file name> under every allocator (repeatable)")
    report.add_argument("--corpus-file", action="append", default=[], type=Path,
                        metavar="PATH", help="add a trace or a logalloc log (a Firefox "
                        "session's, a real program's) to the trace corpus the verdict judges "
                        "over, as one more group of replicates (repeatable)")
    report.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the replays and callgrind counts on this Dask scheduler "
                             "(tcp://HOST:8786): the report ships its tooling to every worker; "
                             "a worker needs Dask, valgrind, and the build and the traces at "
                             "the same paths (checked before the first task: exit 2 naming "
                             "the worker otherwise); default: a local Dask cluster on this "
                             "machine's cores")
    report.add_argument("--webkit-pages", type=positive(int), metavar="N",
                        help=f"pages each webkit run loads (default: {default['webkit_pages']}; "
                             f"the recorded run {default['webkit_record_pages']})")
    report.add_argument("--webkit-repeat", type=positive(int), metavar="N",
                        help="rounds of the webkit workload (default: "
                             f"{default['webkit_repeat']}, the other allocators "
                             f"{default['webkit_peer_repeat']}; quick: {quick['webkit_repeat']})")
    report.add_argument("--firefox-pages", type=positive(int), metavar="N",
                        help="pages of the recorded Firefox session (default: "
                             f"{default['firefox_pages']}; quick: {quick['firefox_pages']}); "
                             "recorded once per Firefox version and corpus (results/firefox/)")
    report.add_argument("--firefox-set", metavar="NAME",
                        help="the Firefox sessions the answer is judged on (a set of "
                             "experiments/firefox/sessions.json; default: "
                             f"{default['firefox_set']}; quick: {quick['firefox_set']}); only "
                             "the sessions not yet in results/firefox/corpus/ are recorded")
    report.add_argument("--timeout", type=positive(float), metavar="SECONDS",
                        help="per run (default: the harness's)")
    report.add_argument("--aslr", action="store_true",
                        help="keep address-space randomisation (default: off via setarch -R, "
                             "so runs of a variant choose alike)")
    report.add_argument("--thread-cache-all", action="store_true",
                        help="build every container with the thread cache beside it "
                             "(-Dthread_cache_containers=all), so that \"behind a thread "
                             "cache\" compares them all, and time the workloads under them "
                             "too (<container>@tcache; default: the four anchors, on the "
                             "corpus only)")
    report.add_argument("--no-thread-cache", action="store_true",
                        help="leave out the corpus replays behind a thread cache")
    report.add_argument("--no-overlap", action="store_true",
                        help="run the replays and callgrind counts after the timed runs, not "
                             "beside them on the core they leave free (longer)")
