"""Which processes a test left running: the children it started and did not stop.

The real-cluster tier shares one control plane between many tests (a session fixture), so
"this process has no children" is false while that plane runs; a test asks instead which
children appeared since it began.
"""

from __future__ import annotations

import os
import pathlib

# multiprocessing starts its resource tracker once, on first use, and keeps it for the
# interpreter's life by design: it is not a component a test started and forgot.
_INTERPRETER_HELPERS = ("multiprocessing.resource_tracker",)


def children() -> dict[int, str]:
    """This process's live (not zombie) children: pid to command line."""
    found = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_text().replace("\0", " ")
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found[int(stat.parent.name)] = cmdline
    return found


def left_behind(before: dict[int, str]) -> list[str]:
    """Command lines of children started since ``before`` was taken that still run."""
    return [
        cmdline
        for pid, cmdline in children().items()
        if pid not in before and not any(helper in cmdline for helper in _INTERPRETER_HELPERS)
    ]
