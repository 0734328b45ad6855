"""How one allocator compares with the reference, and how small a difference the
comparison could have seen.

Live runs are interleaved: round r runs every allocator once, so the runs of round r
form a pair with the reference's run of the same round, and drift of the machine hits
both. The difference is the paired, 20 %-trimmed mean of log(value ÷ reference),
reported in percent; its 95 % interval comes from scipy.stats.bootstrap with
paired=True (whole pairs are resampled, BCa). The interval's half-width is the
smallest difference the comparison could detect. Exact figures (replays, instruction
counts) have no interval: their difference is the difference.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 4999
TRIM = 0.2            # share cut from each end of the paired log ratios (outliers)
MIN_PAIRS = 5         # fewer pairs give no interval (unless all have the same ratio)
TARGET_PERCENT = 2.0  # the default report must resolve a difference this large

# Outcomes of a comparison with an interval.
LOWER, HIGHER = "lower", "higher"          # the interval excludes 0
NO_DIFFERENCE = "no difference"            # contains 0, and is at most ±target wide
UNDERPOWERED = "underpowered"              # contains 0, but wider than ±target
TOO_FEW = "too few pairs"


def pairs_by_round(values: list[float], rounds: list[int], reference: list[float],
                   reference_rounds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(values, reference values) of the rounds both have, in round order."""
    mine = dict(zip(rounds, values))
    theirs = dict(zip(reference_rounds, reference))
    shared = sorted(set(mine) & set(theirs))
    return (np.array([mine[r] for r in shared], dtype=float),
            np.array([theirs[r] for r in shared], dtype=float))


def percent_difference(values, reference, axis=-1):
    """Paired, trimmed mean of log ratios, as a percent difference (vectorised)."""
    ratios = np.log(values) - np.log(reference)
    return 100 * np.expm1(stats.trim_mean(ratios, TRIM, axis=axis))


def compare_paired(values, reference, target: float = TARGET_PERCENT, seed: int = 4) -> dict:
    """values[i] and reference[i] come from the same round. Returns {percent, low, high,
    half_width, n_pairs, outcome, method} and, with an interval, constant (every pair had
    the same ratio). With fewer than MIN_PAIRS pairs (and no constant ratio) the bounds
    and the half-width are None but percent is the point estimate; everything is None
    when there is no pair, or a value is not above 0."""
    values, reference = np.asarray(values, dtype=float), np.asarray(reference, dtype=float)
    n = len(values)
    if n == 0 or np.any(values <= 0) or np.any(reference <= 0):
        return {"percent": None, "low": None, "high": None, "half_width": None,
                "n_pairs": n, "outcome": TOO_FEW, "method": "no positive pairs"}
    point = float(percent_difference(values, reference))
    ratios = np.log(values) - np.log(reference)
    constant = n >= 3 and bool(np.ptp(ratios) < 1e-12)  # one or two pairs prove nothing
    if constant:  # every pair has the same ratio: nothing to resample
        low = high = point
        method = "every pair has the same ratio"
    elif n < MIN_PAIRS:
        return {"percent": point, "low": None, "high": None, "half_width": None,
                "n_pairs": n, "outcome": TOO_FEW, "method": f"fewer than {MIN_PAIRS} pairs"}
    else:
        low, high, method = bootstrap_interval(values, reference, seed)
    half_width = (high - low) / 2
    return {"percent": point, "low": low, "high": high, "half_width": half_width,
            "n_pairs": n, "outcome": outcome(low, high, target), "method": method,
            "constant": constant}


def bootstrap_interval(values: np.ndarray, reference: np.ndarray,
                       seed: int) -> tuple[float, float, str]:
    """95 % interval of percent_difference, whole pairs resampled."""
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():  # a degenerate BCa gives NaN: percentile follows
            warnings.simplefilter("ignore")
            result = stats.bootstrap((values, reference), percent_difference, paired=True,
                                     vectorized=True, confidence_level=CONFIDENCE,
                                     n_resamples=RESAMPLES, method=method,
                                     random_state=np.random.default_rng(seed))
        low, high = (float(bound) for bound in result.confidence_interval)
        if math.isfinite(low) and math.isfinite(high):
            return low, high, f"paired bootstrap ({method}, {RESAMPLES} resamples)"
    return -math.inf, math.inf, "bootstrap failed"


def outcome(low: float, high: float, target: float) -> str:
    if low > 0:
        return HIGHER
    if high < 0:
        return LOWER
    return NO_DIFFERENCE if (high - low) / 2 <= target else UNDERPOWERED


def exact_difference(value: float | None, reference: float | None) -> dict | None:
    """Difference of two exact figures (bytes, instructions): absolute and percent."""
    if value is None or reference is None:
        return None
    percent = 100 * (value / reference - 1) if reference else None
    return {"difference": value - reference, "percent": percent, "low": percent,
            "high": percent, "half_width": 0.0, "exact": True}
