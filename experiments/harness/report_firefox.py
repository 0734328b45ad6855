"""The report's Firefox tables (the firefox workload, results.json's "firefox" entry):
the recording's own checks, every mark of the content process and the parent, and every
container at the last tab mark. Data in, (title, headers, rows, note) out, like report.py's
other tables."""

from __future__ import annotations

from .allocators import FIREFOX_MATCHING
from .report_cells import profile_sentence

FIREFOX_FIGURES = ("allocated", "committed", "bin_unused")


def percent_to(value: int, reference: int) -> str:
    if not reference:
        return "-"
    return f"{100 * (value / reference - 1):+.2f} %"


def firefox_recording_table(results: dict):
    """The recorded session's own checks, per process kept."""
    firefox = results.get("firefox") or {}
    headers = ["process", "pid", "lines", "calls", "coverage of num_operations",
               "frees dropped", "live reuses", "log (gzip)"]
    rows = [[p["role"], p["pid"], f"{p['recording']['lines']:,d}",
             f"{p['recording']['calls']:,d}",
             f"{p['recording']['coverage']:.1%} of {p['recording']['num_operations']:,d}",
             f"{p['recording']['frees_dropped']:,d} ({p['recording']['frees_dropped_share']:.2%})",
             p["recording"]["live_reuses"], f"{p['recording']['bytes'] / 2**20:.1f} MiB"
             + ("" if p["recording"]["complete"] else ", cut short: its complete lines replayed")]
            for p in firefox.get("processes", [])]
    if "error" in firefox:
        rows = [["-", "-", "-", "-", "-", "-", "-", firefox["error"]]]
    note = (f"Stock {firefox.get('firefox', 'firefox-esr')}, headless, over "
            f"{len(firefox.get('pages', []))} pages of the webkit corpus, recorded through the "
            "dynamic linker's audit interface (tools/firefox/README.md); "
            + ("the cached recording was reused. " if firefox.get("reused_recording") else
               f"recorded in {firefox.get('recording_seconds', 0):.0f} s. ")
            + "Coverage: logged calls over the allocator's own count of malloc and free calls "
              "(the executable's internal calls are not seen); frees dropped: of blocks "
              "allocated before recording could see them.")
    return "Firefox: the recording", headers, rows, note


def firefox_marks_table(results: dict):
    """At every mark: the real allocator inside the browser, the reference replay on
    Firefox's allocator, and lifo with the classic and with Firefox's run sizes."""
    firefox = results.get("firefox") or {}
    matching = FIREFOX_MATCHING
    headers = ["process", "mark", "figure", "in the browser", "firefox (replay)",
               f"{matching} (classic runs)", "vs firefox", f"{matching}@firefox", "vs firefox",
               "the run sizes alone"]
    rows = []
    for process in firefox.get("processes", []):
        for mark in process["marks"]:
            if mark["label"] == "every":
                continue
            figures = mark["figures"]
            reference = figures.get("firefox", {})
            for figure in FIREFOX_FIGURES:
                real = (mark.get("in_browser") or {}).get(figure)
                mine = figures.get(matching, {}).get(figure)
                theirs = figures.get(f"{matching}@firefox", {}).get(figure)
                base = reference.get(figure)
                rows.append([process["role"], mark["label"], figure,
                             f"{real:,d}" if real is not None else "-",
                             f"{base:,d}" if base is not None else "-",
                             f"{mine:,d}" if mine is not None else "-",
                             percent_to(mine, base) if mine is not None and base else "-",
                             f"{theirs:,d}" if theirs is not None else "-",
                             percent_to(theirs, base) if theirs is not None and base else "-",
                             percent_to(theirs, mine) if theirs is not None and mine else "-"])
    note = ("Bytes. in the browser: mozjemalloc's own figures inside the recorded process at "
            "that mark (all its arenas, many threads). firefox (replay): the same log replayed "
            "on Firefox's allocator, one arena, one thread: the reference. "
            f"{matching} (classic runs): runsel's classic run sizes; {matching}@firefox: "
            f"the installed Firefox's, read from its bin statistics "
            f"({firefox.get('run_pages_setting', '')}); the run sizes alone: "
            f"{matching}@firefox against {matching}, the same container on the same trace.")
    return "Firefox: every mark", headers, rows, note


def firefox_containers_table(results: dict):
    """Every container against the reference row, at the content process's last tab mark."""
    firefox = results.get("firefox") or {}
    content = next((p for p in firefox.get("processes", []) if p["role"] == "content"), None)
    headers = ["row", "run sizes", "committed", "bin_unused", "resident", "committed vs firefox",
               "bin_unused vs firefox"]
    rows, label = [], "-"
    if content:
        tabs = [m for m in content["marks"] if m["label"].startswith("tab_")]
        mark = tabs[-1] if tabs else content["marks"][-1]
        label = mark["label"]
        reference = mark["figures"].get("firefox", {})
        for name, figures in mark["figures"].items():
            rows.append([name, firefox["rows"].get(name, ""), f"{figures['committed']:,d}",
                         f"{figures['bin_unused']:,d}", f"{figures['resident']:,d}",
                         percent_to(figures["committed"], reference.get("committed")),
                         percent_to(figures["bin_unused"], reference.get("bin_unused"))])
    profiles = set((content or {}).get("profiles", {}).values()) - {"firefox", None}
    note = (f"The content process's log at {label}, replayed exactly on every container and on "
            "Firefox's own allocator (the row firefox). The differences include the run sizes "
            "(classic rows), mozjemalloc's run headers and large-run layout, and its purge of "
            f"dirty pages. The installed Firefox's run sizes: {firefox.get('run_pages_setting')}." +
            profile_sentence(profiles))
    return "Firefox: every container", headers, rows, note
