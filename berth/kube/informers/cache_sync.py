"""Whether the cache holds every source's first list: the ``caches-synced`` readiness.

:class:`CacheSync` is shared by everything that feeds one ``ClusterCache``: the informers
(:mod:`berth.kube.informers.cluster_informers`) and the leader's Kopf handlers of Berth's kinds
(:mod:`berth.controllers.indexing`). The ``caches-synced`` readiness condition is true once every
source has listed once, and false again while any cannot follow the API server.
"""

from __future__ import annotations

import asyncio
import typing

__all__ = ["CRD_HINT", "READINESS_CONDITION", "CacheSync", "ReadinessSink"]

READINESS_CONDITION = "caches-synced"

CRD_HINT = "are Berth's CRDs installed? (kubectl apply -f crds/)"
"""What a 404 for one of Berth's kinds most likely means, said where readiness says why."""


class ReadinessSink(typing.Protocol):
    """Where informers report whether the caches are usable (the operator's readiness)."""

    def set(self, name: str, *, ready: bool, reason: str = "") -> None: ...

    def remove(self, name: str) -> None: ...


class CacheSync:
    """Whether one cache holds the first list of every source that feeds it.

    A source (an informer's resource, or one of the kinds Kopf's handlers feed) is expected
    with :meth:`expect` when its feeder is built, says :meth:`listed` once its first list is in
    the cache, and :meth:`following` whether it can follow the API server now (a reason when it
    cannot). ``synced`` is set once every expected source has listed once, and never cleared;
    the ``caches-synced`` readiness condition says which sources are still missing or failing.
    """

    def __init__(self, readiness: ReadinessSink | None = None) -> None:
        self._readiness = readiness
        self._waiting: dict[str, None] = {}  # expected, not listed yet, in the order expected
        self._problems: dict[str, str] = {}
        self.synced = asyncio.Event()
        """Set once every expected source has listed once."""

    def expect(self, name: str) -> None:
        """Wait for ``name``'s first list too."""
        if self.synced.is_set():
            raise RuntimeError(f"{name}: the cache is synced already; expect sources first")
        self._waiting[name] = None

    def listed(self, name: str) -> None:
        """``name``'s first list is in the cache."""
        self._waiting.pop(name, None)
        if not self._waiting:
            self.synced.set()
        self.report()

    def following(self, name: str, problem: str | None = None) -> None:
        """Whether ``name`` follows the API server now (``problem``: why it cannot)."""
        if problem is None:
            if self._problems.pop(name, None) is None:
                return
        elif self._problems.get(name) == problem:
            return
        else:
            self._problems[name] = problem
        self.report()

    def report(self) -> None:
        """Tell the readiness sink how the sources are doing."""
        if self._readiness is None:
            return
        if self._problems:
            reason = "; ".join(f"{name}: {problem}" for name, problem in self._problems.items())
            self._readiness.set(READINESS_CONDITION, ready=False, reason=reason)
        elif self._waiting:
            reason = f"waiting for the first list of {', '.join(self._waiting)}"
            self._readiness.set(READINESS_CONDITION, ready=False, reason=reason)
        else:
            self._readiness.set(READINESS_CONDITION, ready=True)
