"""The webkit workload's driver and what the tooling (harness/) shares with it: the pinned
corpus (webkit_corpus) and the trace-mark file (trace_marks). A regular package, not a
namespace one, so that it imports from the zip a report ships to Dask workers.
"""
