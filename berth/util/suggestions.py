"""Did you mean...? The closest known name to one that names nothing, for messages people read.

A typo in a queue name (``defualt``) or a resource name leaves work waiting for something that
will never exist; the message saying so names the closest existing name, as kubectl and git
do. :func:`did_you_mean` is difflib's ratio match with a cut-off that keeps unrelated names
out; the caller words the sentence and may keep the suggestion as a reason's detail.
"""

from __future__ import annotations

import collections.abc
import difflib

__all__ = ["did_you_mean", "suffix"]

_CUTOFF = 0.6


def did_you_mean(name: str, known: collections.abc.Iterable[str]) -> str | None:
    """The known name closest to ``name`` if one is close enough (never ``name`` itself)."""
    candidates = [k for k in known if k != name]
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def suffix(name: str, known: collections.abc.Iterable[str]) -> str:
    """`` (did you mean NAME?)`` for the closest known name, or ``""``."""
    best = did_you_mean(name, known)
    return f" (did you mean {best}?)" if best is not None else ""
