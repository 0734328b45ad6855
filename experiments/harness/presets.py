"""The report run's presets, plain data: DEFAULT (tools/runsel report) and QUICK
(--quick), read by the harness and by tools/runsel's help; and the check of the numbers
that override them. Standard library only.

Run lengths, aimed at a default report of at most 20 minutes on 2 cores with its
recordings cached (experiments/README.md, "Where the time goes"); the deterministic steps
run beside the timed runs on the core those leave free. The containers, which
the verdict compares to 2 %, take part in every round (repeat, then up to `extend`
seconds of extra rounds for the comparisons still wider than that); the peers and the
settings (rb_first@purge:NAME, ...) in the first peer_repeat rounds. A webkit run costs
seconds of start-up and page loads and its time cannot resolve a container to 2 %
anyway, so it runs live under the containers of bug 1857133 (webkit_allocators; the
peers in its first round) while its trace is replayed exactly on every container.
The firefox workload records stock Firefox over the same corpus once per Firefox version
and corpus (cached in results/firefox/) and replays it exactly: firefox_pages pages, its
parent process too unless --quick.
--quick exists so that CI exercises every step in a minute or two: its webkit runs and
replays and its callgrind counts (about a second of valgrind start-up each) cover its
anchors only.
"""

from __future__ import annotations

import argparse

from .allocators import AS_BUILT, FIREFOX_MATCHING, GLIBC, PEERS, REFERENCE

QUICK_ANCHORS = (REFERENCE, FIREFOX_MATCHING, "jemalloc")
# --quick's exact replays add moz_tree, the tree mozjemalloc shipped: the report's anchor
# tables set it against rb_first and lifo (anchors.py).
QUICK_REPLAYS = QUICK_ANCHORS + (AS_BUILT,)
# verdict.PUBLISHED's containers.
BUG_1857133 = (REFERENCE, "rb_root", FIREFOX_MATCHING, "array_heap")
DEFAULT = {"repeat": 12, "scale": 1.0, "instruction_scale": 0.05, "extend": 0,
           "webkit_pages": 2, "webkit_repeat": 5, "webkit_peer_repeat": 1,
           "webkit_allocators": BUG_1857133 + (GLIBC, *PEERS), "webkit_replay_allocators": (),
           "webkit_record_pages": 4, "webkit_cost_records": 100_000,
           "counted_allocators": (), "peer_repeat": 7,
           "firefox_pages": 4, "firefox_parent": True, "firefox_replay_allocators": (),
           # The corpus of Firefox sessions (experiments/firefox/sessions.json's set).
           "firefox_set": "default",
           # The trace corpus (webkit_record.DEFAULT_RANGES): 8 recordings, the default page
           # set 5 times and 3 other page sets; callgrind windows on the first 2 traces, the
           # fewest an interval takes (a WebKit trace's are ~18 s of CPU per container, most
           # of them valgrind's uninstrumented way through the whole trace, so more windows
           # cost little and more traces much; the answer's cost is the Firefox group's).
           "corpus_ranges": ((1, 4),) * 5 + ((5, 8), (9, 12), (13, 16)),
           "corpus_cost_traces": 2, "corpus_windows": 24, "corpus_window_records": 25_000,
           # Their windows are counted as shipped (the verdict's figure) on those traces and
           # hardened too on this many of them (the checks' price; each is one more trace's
           # windows on every container).
           "corpus_hardened_traces": 1,
           # The Firefox corpus's content logs callgrind counts (firefox_groups.add_costs:
           # the shortest of each page set; with the same windows), under Firefox's run sizes.
           "firefox_cost_sessions": 3,
           # Behind a thread cache (behind_cache.py): the corpus replayed on the containers
           # built with the cache, with callgrind windows on this many of its traces (built
           # hardened only, so compared with the plain replays' hardened counts: no more
           # traces than corpus_hardened_traces).
           "cache_cost_traces": 1}
QUICK = {"repeat": 5, "scale": 0.05, "instruction_scale": 0.01, "extend": 0,
         "webkit_pages": 2, "webkit_repeat": 1, "webkit_peer_repeat": 1,
         "webkit_allocators": QUICK_ANCHORS, "webkit_replay_allocators": QUICK_REPLAYS,
         "webkit_record_pages": 2, "webkit_cost_records": 50_000,
         "counted_allocators": QUICK_ANCHORS, "peer_repeat": None,
         "firefox_pages": 1, "firefox_parent": False, "firefox_replay_allocators": QUICK_REPLAYS,
         "firefox_set": "quick",
         # One-page sessions (pages 1-2 twice and 3-4 took 131 s recorded afresh, 90 s
         # with these), callgrind windows on 2 of the 3 traces (the fewest an interval
         # takes): a trace's windows are nearly all valgrind's way through the whole trace.
         "corpus_ranges": ((1, 1), (1, 1), (2, 2)),
         "corpus_cost_traces": 2, "corpus_windows": 4, "corpus_window_records": 5_000,
         "corpus_hardened_traces": 2, "cache_cost_traces": 1, "firefox_cost_sessions": 1}


def positive(kind):
    """An argparse type: a number of `kind` above 0 (0 would not be a run at all, and must
    not quietly become a preset)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    parse.__name__ = kind.__name__
    return parse
