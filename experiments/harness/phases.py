"""The report run's clock and machine: the wall and CPU seconds each step took (this
process, its runs and the Dask tasks), the figures results.json keeps of them, the tables
the run ends with, and the machine it ran on.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path

from . import fanout


class PhaseClock:
    """Wall and CPU seconds of each step. CPU counts this process, the runs it waited for
    and the Dask tasks (measured on the workers: fanout.task_cpu), so a loaded machine's
    report still tells what the steps cost; a local cluster's workers, reaped when it
    closes, count only through their tasks (their own start-up: fanout.reaped_cpu)."""

    def __init__(self):
        self.wall, self.cpu, self.task_cpu = {}, {}, {}
        self.beside = set()  # steps whose own work had Dask tasks running beside it
        self.started, self.cpu_started = time.monotonic(), self.cpu_now()
        self.tasks_started = fanout.tasks_cpu_total()

    @staticmethod
    def cpu_now() -> float:
        return sum(usage.ru_utime + usage.ru_stime for usage in
                   (resource.getrusage(resource.RUSAGE_SELF),
                    resource.getrusage(resource.RUSAGE_CHILDREN))) \
            - fanout.reaped_cpu() + fanout.tasks_cpu_total()

    def end(self, step: str, beside: bool = False) -> None:
        now, cpu, tasks = time.monotonic(), self.cpu_now(), fanout.tasks_cpu_total()
        self.wall[step] = round(now - self.started, 1)
        self.cpu[step] = round(cpu - self.cpu_started, 1)
        self.task_cpu[step] = round(tasks - self.tasks_started, 1)
        self.started, self.cpu_started, self.tasks_started = now, cpu, tasks
        if beside:
            self.beside.add(step)

    def quiet_estimate(self, workers: int) -> dict[str, float]:
        """Each step's wall seconds on an otherwise idle machine with `workers` Dask
        workers, estimated from its CPU: the Dask tasks' CPU divided among the workers,
        the rest (timed runs one at a time, recordings, this process) at full weight; for
        a step whose tasks ran beside its own work on workers - 1 cores, the longer of the
        two. It assumes a run's wall time is its CPU time when nothing else runs (a webkit
        run also waits on its pages: a little more) and that the tasks spread evenly."""
        def quiet(step: str) -> float:
            own, tasks = self.cpu[step] - self.task_cpu[step], self.task_cpu[step]
            if step in self.beside:
                return max(own, tasks / max(1, workers - 1))
            return own + tasks / max(1, workers)
        return {step: round(quiet(step), 1) for step in self.cpu}

    def table(self, workers: int) -> str:
        """The steps' wall, CPU, Dask tasks' CPU and quiet estimate, one line each."""
        quiet = self.quiet_estimate(workers)
        lines = [f"{'step':<20} {'wall s':>8} {'CPU s':>8} {'tasks s':>8} {'quiet s':>8}"]
        lines += [f"{step:<20} {self.wall[step]:>8.1f} {self.cpu[step]:>8.1f} "
                  f"{self.task_cpu[step]:>8.1f} {quiet[step]:>8.1f}" for step in self.wall]
        lines.append(f"{'total':<20} {sum(self.wall.values()):>8.1f} "
                     f"{sum(self.cpu.values()):>8.1f} {sum(self.task_cpu.values()):>8.1f} "
                     f"{sum(quiet.values()):>8.1f}")
        return "\n".join(lines)


def add_time_figures(document: dict, phases: PhaseClock, workers: int, local: bool) -> None:
    """results.json's figures of where the time went: each step's wall, CPU and Dask tasks'
    CPU seconds, its quiet estimate, the tasks by kind and a local cluster's own CPU."""
    document["phase_seconds"], document["phase_cpu_seconds"] = phases.wall, phases.cpu
    document["phase_task_cpu_seconds"] = phases.task_cpu
    document["phase_quiet_estimate_seconds"] = phases.quiet_estimate(workers)
    document["task_cpu_seconds"] = fanout.task_cpu()
    document["fanout_workers_cpu_seconds"] = round(
        max(0.0, fanout.reaped_cpu() - fanout.tasks_cpu_total()), 1) if local else None


def time_tables(document: dict, phases: PhaseClock, workers: int) -> str:
    """The end of the run's account of its time: steps, then tasks by kind."""
    own = document["fanout_workers_cpu_seconds"]
    return (f"where the time went (CPU: this process, its runs and the Dask tasks; quiet: "
            f"the estimate for an idle machine, tasks shared by {workers} workers):\n"
            + phases.table(workers) + "\n\n" + task_table(document["task_cpu_seconds"])
            + (f"\nthe local Dask workers' own CPU (start-up, bookkeeping): {own} s"
               if own is not None else ""))


def task_table(tasks: dict[str, dict]) -> str:
    """The Dask tasks' CPU seconds by kind: count, total, per task."""
    lines = [f"{'task':<28} {'count':>6} {'CPU s':>8} {'per task':>9}"]
    lines += [f"{kind:<28} {tally['tasks']:>6} {tally['cpu']:>8.1f} "
              f"{tally['cpu'] / max(1, tally['tasks']):>9.2f}"
              for kind, tally in tasks.items()]
    return "\n".join(lines)


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(),
            "load_average_1min": round(os.getloadavg()[0], 2)}

