"""``PriorityClassStore``: the PriorityClasses the cache has seen, and the default they name.

Owns each class's value and whether it claims to be the global default, the value every pod
naming a class resolves to, and the priority of pods naming none (Kubernetes' admission picks
the lowest-valued class when several claim the default). The classes every API server creates
(:data:`SYSTEM_PRIORITY_CLASSES`) are known before the informer reports them. Pure and
synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing

from berth.scheduler.snapshot import wire

__all__ = ["SYSTEM_PRIORITY_CLASSES", "PriorityClassStore"]

SYSTEM_PRIORITY_CLASSES: collections.abc.Mapping[str, int] = types.MappingProxyType(
    {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
)
"""The classes every API server creates; known before the informer reports them."""


@dataclasses.dataclass(frozen=True)
class _PriorityClass:
    value: int
    global_default: bool


class PriorityClassStore:
    """PriorityClasses by name; :attr:`values` and :attr:`default` are what pods resolve to."""

    def __init__(self) -> None:
        self._classes: dict[str, _PriorityClass] = {
            name: _PriorityClass(value, False) for name, value in SYSTEM_PRIORITY_CLASSES.items()
        }
        self.values: dict[str, int] = dict(SYSTEM_PRIORITY_CLASSES)
        """Class name -> value (replaced, never changed in place: parsed infos keep theirs)."""
        self.default = 0
        """The priority of a pod naming no class."""

    def add(self, raw: typing.Any, /) -> None:
        """Add or update a PriorityClass (``scheduling.k8s.io/v1``)."""
        obj = wire.as_raw(raw)
        value = obj.get("value", 0)
        self._classes[wire.name_of(obj)] = _PriorityClass(
            value=value if isinstance(value, int) and not isinstance(value, bool) else 0,
            global_default=bool(obj.get("globalDefault")),
        )
        self._changed()

    def remove(self, priority_class: typing.Any, /) -> bool:
        """Remove a PriorityClass (by name or object); whether it was known."""
        if self._classes.pop(wire.name_of(priority_class), None) is None:
            return False
        self._changed()
        return True

    def view(self) -> collections.abc.Mapping[str, int]:
        """Class name -> value, sorted, for a snapshot."""
        return types.MappingProxyType(dict(sorted(self.values.items())))

    def _changed(self) -> None:
        self.values = {name: pc.value for name, pc in self._classes.items()}
        defaults = [pc.value for pc in self._classes.values() if pc.global_default]
        # Kubernetes' admission picks the lowest-valued class when several claim the default.
        self.default = min(defaults, default=0)
