"""Where `tools/runsel report` is: one line as each step starts and one as it ends, with
the time since the report began and an estimate of the time left, and the closing lines
(the short answer, the report's path, the total time). Standard library only: the command
line (cli_report.py) prints the first steps before the harness, which needs scipy,
has started.

The steps, in order: installs (tools/runsel, before Python), build (meson and ninja),
then the harness's own: recordings, timed runs, replays (the deterministic steps: exact
replays and callgrind counts, begun beside the timed runs unless --no-overlap) and
statistics (the figures, then report.md, report.html and the pictures).

The time left is the sum of the estimates of the steps still to come, taken from:
  - the previous results.json in the output directory, when it was a run of the same
    kind (--quick or not, the same repetitions and scale): each harness step's wall
    seconds there (results.json's phase_seconds);
  - else the fixed estimates below (ESTIMATES), each step's seconds on a quiet 2-core
    machine;
  - and for the build, ninja's count of the commands it still has to run (a dry run,
    ninja -n) at BUILD_SECONDS_PER_COMMAND, or the fixed estimate of a fresh build when
    the build directory is not configured yet.
The command line and the harness run in two processes: the report's start (an epoch
time, STARTED_VARIABLE) passes from one to the other in the environment; each computes
the same estimates from the same file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

STEPS = ("installs", "build", "recordings", "timed runs", "replays", "statistics")
# The harness's steps as results.json's phase_seconds names them (phases.PhaseClock).
PHASES = {"recordings": "recordings", "timed runs": "timed runs",
          "replays": "deterministic steps", "statistics": "statistics"}
STARTED_VARIABLE = "RUNSEL_REPORT_STARTED"  # time.time() when tools/runsel report began
INSTALL_VARIABLE = "RUNSEL_INSTALL_SECONDS"  # what tools/runsel's installs took

# Each step's seconds on a quiet 2-core machine, the packages installed, the recordings
# made afresh (a first run has none cached); a later run of the same kind estimates from
# its predecessor's results.json instead. The default run's harness steps: a default
# report measured on a quiet machine (2026-11-26; recordings cached, timed runs 483 s,
# deterministic steps 664, statistics 1.4) with the recordings made afresh (284 s, on a
# loaded machine). --quick's: 90 s in all, measured with everything recorded afresh
# (2026-11-27, load 1.3-1.9), split as a --quick run's quiet estimates split (recordings
# 21 s, timed runs 30, replays 36, statistics 1, plus the report's writing). A fresh
# build: 526 ninja commands, 718 s at load 7 beside another build (1.4 s each).
# "statistics" includes writing the report and drawing its pictures.
ESTIMATES = {
    "default": {"installs": 0.0, "build": 600.0, "recordings": 285.0, "timed runs": 485.0,
                "replays": 665.0, "statistics": 12.0},
    "quick": {"installs": 0.0, "build": 600.0, "recordings": 25.0, "timed runs": 30.0,
              "replays": 25.0, "statistics": 10.0},
}
# Writing the report and drawing its pictures, after results.json's "statistics" phase.
REPORT_WRITING_SECONDS = 10.0
# One ninja command (a compile or a link) on 2 quiet cores, averaged over a fresh build.
BUILD_SECONDS_PER_COMMAND = 1.1

PREFIX = "=="


def clock(seconds: float) -> str:
    """0:07, 3:05, 1:02:09."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    return (f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours
            else f"{rest // 60}:{rest % 60:02d}")


def previous_run(out: Path, quick: bool, repeat: int, scale: float) -> dict[str, float] | None:
    """The harness steps' wall seconds of the results.json in `out`, when that run was of
    the same kind (None otherwise, or when there is none or it cannot be read)."""
    try:
        previous = json.loads((out / "results.json").read_text())
        settings, phases = previous["settings"], previous["phase_seconds"]
        if (bool(settings.get("quick")) != quick or settings.get("repeat") != repeat
                or settings.get("scale") != scale):
            return None
        found = {step: float(phases[phase]) for step, phase in PHASES.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    found["statistics"] += REPORT_WRITING_SECONDS
    return found


def estimates(out: Path, quick: bool, repeat: int, scale: float) -> tuple[dict[str, float], str]:
    """Each step's estimated seconds and where the harness steps' come from."""
    fixed = dict(ESTIMATES["quick" if quick else "default"])
    previous = previous_run(out, quick, repeat, scale)
    if previous is None:
        return fixed, "fixed estimates for a quiet 2-core machine (harness/progress.py)"
    return {**fixed, **previous}, f"the last run's times ({out / 'results.json'})"


def build_estimate(build_dir: Path, outputs: list[str] | None,
                   quick: bool) -> tuple[float, str]:
    """The build's seconds and what they rest on: ninja's count of the commands it would
    run to make `outputs` (paths under build_dir), or a fresh build's fixed estimate when
    the directory is not configured, `outputs` is None (not known) or ninja cannot say."""
    fresh = ESTIMATES["quick" if quick else "default"]["build"]
    if outputs is None or not (build_dir / "build.ninja").exists():
        return fresh, "meson setup, then ninja: a fresh build's estimate"
    try:
        dry = subprocess.run(["ninja", "-C", str(build_dir), "-n", *outputs],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return fresh, "ninja, which cannot say what it will do: a fresh build's estimate"
    # A dry run that would regenerate build.ninja (a meson.build changed) stops there, so
    # it cannot count the rest.
    if dry.returncode != 0 or "Regenerating build files" in dry.stdout:
        return fresh, "ninja, after regenerating its build files: a fresh build's estimate"
    counts = re.findall(r"^\[\d+/(\d+)\]", dry.stdout, re.MULTILINE)
    commands = int(counts[-1]) if counts else 0
    return (commands * BUILD_SECONDS_PER_COMMAND,
            f"ninja, {commands} command{'s' if commands != 1 else ''} to run")


class Progress:
    """Prints the progress lines of one report, counting from its start (STARTED_VARIABLE,
    else now), with each step's estimated seconds and where they come from."""

    def __init__(self, estimated: dict[str, float], source: str, stream=None):
        self.estimated, self.source = dict(estimated), source
        self.stream = stream or sys.stdout
        self.started = started_at()
        self.since = ("tools/runsel report began" if STARTED_VARIABLE in os.environ
                      else "this program began")
        self.step_started: dict[str, float] = {}
        self.took: dict[str, float] = {}

    def left(self, after: str, including: bool) -> float:
        """The estimated seconds of the steps from `after` on (with it, or only the later
        ones); the current step counts what remains of its estimate."""
        index = STEPS.index(after)
        total = sum(self.estimated.get(step, 0.0) for step in STEPS[index + 1:])
        if including:
            spent = time.time() - self.step_started.get(after, time.time())
            total += max(0.0, self.estimated.get(after, 0.0) - spent)
        return total

    def line(self, step: str, what: str, including: bool) -> None:
        number = STEPS.index(step) + 1
        elapsed = time.time() - self.started
        print(f"{PREFIX} [{number}/{len(STEPS)}] {step}: {what}; {clock(elapsed)} elapsed, "
              f"about {clock(self.left(step, including))} left", file=self.stream, flush=True)

    def start(self, step: str, note: str = "", estimate: float | None = None) -> None:
        """The line of a step's start; `estimate` replaces the step's estimate (the build's,
        once ninja has said how much it will do)."""
        if estimate is not None:
            self.estimated[step] = estimate
        self.step_started[step] = time.time()
        self.line(step, "started" + (f" ({note})" if note else ""), including=True)

    def end(self, step: str, note: str = "", seconds: float | None = None) -> None:
        """The line of a step's end (`seconds`: how long it took, when it did not start in
        this process)."""
        took = seconds if seconds is not None else \
            time.time() - self.step_started.get(step, time.time())
        self.took[step] = took
        self.line(step, f"done in {clock(took)}" + (f" ({note})" if note else ""),
                  including=False)

    def elapsed(self) -> float:
        return time.time() - self.started


def started_at() -> float:
    """When the report began: STARTED_VARIABLE (set by tools/runsel), else now."""
    try:
        return float(os.environ[STARTED_VARIABLE])
    except (KeyError, ValueError):
        return time.time()


def closing(short_answer: str, written: list[Path], elapsed: float,
            since: str = "tools/runsel report began") -> str:
    """The last lines of a report: the short answer, where the report is (report.html,
    report.md, results.json), the total time (Progress.elapsed(), Progress.since)."""
    where = "\n".join(f"{label:<9}{path}" for label, path in
                      zip(("report:", "", "results:"), written))
    return (f"\n{short_answer.replace('**', '')}\n\n{where}\n"
            f"total:   {clock(elapsed)} ({elapsed:.0f} s since {since})")
