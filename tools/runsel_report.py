"""What `tools/runsel report` shows: one function per table (results in, rows out) and
one per picture (experiments/harness/pictures.py), and three renderers (terminal text,
Markdown, self-contained HTML) that lay the same tables and pictures out.
Input is results.json as experiments/harness/harness.py writes it.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

MIB = 1 << 20
# runsel's stats figures that explain resident memory (memory/include/runsel.h).
STATS_FIGURES = ("committed", "allocated", "bin_unused", "waste", "dirty", "bookkeeping")


def mib(count: float | None) -> str:
    """MiB, one decimal; two below 10 MiB so small live sets still show."""
    if count is None:
        return "-"
    return f"{count / MIB:.1f}" if abs(count) >= 10 * MIB else f"{count / MIB:.2f}"


def delta_cell(delta: dict | None) -> str:
    if not delta:
        return "-"
    return f"{delta['percent']:+.1f} % [{delta['low']:+.1f}, {delta['high']:+.1f}]"


def instructions_cell(counted: dict | None) -> str:
    if not counted:
        return "-"
    return f"{counted['instructions'] / 1e6:.1f} M" if "instructions" in counted else "error"


def point_at(pair: dict, checkpoint: str) -> dict:
    return next(point for point in pair["checkpoints"] if point["name"] == checkpoint)


# --- tables: (title, headers, rows, note) ---------------------------------------------


def summary_table(results: dict):
    reference = results["reference"]
    headers = ["workload", "allocator", "median ms", f"time vs {reference} (95 % CI)",
               "instructions", "minor faults", "peak MiB", "MiB at key", "live MiB at key",
               "fragmentation at key"]
    rows = []
    for workload, data in results["summary"].items():
        key = data["key_checkpoint"]
        for name, pair in data["allocators"].items():
            point = point_at(pair, key)
            rows.append([f"{workload} ({key})" if not rows or rows[-1][0].split(" ")[0] != workload
                         else workload, name, f"{pair['median_seconds'] * 1e3:.1f}",
                         delta_cell(pair["delta_to_reference"]),
                         instructions_cell(pair["instructions"]), f"{pair['minor_faults']:.0f}",
                         mib(pair["peak_resident"]), mib(point["resident"]),
                         mib(point["live_requested"]),
                         "-" if point["fragmentation"] is None else f"{point['fragmentation']:.2f}"])
    settings = results["settings"]
    layout = ("address-space randomisation on" if settings.get("aslr")
              else "address-space randomisation off (setarch -R)")
    note = (f"Median of {settings['repeat']} interleaved runs at scale {settings['scale']}, "
            f"{layout}. "
            "Key = the checkpoint in brackets after the workload: its last one that still "
            "holds a live set (≥ 64 KiB). Fragmentation = (resident − resident at start) "
            "÷ live requested bytes. "
            f"Instructions: {settings['instructions_how']}"
            + (f", scale {settings['instruction_scale']}." if settings["instructions"] != "off"
               else "."))
    return "Summary", headers, rows, note


def checkpoints_table(results: dict, workload: str):
    data = results["summary"][workload]["allocators"]
    names = list(data)
    first = data[names[0]]
    headers = ["checkpoint", "live MiB", *[f"{name} MiB" for name in names]]
    rows = []
    for index, point in enumerate(first["checkpoints"]):
        rows.append([point["name"], mib(point["live_requested"]),
                     *[mib(data[name]["checkpoints"][index]["resident"])
                       if index < len(data[name]["checkpoints"]) else "-" for name in names]])
    return (f"{workload}: resident memory at each checkpoint", headers, rows,
            "Whole-process resident set (statm), median over repetitions.")


def runsel_stats_table(results: dict, workload: str):
    data = results["summary"][workload]
    key = data["key_checkpoint"]
    headers = ["variant", *[f"{figure} MiB" for figure in STATS_FIGURES], "runs", "non-full runs",
               "purges"]
    rows = []
    for name, pair in data["allocators"].items():
        stats = pair["runsel"].get(key)
        if not stats:
            continue
        rows.append([name, *[mib(stats[figure]) for figure in STATS_FIGURES],
                     str(sum(b["runs"] for b in stats["bins"])),
                     str(sum(b["nonfull_runs"] for b in stats["bins"])), str(stats["purges"])])
    return (f"{workload}: runsel's stats at {key}", headers, rows,
            "committed = allocated + bin_unused + waste + dirty + bookkeeping (runsel_stats).")


def bins_table(results: dict, workload: str):
    """Runs and non-full runs per size class and variant at the key checkpoint."""
    data = results["summary"][workload]
    key = data["key_checkpoint"]
    variants = {name: pair["runsel"][key]["bins"] for name, pair in data["allocators"].items()
                if key in pair["runsel"]}
    if not variants:
        return f"{workload}: runs per bin", [], [], ""
    headers = ["size", *[f"{name} runs / non-full / in use %" for name in variants]]
    rows = []
    for index, bin_ in enumerate(next(iter(variants.values()))):
        cells = []
        for bins in variants.values():
            b = bins[index]
            capacity = b["runs"] * b["regions_per_run"]
            cells.append(f"{b['runs']} / {b['nonfull_runs']} / "
                         f"{100 * b['regions_in_use'] / capacity:.0f}" if capacity else "-")
        if any(cell != "-" for cell in cells):
            rows.append([str(bin_["size"]), *cells])
    return (f"{workload}: runs per bin at {key}", headers, rows,
            "Only size classes with runs. In use % = regions in use ÷ regions in the bin's runs.")


def checks_table(results: dict):
    headers = ["workload", "check", "result", "detail"]
    rows = [[check["workload"], check["check"], "ok" if check["ok"] else "FAILED",
             check["detail"]] for check in results["checks"]]
    rows += [[run["workload"], f"run under {run['allocator']} #{run['repetition'] + 1}",
              "DISCARDED", run["error"]] for run in results["discarded"]]
    if results["missing_allocators"]:
        rows.append(["-", "system allocators installed", "missing",
                     ", ".join(results["missing_allocators"])])
    return ("Checks", headers, rows,
            "Every run proved its allocator (runsel_variant() or the object providing malloc); "
            "a run that could not is discarded and listed here.")


def setup_table(results: dict):
    machine, settings = results["machine"], results["settings"]
    rows = [["command", results["command"]], ["generated", results["generated"]],
            ["duration", f"{results['duration_seconds']:.0f} s"],
            ["machine", f"{machine['cpu']}, {machine['cores']} cores, Linux {machine['kernel']}"],
            ["load average (1 min) at start, end",
             f"{machine.get('load_average_1min_at_start', '?')}, "
             f"{machine.get('load_average_1min', '?')} (other work on the machine widens "
             "the timing intervals)"],
            ["repetitions × scale × seed",
             f"{settings['repeat']} × {settings['scale']} × {settings['seed']}"],
            ["allocators", ", ".join(f"{a['name']}" + (f" ({a['preload']})" if a["preload"] else "")
                                     for a in results["allocators"])]]
    return "Set-up", ["", ""], rows, ""


def tables(results: dict) -> list:
    """Every table, in report order."""
    listed = [summary_table(results), checks_table(results)]
    for workload in results["summary"]:
        listed.append(checkpoints_table(results, workload))
        for table in (runsel_stats_table(results, workload), bins_table(results, workload)):
            if table[2]:
                listed.append(table)
    listed.append(setup_table(results))
    return listed


# --- pictures -------------------------------------------------------------------------


def pictures(results: dict, out: Path) -> list[tuple[str, Path]]:
    """Draws every picture into `out`; returns (caption, path) of those drawn."""
    import pictures as draw  # experiments/harness/pictures.py (needs matplotlib)

    drawn = [
        ("Time versus peak resident memory (lower left is better)",
         draw.time_versus_memory(results, out / "time_vs_memory.png")),
        ("Resident memory across checkpoints", draw.resident_over_checkpoints(
            results, out / "resident_over_checkpoints.png")),
        ("Distributions of repeated timings", draw.timing_distributions(
            results, out / "timing_distributions.png")),
        ("Per-bin run utilization at each workload's key checkpoint",
         draw.bin_utilization(results, out / "bin_utilization.png")),
    ]
    for workload in results["summary"]:
        drawn.append((f"Chunk and page occupancy, {workload}: rb_first beside lifo",
                      draw.chunk_occupancy(results, workload,
                                           out / f"occupancy_{workload.replace(':', '_')}.png")))
    return [(caption, path) for caption, path in drawn if path is not None]


# --- renderers ------------------------------------------------------------------------


def text_table(headers, rows) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths))
             for row in [headers, ["-" * width for width in widths], *rows]]
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(headers, rows) -> str:
    escape = lambda cell: str(cell).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(map(escape, headers)) + " |",
             "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(escape, row)) + " |" for row in rows]
    return "\n".join(lines)


def html_table(headers, rows) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row)
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def summary_text(results: dict) -> str:
    title, headers, rows, note = summary_table(results)
    failed = [row for row in checks_table(results)[2] if row[2] != "ok"]
    verdict = (f"{len(failed)} check(s) failed or runs discarded: see the report"
               if failed else "every check passed")
    return f"\n{title}\n{text_table(headers, rows)}\n{note}\n\n{verdict}"


def markdown(results: dict, drawn: list[tuple[str, Path]]) -> str:
    listed = tables(results)
    parts = ["# runsel report", ""]
    for title, headers, rows, note in listed[:2]:
        parts += [f"## {title}", "", markdown_table(headers, rows), "", note, ""]
    parts += ["## Pictures", ""]
    parts += [f"### {caption}\n\n![{caption}]({path.name})\n" for caption, path in drawn]
    parts += ["## Details", ""]
    for title, headers, rows, note in listed[2:]:
        parts += [f"### {title}", "", markdown_table(headers, rows), "", note, ""]
    return "\n".join(parts)


STYLE = """body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td:first-child,th:first-child,td:nth-child(2){text-align:left}
img{max-width:100%}.note{color:#555;font-size:13px}"""


def html_page(results: dict, drawn: list[tuple[str, Path]]) -> str:
    listed = tables(results)

    def section(level, title, headers, rows, note):
        return (f"<h{level}>{html.escape(title)}</h{level}>{html_table(headers, rows)}"
                f"<p class=note>{html.escape(note)}</p>")

    parts = [f"<!doctype html><meta charset=utf-8><title>runsel report</title>"
             f"<style>{STYLE}</style><h1>runsel report</h1>"]
    parts += [section(2, *table) for table in listed[:2]]
    parts.append("<h2>Pictures</h2>")
    for caption, path in drawn:
        encoded = base64.b64encode(path.read_bytes()).decode()
        parts.append(f"<h3>{html.escape(caption)}</h3>"
                     f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{encoded}'>")
    parts.append("<h2>Details</h2>")
    parts += [section(3, *table) for table in listed[2:]]
    return "\n".join(parts) + "\n"


def write_report(results: dict, out: Path) -> tuple[Path, Path]:
    """Draws the pictures and writes report.md and report.html into `out`."""
    drawn = pictures(results, out)
    markdown_path, html_path = out / "report.md", out / "report.html"
    markdown_path.write_text(markdown(results, drawn))
    html_path.write_text(html_page(results, drawn))
    return markdown_path, html_path
