"""The `trace` and `replay` subcommands of tools/runsel (SPEC §5).

  runsel trace [--output PATTERN] -- CMD ARG...   records CMD's allocation calls
  runsel replay [--every N] [--variant NAME] TRACE replays TRACE on every container

runsel_cli.py registers them with add_commands(); `cli` is that module, whose
helpers (configure, build, run, show, StepFailed...) these commands use.
Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import subprocess
import time
from pathlib import Path

RECORDER_TARGET = "runsel-trace"  # build/tools/librunsel-trace.so
REPLAYER_PREFIX = "runsel-replay-"  # build/tools/runsel-replay-<container>
TRACES_DIR = Path("results/traces")
FIGURES = ["mapped", "committed", "allocated", "waste", "dirty", "bookkeeping", "bin_unused"]


def caller_directory() -> Path:
    """Where the user typed the command (runsel_cli moves to the repository root)."""
    return Path(os.environ.get("PWD", os.getcwd()))


def from_caller(path: str) -> Path:
    return (caller_directory() / path).resolve()


def targets_named(cli, build_dir: Path, wanted) -> dict[str, Path]:
    """{target name: output path} of the build's targets for which wanted(name) holds."""
    return {target["name"]: Path(target["filename"][0]) for target in cli.build_targets(build_dir)
            if wanted(target["name"])}


# --- trace --------------------------------------------------------------------------------


def command_trace(cli, args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    if not command:
        raise cli.StepFailed("nothing to trace: give a command after --")
    cli.configure(args.build_dir, cli.requested_options(args))
    recorder = targets_named(cli, args.build_dir, lambda name: name == RECORDER_TARGET)
    if not recorder:
        raise cli.StepFailed(f"meson defines no {RECORDER_TARGET} library (tools/meson.build)")
    library = next(iter(recorder.values()))
    cli.build(args.build_dir, [library])

    if args.output:
        pattern = from_caller(args.output)
    else:
        pattern = cli.ROOT / TRACES_DIR / (Path(command[0]).name + ".%p")
    pattern.parent.mkdir(parents=True, exist_ok=True)
    preload = " ".join(filter(None, [str(library.resolve()), os.environ.get("LD_PRELOAD")]))
    changes = {"LD_PRELOAD": preload, "RUNSEL_TRACE": str(pattern)}
    if "PYTHONMALLOC" not in os.environ:  # python's own pools would hide its objects
        changes["PYTHONMALLOC"] = "malloc"
    cli.show(command, changes)
    started = time.time()
    child = subprocess.Popen(command, cwd=caller_directory(), env={**os.environ, **changes})
    code = child.wait()
    if code < 0:  # killed by a signal: report it the way a shell would
        code = 128 - code

    written = [Path(name) for name in glob.glob(str(pattern).replace("%p", "*") + "*")
               if Path(name).stat().st_mtime >= started - 1]
    main_trace = Path(str(pattern).replace("%p", str(child.pid)))
    print(f"# {shlex.join(command)} exited with {code}")
    for path in sorted(written, key=lambda path: path != main_trace):
        role = "the command" if path == main_trace else "a child process"
        print(f"trace of {role}: {path} ({path.stat().st_size} bytes)")
    if main_trace.exists():
        print(f"next: tools/runsel replay {os.path.relpath(main_trace, caller_directory())}")
    return code


# --- replay -------------------------------------------------------------------------------


def end_figures(output: str) -> dict[str, int]:
    """The figures of the replayer's `end` and final `resident` lines."""
    figures = {}
    for line in output.splitlines():
        words = line.split()
        if words and words[0] in ("end", "resident", "replay"):
            for word in words[1:]:
                name, _, value = word.partition("=")
                key = "resident" if words[0] == "resident" and name == "bytes" else name
                if value.isdigit():
                    figures[key] = int(value)
    # The replayer's own slot table is anonymous memory too: not the program's.
    figures["resident"] = max(0, figures.get("resident", 0) - figures.get("slot_table", 0))
    return figures


def size_text(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def comparison_table(results: dict[str, dict[str, int]]) -> str:
    """One row per container: the end figures, and allocated / committed."""
    columns = FIGURES + ["resident"]
    header = ["container"] + columns + ["used/committed"]
    rows = [header]
    for name, figures in results.items():
        committed = figures.get("committed", 0)
        used = f"{100 * figures.get('allocated', 0) / committed:.1f}%" if committed else "-"
        rows.append([name] + [size_text(figures.get(column, 0)) for column in columns] + [used])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths))
                     for row in rows)


def command_replay(cli, args: argparse.Namespace) -> int:
    trace = from_caller(args.trace)
    if not trace.exists():
        raise cli.StepFailed(f"no such trace: {trace}")
    cli.configure(args.build_dir, cli.requested_options(args))
    replayers = {name[len(REPLAYER_PREFIX):]: path for name, path in targets_named(
        cli, args.build_dir, lambda name: name.startswith(REPLAYER_PREFIX)).items()}
    if args.variant:
        unknown = set(args.variant) - set(replayers)
        if unknown:
            raise cli.StepFailed(f"no replayer for: {', '.join(sorted(unknown))}")
        replayers = {name: path for name, path in replayers.items() if name in args.variant}
    if not replayers:
        raise cli.StepFailed(f"meson defines no {REPLAYER_PREFIX}<container> (tools/meson.build)")
    replayers = dict(sorted(replayers.items(), key=lambda item: item[0] != cli.REFERENCE_VARIANT))
    cli.build(args.build_dir, list(replayers.values()))

    results = {}
    for name, program in replayers.items():
        options = (["--every", str(args.every)] if args.every else []) + (
            ["--partial"] if args.partial else [])
        command = [str(program), *options, str(trace)]
        cli.show(command)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 2:  # malformed: the same for every container
            raise cli.StepFailed(done.stderr.strip())
        if done.returncode != 0:
            raise cli.StepFailed(f"{program} exited with {done.returncode}: {done.stderr.strip()}")
        print(done.stdout, end="\n", flush=True)
        results[name] = end_figures(done.stdout)
    print(f"# {trace}: end of replay, every container")
    print(comparison_table(results))
    print("resident: the replayer's anonymous resident memory less its slot table; "
          "used/committed: allocated / committed")
    return 0


# --- registration -------------------------------------------------------------------------


def add_commands(commands, parents: list[argparse.ArgumentParser], cli) -> None:
    """Adds `trace` and `replay` to runsel_cli's subcommands."""
    trace = commands.add_parser(
        "trace", parents=parents, help="record a program's allocation calls",
        description="Runs CMD with build/tools/librunsel-trace.so preloaded (and "
                    "PYTHONMALLOC=malloc unless set), recording every allocation call into a "
                    f"trace per process (default: {TRACES_DIR}/<program>.<pid>). "
                    "Format: tools/trace/format.md. Exit code is CMD's.")
    trace.add_argument("--output", metavar="PATTERN",
                       help="trace file; %%p becomes the pid (default: "
                            f"{TRACES_DIR}/<program>.%%p)")
    trace.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARG...",
                       help="the program to record and its arguments")
    trace.set_defaults(handler=lambda args: command_trace(cli, args))

    replay = commands.add_parser(
        "replay", parents=parents, help="replay a trace on every container and compare",
        description="Replays TRACE with build/tools/runsel-replay-<container> for every "
                    "container (in recorded order, on one thread), prints each one's stats and "
                    "bin table, then a table comparing their end figures. A malformed trace is "
                    "rejected with its byte offset.")
    replay.add_argument("trace", metavar="TRACE", help="a trace written by `runsel trace`")
    replay.add_argument("--every", type=int, default=0, metavar="N",
                        help="also print stats every N operations")
    replay.add_argument("--partial", action="store_true",
                        help="accept a trace without its end record (its process was killed)")
    replay.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="only this container (repeatable; default: all)")
    replay.set_defaults(handler=lambda args: command_replay(cli, args))
