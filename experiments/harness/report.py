"""What `tools/runsel report` shows: the tables (report_tables.py: one function per table,
results in, rows out), the pictures (pictures.py: one function per picture), and three
renderers (terminal text, Markdown, self-contained HTML) that lay the same tables and
pictures out with tabulate. Input is
results.json as the harness writes it (results.py; its layout: experiments/README.md,
"results.json"); every figure is in it, so rendering computes none. The verdict opens
the report.

    python3 -m harness.report RESULTS_JSON [--out DIR]   (tools/runsel render)
"""

from __future__ import annotations

import argparse
import base64
import html
from pathlib import Path

from .interpreter import ensure_libraries

if __name__ == "__main__":  # run by Debian's python3 when this one lacks what rendering needs
    ensure_libraries({"matplotlib": "python3-matplotlib", "scipy": "python3-scipy",
                      "tabulate": "python3-tabulate"}, "render")

from tabulate import tabulate

from . import corpus_report, report_tables, verdict_text
from .results import load

# --- pictures -------------------------------------------------------------------------


def draw_pictures(results: dict, out: Path) -> list[tuple[str, Path]]:
    """Draws every picture into `out`; returns (caption, path) of those drawn."""
    from . import pictures  # needs matplotlib

    if not pictures.live_workloads(results):  # a run of the firefox workload alone: no timed runs
        return []
    drawn = [
        ("The answer over the trace corpus", pictures.corpus_answer(results, out / "answer.png")),
        ("Time versus peak resident memory (lower left is better)",
         pictures.time_versus_memory(results, out / "time_vs_memory.png")),
        ("Resident memory across checkpoints", pictures.resident_over_checkpoints(
            results, out / "resident_over_checkpoints.png")),
        ("Distributions of repeated timings", pictures.timing_distributions(
            results, out / "timing_distributions.png")),
        ("Per-bin run utilization at each workload's key checkpoint",
         pictures.bin_utilization(results, out / "bin_utilization.png")),
    ]
    for workload in pictures.live_workloads(results):
        drawn.append((f"Chunk and page occupancy, {workload}: rb_first beside lifo",
                      pictures.chunk_occupancy(results, workload,
                                           out / f"occupancy_{workload.replace(':', '_')}.png")))
    for session in pictures.long_sessions(results):
        drawn.append((f"bin_unused at every mark of the Firefox session {session}",
                      pictures.firefox_session(results, session, out / f"session_{session}.png")))
    return [(caption, path) for caption, path in drawn if path is not None]


# --- renderers ------------------------------------------------------------------------


def text_table(headers, rows) -> str:
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def markdown_table(headers, rows) -> str:
    def escape(cell) -> str:
        return str(cell).replace("|", "\\|")

    return tabulate([[escape(cell) for cell in row] for row in rows],
                    headers=[escape(cell) for cell in headers], tablefmt="github",
                    disable_numparse=True)


def html_table(headers, rows) -> str:
    return tabulate(rows, headers=headers, tablefmt="html", disable_numparse=True)


def summary_text(results: dict) -> str:
    """What the terminal shows at the end: the verdict and the checks' outcome."""
    title, headers, rows, note = report_tables.verdict_table(results)
    failed = [row for row in report_tables.checks_table(results)[2] if row[2] != "ok"]
    checked = (f"{len(failed)} check(s) failed or runs discarded: see the report"
               if failed else "every check passed")
    return (f"\n{corpus_report.answer_paragraph(results).replace('**', '')}\n"
            f"\n{title}\n{text_table(headers, rows)}\n{note}\n\n"
            f"{verdict_text.agreement_paragraph(results['verdict']['published'])}\n\n{checked}")


FULL_ANSWER = "The answer in full"  # the heading of the long paragraph, after the picture


def opening(results: dict) -> tuple[str, str | None]:
    """The first screen's short answer, and the long paragraph that follows the picture
    (None when it would say the same: no trace corpus)."""
    short, full = corpus_report.short_answer(results), corpus_report.answer_paragraph(results)
    return short, (None if full == short else full)


def markdown(results: dict, drawn: list[tuple[str, Path]]) -> str:
    listed = report_tables.tables(results)
    short, full = opening(results)
    parts = ["# runsel report", "", "## Answer", "", short, ""]
    if drawn and drawn[0][1].name == "answer.png":
        parts += [f"![{drawn[0][0]}]({drawn[0][1].name})", ""]
        drawn = drawn[1:]
    if full:
        parts += [f"### {FULL_ANSWER}", "", full, ""]
    for title, headers, rows, note in listed[:report_tables.leading(results)]:
        parts += [f"## {title}", "", markdown_table(headers, rows), "", note, ""]
    parts += ["## Pictures", ""]
    parts += [f"### {caption}\n\n![{caption}]({path.name})\n" for caption, path in drawn]
    parts += ["## Details", ""]
    for title, headers, rows, note in listed[report_tables.leading(results):]:
        parts += [f"### {title}", "", markdown_table(headers, rows), "", note, ""]
    return "\n".join(parts)


STYLE = """body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td:first-child,th:first-child,td:nth-child(2){text-align:left}
img{max-width:100%}.note{color:#555;font-size:13px}"""


def html_paragraph(text: str) -> str:
    """A paragraph with its **bold** pieces in <b>."""
    escaped = html.escape(text)
    return "<p>" + "".join(piece if i % 2 == 0 else f"<b>{piece}</b>"
                           for i, piece in enumerate(escaped.split("**"))) + "</p>"


def html_page(results: dict, drawn: list[tuple[str, Path]]) -> str:
    listed = report_tables.tables(results)

    def section(level, title, headers, rows, note):
        paragraphs = "".join(f"<p class=note>{html.escape(text)}</p>"
                             for text in note.split("\n\n"))
        return f"<h{level}>{html.escape(title)}</h{level}>{html_table(headers, rows)}{paragraphs}"

    parts = [f"<!doctype html><meta charset=utf-8><title>runsel report</title>"
             f"<style>{STYLE}</style><h1>runsel report</h1><h2>Answer</h2>"]
    short, full = opening(results)
    parts.append(html_paragraph(short))
    if drawn and drawn[0][1].name == "answer.png":
        encoded = base64.b64encode(drawn[0][1].read_bytes()).decode()
        parts.append(f"<img alt='{html.escape(drawn[0][0])}' "
                     f"src='data:image/png;base64,{encoded}'>")
        drawn = drawn[1:]
    if full:
        parts += [f"<h3>{html.escape(FULL_ANSWER)}</h3>", html_paragraph(full)]
    parts += [section(2, *table) for table in listed[:report_tables.leading(results)]]
    parts.append("<h2>Pictures</h2>")
    for caption, path in drawn:
        encoded = base64.b64encode(path.read_bytes()).decode()
        parts.append(f"<h3>{html.escape(caption)}</h3>"
                     f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{encoded}'>")
    parts.append("<h2>Details</h2>")
    parts += [section(3, *table) for table in listed[report_tables.leading(results):]]
    return "\n".join(parts) + "\n"


def write_report(results: dict, out: Path) -> tuple[Path, Path]:
    """Draws the pictures and writes report.md and report.html into `out`."""
    drawn = draw_pictures(results, out)
    markdown_path, html_path = out / "report.md", out / "report.html"
    markdown_path.write_text(markdown(results, drawn))
    html_path.write_text(html_page(results, drawn))
    return markdown_path, html_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Re-renders report.md, report.html and the pictures from a results.json, "
                    "byte for byte as the run wrote them.")
    parser.add_argument("results", type=Path, metavar="RESULTS_JSON")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="where to write them (default: the directory of RESULTS_JSON)")
    args = parser.parse_args(argv)
    results = load(args.results)
    out = args.out or args.results.parent
    out.mkdir(parents=True, exist_ok=True)
    markdown, html_path = write_report(results, out)
    print(f"report: {html_path}\n        {markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
