#!/usr/bin/env python3
"""Instructions per malloc/free pair of malloc_bench's pair loops, from
callgrind, for allocators given as NAME=PATH (LD_PRELOAD), with each NAME's
difference to the first.

pair_loops.c is compiled once (cc -O2). For each allocator and loop, callgrind
counts measured_loop (and all it calls) at 2N and N iterations, with real
malloc/free and with the no-op pair; instructions per pair are
((Ir(2N) - Ir(N)) - (noop(2N) - noop(N))) / N, so start-up, the ballast and
the loop's own instructions cancel. Deterministic: a rerun gives the same
figures.

  experiments/bench/pair_instructions.py base=/work/wt-base/build/libmalloc-lifo.so \\
      new=build/libmalloc-lifo.so --loops ring/64,imm/64
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOPS = "ring/16,ring/64,ring/1024,imm/16,imm/64,imm/1024"


def total_ir(program: Path, preload: str | None, loop: str, iterations: int, kind: str,
             scratch: Path) -> int:
    mode, size = loop.split("/")
    out = scratch / "callgrind.out"
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = preload
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    "--collect-atstart=no", "--toggle-collect=measured_loop",
                    str(program), mode, size, str(iterations), kind],
                   env=env, check=True, capture_output=True)
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    sys.exit(f"pair_instructions: no totals in callgrind's output for {loop}")


def per_pair(program: Path, preload: str, loop: str, iterations: int, scratch: Path) -> float:
    real = (total_ir(program, preload, loop, 2 * iterations, "real", scratch)
            - total_ir(program, preload, loop, iterations, "real", scratch))
    noop = (total_ir(program, preload, loop, 2 * iterations, "noop", scratch)
            - total_ir(program, preload, loop, iterations, "noop", scratch))
    return (real - noop) / iterations


def allocator(spec: str) -> tuple[str, str]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"want NAME=PATH of an existing library, got {spec!r}")
    return name, str(Path(path).resolve())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("allocators", nargs="+", type=allocator, metavar="NAME=PATH")
    parser.add_argument("--loops", default=LOOPS, help=f"MODE/SIZE list (default {LOOPS})")
    parser.add_argument("--iterations", type=int, default=20000, help="N (default 20000)")
    args = parser.parse_args()
    loops = args.loops.split(",")
    for loop in loops:
        mode, _, size = loop.partition("/")
        if mode not in ("ring", "imm") or not size.isdigit():
            sys.exit(f"pair_instructions: bad loop {loop!r} (want ring/SIZE or imm/SIZE)")
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        program = scratch / "pair_loops"
        subprocess.run(["cc", "-O2", "-o", str(program), str(HERE / "pair_loops.c")], check=True)
        names = [name for name, _ in args.allocators]
        header = "| loop | " + " | ".join(names)
        header += "".join(f" | {n} − {names[0]}" for n in names[1:]) + " |"
        print(header)
        print("|---" * (1 + 2 * len(names) - 1) + "|")
        for loop in loops:
            counts = [per_pair(program, path, loop, args.iterations, scratch)
                      for _, path in args.allocators]
            cells = [f"{c:.1f}" for c in counts]
            cells += [f"{c - counts[0]:+.1f} ({100 * (c / counts[0] - 1):+.1f} %)"
                      for c in counts[1:]]
            print(f"| {loop} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
