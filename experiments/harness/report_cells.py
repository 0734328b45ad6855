"""The report's table cells: figures and compared differences as the tables print them
(MiB, a difference with its interval, an exact difference, a run's instruction count)."""

from __future__ import annotations

MIB = 1 << 20
NOT_MEASURED = "not measured"
# runsel's stats figures that explain resident memory (memory/include/runsel.h).
STATS_FIGURES = ("committed", "allocated", "bin_unused", "waste", "dirty", "bookkeeping")


def mib(count: float | None) -> str:
    """MiB, one decimal; two below 10 MiB so small live sets still show."""
    if count is None:
        return "-"
    return f"{count / MIB:.1f}" if abs(count) >= 10 * MIB else f"{count / MIB:.2f}"


def delta_cell(delta: dict | None) -> str:
    """A paired comparison: percent and 95 % interval; "every round" when every pair had
    the same ratio; the point estimate and its outcome when there is no interval."""
    if not delta or delta.get("percent") is None:
        return NOT_MEASURED if not delta else f"{delta.get('outcome', '-')}"
    if delta.get("low") is None:
        return f"{delta['percent']:+.1f} % ({delta['outcome']})"
    if delta.get("constant"):
        return f"{delta['percent']:+.2f} % (every round)"
    return f"{delta['percent']:+.1f} % [{delta['low']:+.1f}, {delta['high']:+.1f}]"


def detectable_cell(delta: dict | None) -> str:
    """The smallest difference the comparison could have seen: its half-width."""
    if not delta or delta.get("half_width") is None:
        return "-"
    if delta.get("exact") or delta.get("constant"):
        return "exact"
    return f"±{delta['half_width']:.1f} %"


def exact_cell(compared: dict | None) -> str:
    if not compared or compared.get("percent") is None:
        return NOT_MEASURED
    return f"{compared['percent']:+.2f} %"


def bytes_cell(compared: dict) -> str:
    """An exact memory difference in bytes and percent."""
    return f"{compared['difference']:+,d} B ({compared['percent']:+.2f} %)"


def memory_cell(row: dict) -> str:
    if not row["memory_comparable"]:
        return "not comparable (live set differs between runs)"
    memory = row["memory"]
    if not memory or memory.get("percent") is None:
        return NOT_MEASURED
    if memory.get("exact"):
        text = f"{memory['figure']} {bytes_cell(memory)}"
        if memory.get("peak") and memory["peak"].get("percent") is not None:
            text += f"; peak {bytes_cell(memory['peak'])}"
        return text
    return delta_cell(memory)


def instructions_cell(counted: dict | None) -> str:
    """A run's whole instruction count (perf or callgrind), in millions."""
    if not counted:
        return "-"
    return f"{counted['instructions'] / 1e6:.1f} M" if "instructions" in counted else "error"


def profile_sentence(profiles: set) -> str:
    """Which profile the replays ran in (runsel_profile(), memory/README.md); nothing for a
    results file from before replays said."""
    named = sorted(profile for profile in profiles if profile)
    if not named:
        return ""
    if named == ["as_built"]:
        return (" Replayed in the as-built profile (RUNSEL_CONF=profile:as_built: mozjemalloc's "
                "run lifecycle and purge).")
    return " Replayed in the profiles " + ", ".join(named) + "."
