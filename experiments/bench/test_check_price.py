#!/usr/bin/env python3
"""meson test --suite harness (bench_check_price): check_price.py's per-call figures and
table on fixture cost blocks with known answers.

    PYTHONPATH=experiments /usr/bin/python3 experiments/bench/test_check_price.py
"""

from __future__ import annotations

import unittest

from bench import check_price

from harness import cost


def block(allocator: int, calls: int, container: int | None = None) -> dict:
    """The fields of a harness.cost block that check_price reads."""
    return {"allocator_instructions": allocator, "container_instructions": container,
            "calls": calls, "records": calls}


class CheckPrice(unittest.TestCase):
    def test_per_call(self):
        figures = check_price.per_call(block(1_200, 10, 300))
        self.assertEqual(figures["allocator"], 120.0)
        self.assertEqual(figures["container"], 30.0)
        self.assertIsNone(check_price.per_call(block(1_200, 10))["container"])

    def test_no_calls_is_refused(self):
        # A replay that never reached the library counted nothing: not a zero cost.
        with self.assertRaises(cost.CostFailed):
            check_price.per_call(block(0, 0))
        with self.assertRaises(cost.CostFailed):
            check_price.per_call({**block(0, 5), "allocator_instructions": None})

    def test_table_prices_and_premiums(self):
        results = {
            "moz_tree": {"hardened": check_price.per_call(block(1_170, 10, 130)),
                         "shipped": check_price.per_call(block(1_140, 10, 110))},
            "lifo": {"hardened": check_price.per_call(block(1_070, 10, 30)),
                     "shipped": check_price.per_call(block(1_060, 10, 20))},
        }
        lines = check_price.table(results).splitlines()
        self.assertEqual(lines[0], "| container | hardened | as shipped | checks' price | "
                         "container's own, hardened | as shipped | over lifo, hardened | "
                         "as shipped |")
        self.assertEqual(lines[2], "| `moz_tree` | 117.00 | 114.00 | 3.00 | 13.00 | 11.00 | "
                         "10.00 | 8.00 |")
        self.assertEqual(lines[3], "| `lifo` | 107.00 | 106.00 | 1.00 | 3.00 | 2.00 | "
                         "0.00 | 0.00 |")

    def test_table_without_profile_or_lifo(self):
        results = {"rb_first": {"hardened": check_price.per_call(block(1_300, 10)),
                                "shipped": check_price.per_call(block(1_250, 10))}}
        lines = check_price.table(results).splitlines()
        self.assertEqual(lines[0], "| container | hardened | as shipped | checks' price |")
        self.assertEqual(lines[2], "| `rb_first` | 130.00 | 125.00 | 5.00 |")


if __name__ == "__main__":
    unittest.main()
