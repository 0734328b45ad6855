"""Checkpoint marks for the trace recorder: the file both browser workloads (WebKitGTK's
driver.py, the Firefox recorder in harness.firefox_record) publish checkpoint labels
through. Standard library only."""

from __future__ import annotations

import mmap
import os
import struct


class MarksFull(Exception):
    """A label that cannot be published: not a label, or the marks file is full."""


class TraceMarks:
    """Publishes checkpoint labels to the trace recorder (tools/trace/format.md): the
    file named by RUNSEL_TRACE_MARKS is 65536 bytes, zero-filled; bytes 0..7 hold the
    number of labels published (little-endian), labels follow from byte 64, each
    NUL-terminated. The label's bytes are written before the count is stored, so a
    traced process that sees the count sees the label (x86 keeps stores in order)."""

    SIZE = 65536
    LABELS_START = 64

    def __init__(self, path: str | None):
        self.count, self.next_label, self.file = 0, self.LABELS_START, None
        if not path:
            return
        # Truncating the same inode (never unlink and recreate): a traced process that
        # mapped the file before the driver started keeps seeing it.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, 0)
            os.ftruncate(fd, self.SIZE)
            self.file = mmap.mmap(fd, self.SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)

    def publish(self, label: str) -> None:
        if self.file is None:
            return
        data = label.encode() + b"\0"
        if b"\0" in data[:-1] or self.next_label + len(data) > self.SIZE:
            raise MarksFull(f"trace mark {label!r}: not a label, or the marks file is full")
        self.file[self.next_label:self.next_label + len(data)] = data
        self.next_label += len(data)
        self.count += 1
        struct.pack_into("<Q", self.file, 0, self.count)
