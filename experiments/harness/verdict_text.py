"""The verdict's sentences, written from the numbers in results["verdict"] (verdict.py
computes them): the line of each row, the paragraph on bug 1857133's figures, and the
answer to "lifo's time and rb_first's memory at once?". Formatting only: a wording
change re-renders from results.json (tools/runsel render), no run needed.
"""

from __future__ import annotations

from .allocators import REFERENCE
from .comparisons import HIGHER, LOWER, NO_DIFFERENCE, TOO_FEW

MEASURE_WORDS = {"sp3": "Speedometer 3 time", "base": "AWSY base resident memory",
                 "tp6": "AWSY tp6 resident memory"}
# An interval lies wholly above zero this often when there is no difference (95 %, two-sided).
CHANCE_ABOVE_ZERO = 0.025


# --- one line per verdict row ---------------------------------------------------------


def describe_time(comparison: dict | None, target: float) -> str:
    """One phrase for a time comparison; never "same time" when underpowered."""
    if not comparison or comparison.get("percent") is None:
        return "time not measured"
    kind = comparison["outcome"]
    if kind == TOO_FEW:
        return f"time: too few pairs ({comparison['n_pairs']})"
    if kind == LOWER:
        return f"faster by {-comparison['percent']:.1f} %"
    if kind == HIGHER:
        return f"slower by {comparison['percent']:.1f} %"
    if kind == NO_DIFFERENCE:
        return f"same time (within ±{comparison['half_width']:.1f} %)"
    return (f"time underpowered: could only see ≥ {comparison['half_width']:.1f} % "
            f"(target {target:g} %)")


def describe_memory(memory: dict | None, comparable: bool) -> str:
    if not comparable:
        return "memory not comparable"
    if memory is None or memory.get("percent") is None:
        return "memory not measured"
    if memory.get("exact"):
        if memory["difference"] == 0:
            return "same memory (exact)"
        return f"{memory['percent']:+.2f} % memory (exact)"
    kind = memory.get("outcome")
    if memory.get("constant"):
        return ("same memory in every run" if memory["percent"] == 0 else
                f"{memory['percent']:+.1f} % memory in every run")
    if kind in (LOWER, HIGHER):
        return f"{memory['percent']:+.1f} % memory"
    if kind == NO_DIFFERENCE:
        return f"same memory (within ±{memory['half_width']:.1f} %)"
    return "memory unresolved"


def describe_cost(cost: dict) -> str:
    instructions = cost.get("instructions")
    if not instructions or instructions.get("percent") is None:
        return "cost not measured"
    if abs(instructions["percent"]) < 0.05:
        return "same instructions"
    return f"{instructions['percent']:+.1f} % instructions"


def row_line(row: dict, target: float) -> str:
    """The verdict column of one row: time; memory; cost."""
    time = (describe_time(row["time"], target) if row["kind"] == "live"
            else "time not measured (replay)")
    return "; ".join([time, describe_memory(row["memory"], row["memory_comparable"]),
                      describe_cost(row["cost"])])


# --- bug 1857133 ----------------------------------------------------------------------


def ours(comparison: dict | None) -> str:
    if not comparison or comparison.get("percent") is None:
        return "not measured"
    if comparison.get("exact"):
        return f"{comparison['percent']:+.2f} % (exact)"
    if comparison.get("low") is None:
        return f"{comparison['percent']:+.1f} % (no interval)"
    return f"{comparison['percent']:+.1f} % [{comparison['low']:+.1f}, {comparison['high']:+.1f}]"


def agreement_paragraph(claims: list[dict]) -> str:
    """Where our data agrees with bug 1857133 and where it does not, from the judgements."""
    sentences = []
    for claim in claims:
        parts = []
        for figure in claim["figures"]:
            words = MEASURE_WORDS[figure["measure"]]
            if not figure["evidence"]:
                parts.append(f"{words} {figure['published']:+.2f} %: nothing of ours measures it")
                continue
            found = ", ".join(f"{e['what']} {ours(e['comparison'])} ({e['judgement']})"
                              for e in figure["evidence"])
            parts.append(f"{words} {figure['published']:+.2f} %: ours {found}")
        sentences.append(f"{claim['claim'].capitalize()} ({claim['container']}) is "
                         f"{claim['judgement']}: " + "; ".join(parts) + ".")
    return " ".join(sentences)


# --- the question: lifo's time and rb_first's memory at once? ---------------------------


def exact_or_ours(comparison: dict | None) -> str:
    """An exact difference in bytes too, and two decimals below 1 %: "+0.0 %" alone
    would hide a real 4 KiB."""
    if comparison and comparison.get("exact") and comparison.get("difference") is not None:
        return f"{comparison['difference']:+,d} B ({comparison['percent']:+.2f} %, exact)"
    if comparison and comparison.get("low") is not None and abs(comparison["percent"]) < 1:
        return (f"{comparison['percent']:+.2f} % [{comparison['low']:+.2f}, "
                f"{comparison['high']:+.2f}]")
    return ours(comparison)


def worse_text(worse: dict) -> str:
    """Where a container is shown worse: "<workload label> <figure> <comparison>"."""
    return f"{worse['label']} {worse['figure']} {exact_or_ours(worse['comparison'])}"


def question_answer(question: dict) -> str:
    """The answer, the trade-offs, and how many "worse" chance alone would give."""
    answers, intervals = question["containers"], question["intervals"]
    time_anchor = question["anchors"]["time"]
    qualifying = [a for a in answers if a["qualifies"]]
    if not answers:
        return "No container besides the anchors ran."
    head = (f"No container has {time_anchor}'s time and {REFERENCE}'s memory on every "
            "workload: each is shown worse somewhere." if not qualifying else
            f"Not shown worse than {time_anchor}'s time or {REFERENCE}'s memory anywhere: " +
            ", ".join(a["container"] + (f" ({len(a['untold'])} comparisons could not tell)"
                                        if a["untold"] else "") for a in qualifying) + ".")
    trades = [f"{a['container']}: worse on {'; '.join(map(worse_text, a['worse']))}"
              for a in answers if not a["qualifies"]]
    chance = (f" Of the {intervals} comparisons with an interval, about "
              f"{intervals * CHANCE_ABOVE_ZERO:.1f} would lie wholly above zero by chance "
              "alone, so one narrow \"worse\" is weak evidence; exact and every-round "
              "differences are not chance." if intervals else "")
    return head + (" Trade-offs: " + ". ".join(trades) + "." if trades else "") + chance
