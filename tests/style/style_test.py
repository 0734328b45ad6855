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
  file of experiments/ includes a header found only under tools/. And the Python
  tooling package's layers (experiments/harness/__init__.py's LAYERS): every module of
  the package listed once, each importing only modules of its own layer or of the layers
  below it, and no import cycle among them.

    tests/style/style_test.py [--root DIR] [--check NAME ...]

Each check prints every violation, then one line: "style: NAME: N problems" or "ok".
The exit status is 1 when any check found a problem, 2 when a tool is missing.
"""

from __future__ import annotations

import argparse
import ast
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
PACKAGE = Path("experiments") / "harness"  # the Python tooling, imported as `harness`
PACKAGE_NAME = PACKAGE.name


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


def package_layers(init: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The package's LAYERS (layer name, modules), from the top, as __init__.py lists them
    (read, not imported); [] when it lists none."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(target, ast.Name)
                                                and target.id == "LAYERS"
                                                for target in node.targets):
            return [(name, tuple(modules)) for name, modules in ast.literal_eval(node.value)]
    return []


def package_imports(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """(line, module) of every import of a module of the package in this file, those inside
    functions too: `from . import x`, `from .x import y`, `from harness(.x) import ...`,
    `import harness.x`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1 or (node.level == 0 and module.split(".")[0] == PACKAGE_NAME):
                inner = module.split(".")[1:] if node.level == 0 else module.split(".")
                inner = [part for part in inner if part]
                names = inner[:1] if inner else [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name.split(".")[1] for alias in node.names
                     if alias.name.startswith(PACKAGE_NAME + ".")]
        found += [(node.lineno, name) for name in names if name in modules]
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def check_package_layers(root: Path, files: list[Path]) -> list[str]:
    """experiments/harness/'s modules against its LAYERS: each listed once, each importing
    only its own layer or those below, no cycles."""
    folder = root / PACKAGE
    init = folder / "__init__.py"
    if init not in files:
        return []
    where = init.relative_to(root)
    paths = {path.stem: path for path in files if path.parent == folder and path.suffix == ".py"}
    layers = package_layers(init)
    problems = [] if layers else [f"{where}: no LAYERS: the package's layer map"]
    rank, names = {}, [name for name, _ in layers]
    for position, (layer, modules) in enumerate(layers):
        for module in modules:
            if module in rank:
                problems.append(f"{where}: {module} is listed twice in LAYERS")
            rank[module] = position
            if module not in paths:
                problems.append(f"{where}: LAYERS lists {module} ({layer}), which is not a "
                                "module of the package")
    graph = {}
    for module, path in sorted(paths.items()):
        shown = path.relative_to(root)
        if module not in rank:
            problems.append(f"{shown}: not in the layer map (LAYERS of {where})")
        imports = package_imports(path, set(paths))
        graph[module] = {imported for _, imported in imports if imported != module}
        for line, imported in imports:
            if module in rank and imported in rank and rank[imported] < rank[module]:
                problems.append(f"{shown}:{line}: {module} ({names[rank[module]]}) imports "
                                f"{imported}, of a layer above it ({names[rank[imported]]}; "
                                f"the layers: {' > '.join(names)})")
    for cycle in import_cycles(graph):
        problems.append("an import cycle: " + " <-> ".join(
            str(paths[module].relative_to(root)) for module in cycle))
    return problems


CHECKS = {"clang_format": check_clang_format, "ruff": check_ruff,
          "layers": lambda root, files: (check_layers(root, files)
                                         + check_experiments_below_tools(root, files)
                                         + check_package_layers(root, files))}


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
