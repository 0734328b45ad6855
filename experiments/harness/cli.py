"""runsel's command line, `python3 -m harness` (tools/runsel, the front door, runs it with
experiments/ on PYTHONPATH once the Debian packages are in): configures and builds the
allocator, then runs one job. Each subcommand lives in a module of its own: report,
render and corpus (cli_report.py), test (cli_testing.py), bench (cli_bench.py), trace
and replay (cli_trace.py).

Every step prints the command it runs ("+ ..."), so any step can be repeated by hand
from the repository root. Standard library only: a fresh machine has it, and `--help`
needs nothing else.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from . import cli_bench, cli_report, cli_testing, cli_trace, options
from .build_steps import StepFailed, root_relative
from .interpreter import ROOT


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="tools/runsel",
        description="runsel: a mozjemalloc-style allocator with a choice of non-full run "
                    "containers. Installs what is missing, configures and builds with "
                    "meson, then runs the job.")
    commands = main.add_subparsers(dest="command", metavar="COMMAND")
    shared_options = [options.build_options()]
    cli_report.add_report(commands, shared_options)
    cli_report.add_render(commands)
    cli_report.add_corpus(commands, shared_options)
    cli_testing.add_test(commands, shared_options)
    cli_bench.add_bench(commands, shared_options)
    cli_trace.add_commands(commands, shared_options)
    return main


def main(argv: list[str] | None = None) -> int:
    arguments = parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = arguments.parse_args(argv)
    args.typed = argv[1:]  # the subcommand's arguments as typed (argv[0] names it)
    if args.command is None:
        arguments.print_help()
        return 2
    if hasattr(args, "build_dir"):
        args.build_dir = root_relative(args.build_dir)
    if hasattr(args, "out"):
        args.out = root_relative(args.out)
    for name in ("results", "render_out"):  # render's paths, from the caller's directory
        if getattr(args, name, None) is not None:
            setattr(args, name, root_relative(getattr(args, name)))
    os.chdir(ROOT)
    try:
        return args.handler(args)
    except StepFailed as failure:
        print(f"runsel {args.command}: {failure}", file=sys.stderr)
        return failure.exit_code
    except subprocess.CalledProcessError as failure:
        print(f"runsel {args.command}: {shlex.join(map(str, failure.cmd))} failed "
              f"({failure.returncode}): {(failure.stderr or '').strip()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
