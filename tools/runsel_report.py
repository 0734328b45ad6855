"""What `tools/runsel report` shows: one function per table, data in, rows out; two
renderers (terminal text, Markdown) turn the same tables into the console summary
and results/report.md. Input is the summary dict written to results/report.json.
"""

from __future__ import annotations

import difflib

# The five terms of runsel's exact identity: committed = sum of these.
IDENTITY_TERMS = ("allocated", "waste", "dirty", "bookkeeping", "bin_unused")
BYTE_FIGURES = ("mapped", "committed", *IDENTITY_TERMS)
COUNT_FIGURES = ("nmalloc", "nfree", "narenas", "chunks", "huge_count", "purges")


def missing_figures(stats: dict) -> list[str]:
    return [name for name in (*BYTE_FIGURES, "nmalloc", "bins") if name not in stats]


def identity_gap(stats: dict) -> int | None:
    """committed minus the sum of its terms: 0 when runsel's stats are consistent."""
    if any(name not in stats for name in ("committed", *IDENTITY_TERMS)):
        return None
    return stats["committed"] - sum(stats[term] for term in IDENTITY_TERMS)


def first_difference(expected: str, actual: str) -> str:
    """Where two outputs first part, in one line."""
    expected_lines, actual_lines = expected.splitlines(), actual.splitlines()
    for number, (want, got) in enumerate(zip(expected_lines, actual_lines), start=1):
        if want != got:
            return f"line {number}: glibc {want[:60]!r}, runsel {got[:60]!r}"
    shorter = min(len(expected_lines), len(actual_lines))
    return (f"line {shorter + 1}: glibc printed {len(expected_lines)} lines, "
            f"runsel {len(actual_lines)}")


def output_diff(expected: str, actual: str, limit: int = 40) -> str:
    """The start of a unified diff, glibc's output first."""
    diff = difflib.unified_diff(expected.splitlines(), actual.splitlines(), "glibc", "runsel",
                                n=2, lineterm="")
    return "\n".join(list(diff)[:limit])


def human_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


# --- tables: (headers, rows) ------------------------------------------------------------


def checks_table(summary: dict):
    headers = ["allocator", "check", "result", "detail"]
    rows = []
    for variant in [summary["baseline"], *summary["variants"]]:
        for check in variant["checks"]:
            rows.append([variant["name"], check["name"], "ok" if check["ok"] else "FAILED",
                         check["detail"]])
    return headers, rows


def timing_table(summary: dict):
    baseline = summary["baseline"]
    headers = ["allocator", "median wall time", "runs (s)", "vs glibc"]
    rows = [["glibc", f"{baseline['median_seconds']:.3f} s", runs_list(baseline), "1.00x"]]
    for variant in summary["variants"]:
        ratio = f"{variant['vs_glibc']:.2f}x" if variant["vs_glibc"] else "-"
        median = f"{variant['median_seconds']:.3f} s"
        rows.append([variant["name"], median, runs_list(variant), ratio])
    return headers, rows


def runs_list(entry: dict) -> str:
    return " ".join(f"{seconds:.3f}" for seconds in entry["wall_seconds"])


def figures_table(stats: dict):
    """Whole-heap figures at exit; the identity terms as shares of committed."""
    headers = ["figure", "value", "bytes", "of committed"]
    rows = []
    for name in BYTE_FIGURES:
        if name not in stats:
            rows.append([name, "missing", "", ""])
            continue
        share = percent(stats[name], stats["committed"]) if name in IDENTITY_TERMS else ""
        rows.append([name, human_bytes(stats[name]), str(stats[name]), share])
    for name in COUNT_FIGURES:
        if name in stats:
            rows.append([name, str(stats[name]), "", ""])
    return headers, rows


def bins_table(stats: dict):
    """Small bins that hold at least one run at exit."""
    headers = ["size", "runs", "nonfull_runs", "regions_per_run", "regions_in_use", "used",
               "unused_bytes"]
    rows = []
    for bin_stats in stats.get("bins", []):
        if not bin_stats["runs"]:
            continue
        capacity = bin_stats["runs"] * bin_stats["regions_per_run"]
        rows.append([str(bin_stats["size"]), str(bin_stats["runs"]), str(bin_stats["nonfull_runs"]),
                     str(bin_stats["regions_per_run"]), str(bin_stats.get("regions_in_use", "")),
                     percent(bin_stats.get("regions_in_use", 0), capacity),
                     human_bytes(bin_stats["unused_bytes"])])
    return headers, rows


def empty_bins(stats: dict) -> int:
    return sum(1 for bin_stats in stats.get("bins", []) if not bin_stats["runs"])


# --- renderers --------------------------------------------------------------------------


def text_table(headers, rows) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    numeric = [bool(rows) and all(is_number(row[i]) for row in rows) for i in range(len(headers))]

    def line(cells):
        return "  ".join(str(cell).rjust(width) if right else str(cell).ljust(width)
                         for cell, width, right in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(headers), line("-" * width for width in widths), *map(line, rows)])


def is_number(cell: str) -> bool:
    return cell == "" or cell.replace(".", "", 1).split(" ")[0].rstrip("x%").isdigit()


def markdown_table(headers, rows) -> str:
    def line(cells):
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(headers), line("---" for _ in headers), *map(line, rows)])


def sections(summary: dict):
    """The report as (title, table or preformatted text) pairs, in reading order."""
    yield "Checks", checks_table(summary)
    for variant, check in failed_checks(summary):
        if check["evidence"]:
            yield f"{variant}: {check['name']}: evidence", check["evidence"]
    yield "Wall time (with and without runsel)", timing_table(summary)
    for variant in summary["variants"]:
        stats = variant["stats"]
        if stats is None:
            yield f"{variant['name']}: stats", "no stats line: see the checks above"
            continue
        yield f"{variant['name']}: heap at exit ({variant['library']})", figures_table(stats)
        yield (f"{variant['name']}: small bins with runs ({empty_bins(stats)} of "
               f"{len(stats.get('bins', []))} bins hold none)"), bins_table(stats)


def failed_checks(summary: dict):
    for variant in [summary["baseline"], *summary["variants"]]:
        for check in variant["checks"]:
            if not check["ok"]:
                yield variant["name"], check


def verdict(summary: dict) -> str:
    return "all checks passed" if summary["ok"] else "SOME CHECKS FAILED"


def text(summary: dict) -> str:
    parts = [f"runsel report: {summary['workload']}",
             f"  {summary['environment']}; {summary['python']}; "
             f"{summary['repeat']} run(s) per allocator, interleaved"]
    for title, body in sections(summary):
        parts += ["", f"== {title}", body if isinstance(body, str) else text_table(*body)]
    parts += ["", f"runsel report: {verdict(summary)}"]
    return "\n".join(parts)


def markdown(summary: dict) -> str:
    parts = ["# runsel report", "",
             f"Workload: `{summary['workload']}` with `{summary['environment']}` "
             f"({summary['python']}), {summary['repeat']} run(s) per allocator, interleaved; "
             f"times are medians. Generated {summary['generated']}; build/libmalloc.so is "
             f"`{summary['selected_container']}`.", "",
             f"**Result: {verdict(summary)}.**"]
    for title, body in sections(summary):
        rendered = f"```\n{body}\n```" if isinstance(body, str) else markdown_table(*body)
        parts += ["", f"## {title}", "", rendered]
    return "\n".join(parts) + "\n"
