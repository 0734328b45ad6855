#!/usr/bin/env python3
"""meson test --suite style (style): the rules a reviewer would otherwise check by hand,
over the repository's own files (git ls-files; every file under the source root when
it is not a git checkout).

- clang_format: `clang-format --dry-run -Werror` over the C and C++ (.clang-format);
- ruff: `ruff check` over the Python (ruff.toml); tools/runsel installs ruff in .tools/;
- layers: memory/'s include layers. Each folder includes only its own and the folders
  below it: include (the public header) < platform < structures < containers < arena
  < frontend; and memory/ includes nothing from outside it. Above memory/, the house
  runs memory/ < experiments/ < tools/ (tools/runsel drives the harness): no C or C++
  file of experiments/ includes a header found only under tools/.

    tests/style/style_test.py [--root DIR] [--check NAME ...]

Each check prints every violation, then one line: "style: NAME: N problems" or "ok".
The exit status is 1 when any check found a problem, 2 when a tool is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CXX_SUFFIXES = (".h", ".c", ".cpp", ".h.in")
LAYERS = ("include", "platform", "structures", "containers", "arena", "frontend")
PUBLIC_HEADER = "runsel.h"  # memory/include/, reached without its folder's name
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SKIPPED_DIRS = {".git", ".tools", "results", "__pycache__"}


class ToolMissing(Exception):
    pass


def repository_files(root: Path) -> list[Path]:
    """The files git tracks under root, or every file when root is not a git checkout."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0:
        return [root / name for name in listed.stdout.decode().split("\0") if name]
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build")]
        found += [Path(folder) / name for name in files]
    return found


def tool(name: str) -> str:
    """The tool's path: .tools/bin (where tools/runsel installs it), else PATH."""
    local = ROOT / ".tools" / "bin" / name
    if local.is_file():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(f"{name} is not installed: run tools/runsel test, which installs it")
    return found


def check_clang_format(root: Path, files: list[Path]) -> list[str]:
    sources = [f for f in files if f.name.endswith(CXX_SUFFIXES) and f.suffix != ".in"]
    done = subprocess.run([tool("clang-format"), "--dry-run", "-Werror",
                           *map(str, sources)], capture_output=True, text=True, cwd=root)
    return [line for line in done.stderr.splitlines() if ": error: " in line]


def check_ruff(root: Path, files: list[Path]) -> list[str]:
    done = subprocess.run([tool("ruff"), "check", "--no-cache", "--output-format",
                           "concise", "--config", str(root / "ruff.toml"), str(root)],
                          capture_output=True, text=True, cwd=root)
    if done.returncode not in (0, 1):
        raise ToolMissing(f"ruff failed: {done.stderr.strip()[-300:]}")
    return [line for line in done.stdout.splitlines() if re.match(r"^\S+:\d+:\d+: ", line)]


def layer_of(included: str) -> str | None:
    """The memory/ folder an include names, or None when it names none."""
    if included == PUBLIC_HEADER:
        return "include"
    folder = included.split("/", 1)[0] if "/" in included else None
    return folder if folder in LAYERS else None


def check_layers(root: Path, files: list[Path]) -> list[str]:
    problems = []
    memory = root / "memory"
    for path in files:
        if not path.name.endswith(CXX_SUFFIXES) or memory not in path.parents:
            continue
        own = path.relative_to(memory).parts[0]
        rank = LAYERS.index(own) if own in LAYERS else None
        text = path.read_text(errors="replace")
        for match in INCLUDE.finditer(text):
            included = match.group(1)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(root)}:{line}"
            if "/" not in included and (path.parent / included).exists():
                continue  # its own folder's file, by its bare name
            layer = layer_of(included)
            if layer is None:
                problems.append(f'{where}: includes "{included}", outside memory/\'s layers')
            elif rank is not None and LAYERS.index(layer) > rank:
                problems.append(f'{where}: {own}/ includes "{included}", a layer above it '
                                f"({' < '.join(LAYERS)})")
    return problems


def check_experiments_below_tools(root: Path, files: list[Path]) -> list[str]:
    """experiments/'s includes that only a header under tools/ answers."""
    def names(folder: str) -> set[str]:
        return {f.name for f in files if f.name.endswith(CXX_SUFFIXES)
                and (root / folder) in f.parents}
    only_in_tools = names("tools") - names("experiments") - names("memory")
    problems = []
    for path in files:
        if not path.name.endswith(CXX_SUFFIXES) or (root / "experiments") not in path.parents:
            continue
        text = path.read_text(errors="replace")
        for match in INCLUDE.finditer(text):
            if match.group(1).rsplit("/", 1)[-1] in only_in_tools or "tools/" in match.group(1):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f'{path.relative_to(root)}:{line}: includes "{match.group(1)}", '
                                "a header of tools/ (experiments/ is below tools/)")
    return problems


CHECKS = {"clang_format": check_clang_format, "ruff": check_ruff,
          "layers": lambda root, files: (check_layers(root, files)
                                         + check_experiments_below_tools(root, files))}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the source tree to check")
    parser.add_argument("--check", action="append", choices=sorted(CHECKS), default=[],
                        help="only this check (repeatable)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    files = repository_files(root)
    status = 0
    for name in args.check or list(CHECKS):
        try:
            problems = CHECKS[name](root, files)
        except ToolMissing as missing:
            print(f"style: {name}: {missing}")
            status = max(status, 2)
            continue
        for problem in problems:
            print(problem)
        count = len(problems)
        print(f"style: {name}: " + (f"{count} problem{'s' * (count != 1)}" if count else "ok"))
        if problems:
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
