"""The names the Firefox workload's runs and its report share, plain data: the row of
the reference replay on Firefox's own allocator, and the Firefox corpus's groups.
"""

REFERENCE_NAME = "firefox"  # the reference row's name, beside the containers
GROUPS = {  # group: (process role, row suffix), judged apart
    "firefox": ("content", "@firefox"),
    "firefox_classic": ("content", ""),
    "firefox_parent": ("parent", "@firefox"),
}
CORPUS_GROUP_LABELS = {  # group: the words a table's title gives it
    "firefox": "Firefox corpus, content logs, the installed Firefox's run sizes",
    "firefox_classic": "Firefox corpus, content logs, the classic run sizes",
    "firefox_parent": "Firefox corpus, parent logs, the installed Firefox's run sizes",
}
