"""Copy-on-write mappings: a snapshot of thousands of entries in O(1), changes copied lazily.

Owns the one data structure that lets :class:`~berth.scheduler.snapshot.cache.ClusterCache`
hand every cycle a private, unchanging view of every pod, group and node without copying them
all each cycle. A :class:`CowMap` (the cache's side, mutable) keeps its entries in
:data:`SHARDS` plain dicts chosen by the key's hash. :meth:`CowMap.freeze` returns a
:class:`FrozenMap` that shares those dicts and marks them shared; the next write to a shared
dict copies that dict first (about ``len / SHARDS`` entries), so a snapshot costs the shards
changed since the previous one, not the whole map, and what a view holds never changes.

A :class:`FrozenMap` iterates in sorted key order (sorted once, on first iteration), so its
order is deterministic and does not depend on string hashing. Keys are ``str``.
:class:`SortedOnRead` is the same idea for a sequence: the items as they were, put in key
order when first read (a snapshot's pending pods, which most cycles read only by group);
over a frozen map's values (:meth:`FrozenMap.values_in_any_order`) it costs nothing until then.

Writes and :meth:`CowMap.freeze` must come from one thread (the cache's); a frozen view may be
read from any thread, since nothing writes to a dict it holds.
"""

from __future__ import annotations

import collections.abc
import typing

__all__ = [
    "SHARDS",
    "CowMap",
    "FrozenMap",
    "SortedOnRead",
    "in_any_order",
    "items_in_any_order",
]

SHARDS = 64
"""Dicts per map: a snapshot copies the changed ones. 64 keeps both the per-snapshot bookkeeping
and the copy per changed shard small for maps of a few hundred to a few hundred thousand keys."""
_MASK = SHARDS - 1

V = typing.TypeVar("V")
_MISSING: typing.Any = object()


class SortedOnRead(collections.abc.Sequence[V]):
    """``items`` in ``key`` order, sorted when first read; equal to a tuple of the same.
    ``items`` must not change (a tuple, or a frozen map's values)."""

    __slots__ = ("_items", "_key", "_sorted")

    def __init__(
        self, items: collections.abc.Collection[V], /, *, key: collections.abc.Callable[[V], str]
    ) -> None:
        self._items = items
        self._key = key
        self._sorted: tuple[V, ...] | None = None

    def _get(self) -> tuple[V, ...]:
        if self._sorted is None:
            self._sorted = tuple(sorted(self._items, key=self._key))
        return self._sorted

    @typing.overload
    def __getitem__(self, index: int) -> V: ...

    @typing.overload
    def __getitem__(self, index: slice) -> tuple[V, ...]: ...

    def __getitem__(self, index: int | slice) -> V | tuple[V, ...]:
        return self._get()[index]

    def __iter__(self) -> collections.abc.Iterator[V]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SortedOnRead):
            return self._get() == other._get()
        if isinstance(other, tuple):
            return self._get() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SortedOnRead({self._get()!r})"


class FrozenMap(collections.abc.Mapping[str, V]):
    """An unchanging view taken by :meth:`CowMap.freeze`; iterates in key order."""

    __slots__ = ("_order", "_shards", "_size")

    def __init__(self, shards: tuple[dict[str, V], ...], /, *, size: int) -> None:
        self._shards = shards
        self._size = size
        self._order: list[str] | None = None

    def __getitem__(self, key: str) -> V:
        return self._shards[hash(key) & _MASK][key]

    def get(self, key: str, default: typing.Any = None) -> typing.Any:
        return self._shards[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & _MASK]

    def __iter__(self) -> collections.abc.Iterator[str]:
        order = self._order
        if order is None:
            order = self._order = sorted(k for shard in self._shards for k in shard)
        return iter(order)

    def __len__(self) -> int:
        return self._size

    def values_in_any_order(self) -> collections.abc.Collection[V]:
        """The values in no particular order, without sorting the keys (O(1) until read)."""
        return _Values(self)

    def __repr__(self) -> str:
        return f"FrozenMap({dict(self.items())!r})"


class _Values(collections.abc.Collection[V]):
    """A frozen map's values, shard by shard (:meth:`FrozenMap.values_in_any_order`)."""

    __slots__ = ("_map",)

    def __init__(self, frozen: FrozenMap[V], /) -> None:
        self._map = frozen

    def __iter__(self) -> collections.abc.Iterator[V]:
        for shard in self._map._shards:
            yield from shard.values()

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, value: object) -> bool:
        return any(v is value or v == value for v in self)


def in_any_order(items: collections.abc.Sequence[V], /) -> collections.abc.Iterable[V]:
    """``items`` in no particular order: for a :class:`SortedOnRead`, without sorting them
    (a count of a long backlog need not put it in order first)."""
    return items._items if isinstance(items, SortedOnRead) else items


def items_in_any_order(
    mapping: collections.abc.Mapping[str, V], /
) -> collections.abc.Iterator[tuple[str, V]]:
    """``mapping``'s items in no particular order: for a :class:`FrozenMap`, without sorting
    its keys (what a cycle that keeps a few of thousands entries sorts is the few)."""
    if isinstance(mapping, FrozenMap):
        for shard in mapping._shards:
            yield from shard.items()
    else:
        yield from mapping.items()


class CowMap(collections.abc.MutableMapping[str, V]):
    """The writer's side; see the module docstring. Iteration order is arbitrary."""

    __slots__ = ("_frozen", "_owned", "_shards", "_size")

    def __init__(self, items: collections.abc.Mapping[str, V] | None = None) -> None:
        self._shards: list[dict[str, V]] = [{} for _ in range(SHARDS)]
        self._owned = [True] * SHARDS  # False: a frozen view shares the shard
        self._size = 0
        self._frozen: FrozenMap[V] | None = None  # the last view, while nothing changed
        for key, value in (items or {}).items():
            self[key] = value

    def _writable(self, key: str) -> dict[str, V]:
        self._frozen = None
        i = hash(key) & _MASK
        if self._owned[i]:
            return self._shards[i]
        shard = self._shards[i] = dict(self._shards[i])
        self._owned[i] = True
        return shard

    def __getitem__(self, key: str) -> V:
        return self._shards[hash(key) & _MASK][key]

    def get(self, key: str, default: typing.Any = None) -> typing.Any:
        return self._shards[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & _MASK]

    def __setitem__(self, key: str, value: V) -> None:
        shard = self._writable(key)
        if key not in shard:
            self._size += 1
        shard[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        del self._writable(key)[key]
        self._size -= 1

    def pop(self, key: str, default: typing.Any = _MISSING) -> typing.Any:
        if key not in self:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = self._writable(key).pop(key)
        self._size -= 1
        return value

    def __iter__(self) -> collections.abc.Iterator[str]:
        for shard in self._shards:
            yield from shard

    def __len__(self) -> int:
        return self._size

    def clear(self) -> None:
        """Forget every entry (views taken keep theirs), in O(:data:`SHARDS`)."""
        self._shards = [{} for _ in range(SHARDS)]
        self._owned = [True] * SHARDS
        self._size = 0
        self._frozen = None

    def freeze(self) -> FrozenMap[V]:
        """A view of the entries now, unchanged by later writes (O(:data:`SHARDS`))."""
        if self._frozen is None:
            self._owned = [False] * SHARDS
            self._frozen = FrozenMap(tuple(self._shards), size=self._size)
        return self._frozen
