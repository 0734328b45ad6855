"""What `tools/runsel replay` prints and keeps of the replays (cli_trace.py runs them): the
exact figures of every checkpoint set against the reference container, one table per
checkpoint and its bin_unused per size class, and the replayers' JSON documents read and
written as streams. Standard library only.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

# Exact figures set against the reference: committed and resident move with the purge
# policy's timing (dirty pages waiting for a purge); committed - dirty, bin_unused and the
# resident memory a forced purge leaves do not.
COMPARED = ["committed", "dirty", "committed-dirty", "resident", "purged", "bin_unused"]


def figure(point: dict, name: str) -> int | None:
    """A compared figure of one checkpoint; None when the replayer did not measure it."""
    if name == "committed-dirty":
        return point["committed"] - point["dirty"]
    if name == "purged":
        return point.get("purged_resident")
    return point[name]


def size_text(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def difference_text(value: int, reference: int | None) -> str:
    """Exact difference to the reference in bytes and percent: "+4096 (+0.27%)"."""
    if reference is None:
        return "-"
    delta = value - reference
    percent = f"{100 * delta / reference:+.2f}%" if reference else ("0%" if delta == 0 else "new")
    return f"{delta:+d} ({percent})"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths))
                     for row in rows)


def checkpoint_table(points: dict[str, dict], reference: str | None) -> str:
    """One row per container at one checkpoint (points: each container's figures there):
    the exact figures and their difference to the reference, in bytes and percent."""
    header = ["container"]
    for compared in COMPARED:
        header += [compared, f"vs {reference}" if reference else "-"]
    rows = [header]
    base = points[reference] if reference else None
    for name, point in points.items():
        row = [name]
        for compared in COMPARED:
            value = figure(point, compared)
            reference_value = figure(base, compared) if base else None
            row += ["-" if value is None else str(value),
                    "-" if value is None else difference_text(value, reference_value)]
        rows.append(row)
    return table(rows)


def bin_unused_table(points: dict[str, dict], reference: str | None) -> str:
    """bin_unused per size class at one checkpoint (classes unused everywhere left out);
    each point's "bins" as [size, unused_bytes] pairs."""
    names = list(points)
    rows = [["size"] + [f"{name}" + (f" vs {reference}" if reference and name != reference else "")
                        for name in names]]
    classes = [size for size, _ in points[names[0]]["bins"]]
    for position, size in enumerate(classes):
        values = [point["bins"][position][1] for point in points.values()]
        if not any(values):
            continue
        base = points[reference]["bins"][position][1] if reference else None
        row = [str(size)]
        for name, value in zip(names, values):
            row.append(str(value) if name == reference or base is None or value == base
                       else f"{value} {difference_text(value, base)}")
        rows.append(row)
    return table(rows) if len(rows) > 1 else "(no small runs)"


def print_comparison(replays: "ReplayFigures", reference: str | None) -> None:
    """Every checkpoint (marks, every N, peak, end), exact, each container against the
    reference, each followed by its bin_unused per size class: printed one checkpoint at
    a time, as read from every replay's figures."""
    for points in replays.points():
        point = next(iter(points.values()))
        title = f"{point['kind']} \"{point['name']}\"" if point["kind"] == "mark" else point["name"]
        print(f"## {title}: after {point['ops']} records, "
              f"{size_text(point['live_requested'])} live requested")
        print(checkpoint_table(points, reference))
        print("bin_unused per size class (bytes):")
        print(bin_unused_table(points, reference))


# --- replay documents, read and written as streams ----------------------------------------
#
# A replayer's document holds a checkpoint for every mark (about 6 KB of JSON each, 18 MB for
# a log of 3,000 jemalloc_stats() lines), so none is held whole: each is read one checkpoint
# at a time, as it is written, into a file of the figures the tables show, and copied to the
# --json output as it is read. What stays in memory is each document without its checkpoints.

JSON_SPACE = " \t\n\r"


class DocumentReader:
    """One JSON document {"key": value, ..., "checkpoints": [...], ...} read from a file
    one top-level member, and one checkpoint, at a time."""

    def __init__(self, path: Path):
        self.file = open(path, encoding="utf-8", errors="backslashreplace")
        self.decoder = json.JSONDecoder(strict=False)
        self.text, self.at, self.ended = "", 0, False

    def close(self) -> None:
        self.file.close()

    def more(self) -> bool:
        chunk = self.file.read(1 << 16)
        self.text, self.at = self.text[self.at:] + chunk, 0
        self.ended = not chunk
        return bool(chunk)

    def next_char(self) -> str:
        """The next character that is not white space (not consumed; "" at the end)."""
        while True:
            while self.at < len(self.text) and self.text[self.at] in JSON_SPACE:
                self.at += 1
            if self.at < len(self.text) or not self.more():
                return self.text[self.at:self.at + 1]

    def expect(self, char: str) -> None:
        if self.next_char() != char:
            raise ValueError(f"expected {char!r} in the replay's JSON, at "
                             f"{self.text[self.at:self.at + 40]!r}")
        self.at += 1

    def skip(self, char: str) -> bool:
        """Consumes char if it comes next."""
        if self.next_char() == char:
            self.at += 1
            return True
        return False

    def value(self):
        """The next JSON value, whole (a number only once something follows it)."""
        self.next_char()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, self.at)
                if end < len(self.text) or self.ended:
                    self.at = end
                    return value
            except json.JSONDecodeError:
                if self.ended:
                    raise
            self.more()

    def members(self):
        """Yields (key, value) for each top-level member; for "checkpoints", the value is
        an iterator over the checkpoints, which must be consumed before the next member."""
        self.expect("{")
        if self.skip("}"):
            return
        while True:
            key = self.value()
            self.expect(":")
            if key == "checkpoints":
                yield key, self.checkpoints()
            else:
                yield key, self.value()
            if self.skip("}"):
                return
            self.expect(",")

    def checkpoints(self):
        self.expect("[")
        if self.skip("]"):
            return
        while True:
            yield self.value()
            if self.skip("]"):
                return
            self.expect(",")


def indented(value, depth: int) -> str:
    """json.dumps(value, indent=1) as it reads `depth` levels down in a larger document."""
    return json.dumps(value, indent=1).replace("\n", "\n" + " " * depth)


class JsonOutput:
    """--json FILE: {"reference": ..., "trace": ..., "replays": {name: document, ...}}
    written byte for byte as json.dumps(..., indent=1) writes it, one replay and one
    checkpoint at a time, into a temporary file beside FILE that becomes FILE once every
    replay is in."""

    def __init__(self, out: Path, reference: str | None, trace: Path):
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
        self.partial = Path(name)
        self.file = os.fdopen(handle, "w")
        self.file.write("{\n \"reference\": " + indented(reference, 1) + ",\n \"trace\": " +
                        indented(str(trace), 1) + ",\n \"replays\": {")
        self.replays = 0

    def replay(self, name: str, members) -> None:
        """One replay's document: members as DocumentReader.members() yields them."""
        write = self.file.write
        write(("," if self.replays else "") + "\n  " + json.dumps(name) + ": {")
        self.replays += 1
        count = 0
        for key, value in members:
            write(("," if count else "") + "\n   " + json.dumps(key) + ": ")
            count += 1
            if key != "checkpoints":
                write(indented(value, 3))
                continue
            points = 0
            write("[")
            for point in value:
                write(("," if points else "") + "\n    " + indented(point, 4))
                points += 1
            write("\n   ]" if points else "]")
        write("\n  }" if count else "}")

    def finish(self) -> None:
        self.file.write("\n }\n}\n" if self.replays else "}\n}\n")
        self.file.close()
        os.replace(self.partial, self.out)

    def abandon(self) -> None:
        """Leaves no file behind (when the replays were refused or failed)."""
        self.file.close()
        self.partial.unlink(missing_ok=True)


# What the tables show of a checkpoint (figure(), checkpoint_table(), bin_unused_table()).
SHOWN = ("name", "kind", "ops", "live_requested", "committed", "dirty", "resident",
         "purged_resident", "bin_unused")


class ReplayFigures:
    """Every replay's figures, taken as each replay ends: its document without the
    checkpoints (kept), the shown figures of its checkpoints (a file of JSON lines, one a
    checkpoint) and, with --json, the whole document copied to the output. The replayer's
    own file is then deleted: memory and scratch space do not grow with the replays'
    checkpoints beyond those lines."""

    def __init__(self, scratch: Path, output: JsonOutput | None):
        self.scratch, self.output = scratch, output
        self.heads: dict[str, dict] = {}
        self.shown: dict[str, Path] = {}

    def add(self, name: str, document: Path, extra: dict | None = None) -> None:
        """Takes one replay's document (extra: members added at its end)."""
        head = {}
        shown = self.scratch / f"shown.{len(self.shown)}.jsonl"
        reader = DocumentReader(document)
        try:
            with open(shown, "w") as lines:
                def members():
                    for key, value in reader.members():
                        if key == "checkpoints":
                            head[key] = None
                            value = self.shown_while_read(value, lines)
                        else:
                            head[key] = value
                        yield key, value
                        if key == "checkpoints":
                            for _ in value:  # consumed here when no output read them
                                pass
                    yield from (extra or {}).items()
                if self.output:
                    self.output.replay(name, members())
                else:
                    for _ in members():
                        pass
        finally:
            reader.close()
        head.update(extra or {})
        document.unlink()
        self.heads[name], self.shown[name] = head, shown

    @staticmethod
    def shown_while_read(points, lines):
        for point in points:
            shown = {key: point[key] for key in SHOWN if key in point}
            shown["bins"] = [[bin_["size"], bin_["unused_bytes"]] for bin_ in point["bins"]]
            lines.write(json.dumps(shown, separators=(",", ":")) + "\n")
            yield point

    def points(self):
        """{name: shown figures} at each checkpoint in turn, every replay read in step."""
        files = [open(path) for path in self.shown.values()]
        try:
            for lines in zip(*files):
                yield {name: json.loads(line) for name, line in zip(self.shown, lines)}
        finally:
            for file in files:
                file.close()

