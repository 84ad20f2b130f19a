"""Typed session callbacks, each kind owning its combining rule (R9).

Session plugins register callbacks on a :class:`~berth.scheduler.framework.sessions.Session`
(``session.hooks.job_ready.add(fn, plugin=NAME)``); actions call the hook as a function. Instead
of dozens of parallel lists with a dispatcher each, there are a few generic hook kinds, typed by
the callback's parameters, and the rule lives with the kind:

- :class:`Ordering` — "First non-zero comparator wins; ties by the fallback key" (creation
  time, then UID, for jobs and tasks; name for queues).
- :class:`AllAgree` — "All must agree": the first non-``SUCCESS`` status, in registration order,
  is the answer; none registered means ``SUCCESS``.
- :class:`AnyTrue` — "Any says yes": True when any callback returns True; none means False.
- :class:`AllTrue` — "All must agree" for yes/no answers; none registered means True.
- :class:`NodePredicates` — vectorised predicates: every row must pass all of them (AND).
- :class:`NodeScores` — vectorised node order: the scores are summed.
- :class:`Events` — every handler is called, in registration order.
- :class:`FirstWins` — the first registered callback's answer; ``None`` when none is registered.
- :class:`Earliest` — the earliest time any callback names; ``None`` when none names one.

A callback that raises is a bug in its plugin: the hook reports it through ``report`` (the
runtime logs it once per plugin per session) and treats it as the most cautious answer of its
kind (a rejecting status, False, no score, no opinion in an ordering).
"""

from __future__ import annotations

import collections.abc
import functools
import math
import typing

import numpy as np
import numpy.typing as npt

from berth.scheduler.framework import filtering, statuses

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import nodetable, pods

__all__ = [
    "AllAgree",
    "AllTrue",
    "AnyTrue",
    "Comparable",
    "Earliest",
    "ErrorReport",
    "Events",
    "FirstWins",
    "NodePredicate",
    "NodePredicates",
    "NodeScorer",
    "NodeScores",
    "Ordering",
]

P = typing.ParamSpec("P")
T = typing.TypeVar("T")
R = typing.TypeVar("R")

ErrorReport = collections.abc.Callable[[str, BaseException], None]
"""``report(plugin, exc)``: how a hook hands a callback's exception to the runtime."""


def _ignore(plugin: str, exc: BaseException) -> None:
    """The default report: tests and tools that build hooks alone."""


class Comparable(typing.Protocol):
    """What an ordering key returns: anything ``<`` works on (ints, floats, tuples...)."""

    def __lt__(self, other: typing.Any, /) -> bool: ...


class Ordering(typing.Generic[T]):
    """First non-zero comparator wins, in registration order; ties by the fallback key.

    A comparator returns a negative number when its first argument goes first, positive when
    the second does, zero when it has no opinion. A key function (``add_key``) counts as the
    comparator of its keys; when every callback is a key function, sorting uses one composite
    key (much faster than comparators on tens of thousands of pods), with the same result.
    """

    def __init__(
        self,
        *,
        fallback: collections.abc.Callable[[T], Comparable],
        report: ErrorReport = _ignore,
    ) -> None:
        self._fallback = fallback
        self._report = report
        self._entries: list[tuple[str, collections.abc.Callable[[T, T], int]]] = []
        self._keys: list[tuple[str, collections.abc.Callable[[T], Comparable]]] = []
        self._all_keys = True
        self._leading = (0, 0)  # leading entries, leading keys

    def add(self, fn: collections.abc.Callable[[T, T], int], *, plugin: str) -> None:
        """Register a comparator."""
        self._entries.append((plugin, fn))
        self._all_keys = False

    def add_key(
        self,
        fn: collections.abc.Callable[[T], Comparable],
        *,
        plugin: str,
        leading: bool = False,
    ) -> None:
        """Register a key function: smaller keys go first. ``leading`` puts it before every
        callback registered without it (a policy that overrides the usual order where it
        has an opinion, such as a queue's own job order)."""

        def compare(a: T, b: T) -> int:
            ka, kb = fn(a), fn(b)
            return -1 if ka < kb else (1 if kb < ka else 0)

        if leading:
            entries, keys = self._leading
            self._entries.insert(entries, (plugin, compare))
            self._keys.insert(keys, (plugin, fn))
            self._leading = (entries + 1, keys + 1)
            return
        self._entries.append((plugin, compare))
        self._keys.append((plugin, fn))

    def __len__(self) -> int:
        return len(self._entries)

    def compare(self, a: T, b: T) -> int:
        """The combined comparison of ``a`` and ``b`` (never 0 unless their fallbacks tie)."""
        for plugin, fn in self._entries:
            try:
                result = fn(a, b)
            except Exception as exc:  # a plugin's bug: no opinion from it
                self._report(plugin, exc)
                continue
            if result:
                return -1 if result < 0 else 1
        fa, fb = self._fallback(a), self._fallback(b)
        return -1 if fa < fb else (1 if fb < fa else 0)

    def sorted(self, items: collections.abc.Iterable[T]) -> list[T]:
        """``items`` in this order (stable for full ties)."""
        if self._all_keys:
            return sorted(items, key=self._composite_key)
        return sorted(items, key=functools.cmp_to_key(self.compare))

    def first(self, items: collections.abc.Iterable[T]) -> T | None:
        """The item that goes first, ``None`` for no items."""
        best: T | None = None
        for item in items:
            if best is None or self.compare(item, best) < 0:
                best = item
        return best

    def _composite_key(self, item: T) -> tuple[Comparable, ...]:
        out: list[Comparable] = []
        for plugin, fn in self._keys:
            try:
                out.append(fn(item))
            except Exception as exc:
                self._report(plugin, exc)
                out.append(0)
        out.append(self._fallback(item))
        return tuple(out)


F = typing.TypeVar("F", bound=collections.abc.Callable[..., typing.Any])


class _Callbacks(typing.Generic[F]):
    """What every callback collector below shares: ``(plugin, callback)`` pairs in order."""

    def __init__(self, *, report: ErrorReport = _ignore) -> None:
        self._report = report
        self._entries: list[tuple[str, F]] = []

    def add(self, fn: F, *, plugin: str) -> None:
        """Register a callback (a FirstWins only ever calls the first one registered)."""
        self._entries.append((plugin, fn))

    def __len__(self) -> int:
        return len(self._entries)


FailureFn = collections.abc.Callable[[str, BaseException, tuple[typing.Any, ...]], None]
"""``failed(plugin, exc, args)``: a callback raised on ``args`` (see :class:`Events`)."""


class AllAgree(_Callbacks[collections.abc.Callable[P, statuses.Status]]):
    """All must agree: the first non-``SUCCESS`` status in registration order wins.

    With nothing registered the answer is ``SUCCESS``. The returned status names its plugin.
    """

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> statuses.Status:
        for plugin, fn in self._entries:
            try:
                status = fn(*args, **kwargs)
            except Exception as exc:
                self._report(plugin, exc)
                return statuses.Status.from_exception(exc, plugin=plugin)
            if not status.is_success():
                return status.with_plugin(plugin)
        return statuses.SUCCESS


class AnyTrue(_Callbacks[collections.abc.Callable[P, bool]]):
    """Any says yes: True as soon as one callback returns True; False with none registered.

    A callback that raises says yes: these are the cautious questions ("is the queue over its
    share?", "has the job starved?"), and a plugin that cannot answer must not wave work
    through the check it exists for (fail closed); ``failed`` is told as well.
    """

    def __init__(self, *, report: ErrorReport = _ignore, failed: FailureFn | None = None) -> None:
        super().__init__(report=report)
        self._failed = failed

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        for plugin, fn in self._entries:
            try:
                if fn(*args, **kwargs):
                    return True
            except Exception as exc:
                self._report(plugin, exc)
                if self._failed is not None:
                    self._failed(plugin, exc, tuple(args))
                return True
        return False


class AllTrue(_Callbacks[collections.abc.Callable[P, bool]]):
    """All must agree: False as soon as one callback returns False (or raises); True if none."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        for plugin, fn in self._entries:
            try:
                if not fn(*args, **kwargs):
                    return False
            except Exception as exc:
                self._report(plugin, exc)
                return False
        return True


class FirstWins(_Callbacks[collections.abc.Callable[P, R]]):
    """The first registered callback's answer; ``None`` when none is registered (or it raised)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R | None:
        if not self._entries:
            return None
        plugin, fn = self._entries[0]
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self._report(plugin, exc)
            return None


class Earliest(_Callbacks[collections.abc.Callable[P, float | None]]):
    """The earliest time any callback names (a clock reading); ``None`` when none names one.

    A callback that raises answers "at once" (``-inf``): these are the questions "when does
    this change by time alone?", and a plugin that cannot answer must not leave work parked
    until something else happens; the caller looks again on its next cycle.
    """

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> float | None:
        earliest: float | None = None
        for plugin, fn in self._entries:
            try:
                at = fn(*args, **kwargs)
            except Exception as exc:
                self._report(plugin, exc)
                return -math.inf
            if at is not None and (earliest is None or at < earliest):
                earliest = at
        return earliest


class Events(_Callbacks[collections.abc.Callable[P, None]]):
    """Every handler is called, in registration order; one raising does not stop the others.

    A handler that raised has missed the event (its books are wrong from here on): besides the
    report, ``failed`` is told, so that the session can stop what those books guard.
    """

    def __init__(self, *, report: ErrorReport = _ignore, failed: FailureFn | None = None) -> None:
        super().__init__(report=report)
        self._failed = failed

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for plugin, fn in self._entries:
            try:
                fn(*args, **kwargs)
            except Exception as exc:
                self._report(plugin, exc)
                if self._failed is not None:
                    self._failed(plugin, exc, tuple(args))


NodePredicate = collections.abc.Callable[
    ["pods.PodInfo", "nodetable.NodeTable"], filtering.NodeFilter
]
"""A session predicate: which rows may run the pod (vectorised, like a Filter plugin)."""

NodeScorer = collections.abc.Callable[
    ["pods.PodInfo", "nodetable.NodeTable", filtering.BoolArray], npt.NDArray[np.int64]
]
"""A session node-order function: a score per row (only the feasible rows matter)."""


class NodePredicates:
    """All must agree, row by row: a row is feasible only if every predicate passes it.

    Predicates run after the Filter plugins, in registration order, and take part in the
    "why pending" reasons like filters do (under their plugin's name). One that raises
    rejects every row with an ``ERROR`` reason.
    """

    def __init__(self, *, report: ErrorReport = _ignore) -> None:
        self._report = report
        self.entries: list[tuple[str, NodePredicate]] = []

    def add(self, fn: NodePredicate, *, plugin: str) -> None:
        """Register a predicate."""
        self.entries.append((plugin, fn))

    def __len__(self) -> int:
        return len(self.entries)

    def extended(self, fn: NodePredicate, *, plugin: str) -> NodePredicates:
        """A copy with ``fn`` added last (for one attempt; this object is unchanged)."""
        out = NodePredicates(report=self._report)
        out.entries = [*self.entries, (plugin, fn)]
        return out

    def evaluate(
        self, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> list[tuple[str, filtering.NodeFilter]]:
        """Every predicate's filter for ``pod``, in registration order."""
        out: list[tuple[str, filtering.NodeFilter]] = []
        for plugin, fn in self.entries:
            try:
                out.append((plugin, fn(pod, nodes)))
            except Exception as exc:
                self._report(plugin, exc)
                out.append(
                    (
                        plugin,
                        filtering.rejecting(
                            len(nodes),
                            reason=f"{plugin} failed: {type(exc).__name__}",
                            code=statuses.Code.ERROR,
                        ),
                    )
                )
        return out


class NodeScores:
    """Summed: each node-order function's scores are added to the Score plugins' total.

    Scores are taken as they are (no normalisation, no weight). One that raises adds nothing.
    """

    def __init__(self, *, report: ErrorReport = _ignore) -> None:
        self._report = report
        self.entries: list[tuple[str, NodeScorer]] = []

    def add(self, fn: NodeScorer, *, plugin: str) -> None:
        """Register a node-order function."""
        self.entries.append((plugin, fn))

    def __len__(self) -> int:
        return len(self.entries)

    def add_to(
        self,
        total: npt.NDArray[np.int64],
        *,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> None:
        """Add every function's scores for ``pod`` to ``total`` in place."""
        for plugin, fn in self.entries:
            try:
                total += fn(pod, nodes, feasible)
            except Exception as exc:
                self._report(plugin, exc)
