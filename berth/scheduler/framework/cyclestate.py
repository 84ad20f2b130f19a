"""``CycleState``: per-pod scratch data shared by the plugins of one scheduling attempt.

The runtime creates one ``CycleState`` per pod attempt; a plugin writes what it computed at
PreFilter/PreScore under a key of its own (``StateKey(f"{NAME}/prescore")``) and reads it back
at Filter/Score through a typed getter. Like Kubernetes' CycleState it is not locked: all
plugins are trusted and the core is single-threaded. Nothing in it outlives the attempt.

Typed getter pattern (R8)::

    def _get_prescore(state: cyclestate.CycleState) -> PreScoreState | statuses.Status:
        return state.read_as(PRESCORE_KEY, kind=PreScoreState)
"""

from __future__ import annotations

import typing

from berth.scheduler.framework import statuses

__all__ = ["CycleState", "StateData", "StateKey"]

StateKey = typing.NewType("StateKey", str)
"""A key in a :class:`CycleState`, namespaced by plugin: ``StateKey("Gang/prefilter")``."""

_DataT = typing.TypeVar("_DataT", bound="StateData")


class StateData(typing.Protocol):
    """A value stored in a :class:`CycleState`."""

    def clone(self) -> StateData:
        """An independent copy (used when a state is cloned, e.g. to try a what-if)."""
        ...


class CycleState:
    """A key/value store for one pod attempt, plus the runtime's skip sets."""

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[StateKey, StateData] = {}
        self.skip_filter_plugins: set[str] = set()
        """Filter plugins whose PreFilter returned ``SKIP`` for this pod (the runtime's)."""
        self.skip_score_plugins: set[str] = set()
        """Score plugins whose PreScore returned ``SKIP`` for this pod (the runtime's)."""

    def read(self, key: StateKey) -> StateData:
        """The value under ``key``; ``KeyError`` when nothing was written."""
        return self._data[key]

    def read_as(self, key: StateKey, *, kind: type[_DataT]) -> _DataT | statuses.Status:
        """The value under ``key`` if it is a ``kind``, else an ``ERROR`` status saying why.

        This is the typed getter every plugin uses: a missing key or a wrong type is a bug
        in the plugin pair that wrote and read it, so it is an error, not a rejection.
        """
        value = self._data.get(key)
        if value is None:
            return statuses.new(statuses.Code.ERROR, f"no cycle state under {key!r}")
        if not isinstance(value, kind):
            return statuses.new(
                statuses.Code.ERROR,
                f"cycle state {key!r} is a {type(value).__name__}, expected {kind.__name__}",
            )
        return value

    def write(self, key: StateKey, value: StateData) -> None:
        """Store ``value`` under ``key``, replacing what was there."""
        self._data[key] = value

    def delete(self, key: StateKey) -> None:
        """Forget ``key``; deleting a missing key does nothing."""
        self._data.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def clone(self) -> CycleState:
        """A deep-enough copy: every value is cloned, the skip sets are copied."""
        other = CycleState()
        other._data = {k: v.clone() for k, v in self._data.items()}
        other.skip_filter_plugins = set(self.skip_filter_plugins)
        other.skip_score_plugins = set(self.skip_score_plugins)
        return other
