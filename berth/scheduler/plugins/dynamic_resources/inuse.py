"""``InUse``: which devices are taken, counting what the session did on top of the snapshot.

The allocator asks, for a device: is it allocated whole to some claim, how much of each
capacity its shares consume, and how much of each shared counter of its pool allocated devices
draw. The snapshot's claims answer first (:class:`~berth.scheduler.snapshot.devices.
AllocatedState`); the session then adds the allocations its Reserve made (a gang's members'
claims, held until the statement commits or rolls back) and takes away what the devices of
pods it evicted held. :meth:`InUse.hold` and :meth:`InUse.release` are exact inverses, so a
rollback restores the books.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses

from berth.scheduler.snapshot import devices, resourceslices

__all__ = ["Choice", "InUse"]

DeviceId = resourceslices.DeviceId
CounterKey = tuple[resourceslices.PoolId, str]


@dataclasses.dataclass(frozen=True)
class Choice:
    """One device allocated for a request (or sub-request) of a claim."""

    request: str  # "gpu" or "gpu/big"
    device: resourceslices.DeviceInfo
    admin_access: bool = False
    consumed: collections.abc.Mapping[str, int] | None = None  # a share: what it consumes
    share: int = 0  # which share of the device within the claim (for a stable share id)

    @property
    def shared(self) -> bool:
        return self.consumed is not None


def _add(into: dict[str, int], amounts: collections.abc.Mapping[str, int], sign: int) -> None:
    for name, amount in amounts.items():
        left = into.get(name, 0) + sign * amount
        if left:
            into[name] = left
        else:
            into.pop(name, None)


class InUse:
    """The snapshot's allocated devices, plus and minus the session's changes."""

    def __init__(self, base: devices.AllocatedState) -> None:
        self._base = base
        # Session deltas: + held by a Reserve, - freed by an eviction.
        self._exclusive: collections.Counter[DeviceId] = collections.Counter()
        self._shares: collections.Counter[DeviceId] = collections.Counter()
        self._consumed: dict[DeviceId, dict[str, int]] = {}
        self._counters: dict[CounterKey, dict[str, int]] = {}
        self._pool_versions: collections.Counter[resourceslices.PoolId] = collections.Counter()
        self.log: list[resourceslices.PoolId] = []
        """The pools changed, in order (one entry per device taken or given back)."""
        self.version = 0
        """Bumped by every change (answers cached against it stay valid while it holds)."""

    # Questions ------------------------------------------------------------------------------
    def exclusive(self, device: DeviceId, /) -> bool:
        """Allocated whole to a claim (admin access aside)."""
        return (device in self._base.exclusive) + self._exclusive.get(device, 0) > 0

    def shared(self, device: DeviceId, /) -> bool:
        """Some claim holds a share of the device's capacity."""
        return (device in self._base.consumed) + self._shares.get(device, 0) > 0

    def consumed(self, device: DeviceId, /) -> collections.abc.Mapping[str, int] | None:
        """What the device's shares consume, ``None`` when it has no share."""
        if not self.shared(device):
            return None
        base = self._base.consumed.get(device) or {}
        extra = self._consumed.get(device)
        if not extra:
            return base
        merged = dict(base)
        _add(merged, extra, 1)
        return merged

    def counters(self, key: CounterKey, /) -> collections.abc.Mapping[str, int]:
        """What allocated devices draw from one counter set of a pool."""
        base = self._base.counters.get(key, {})
        extra = self._counters.get(key)
        if not extra:
            return base
        merged = dict(base)
        _add(merged, extra, 1)
        return merged

    def versions(self, pools: collections.abc.Iterable[resourceslices.PoolId]) -> tuple[int, ...]:
        """How often each of ``pools`` changed: what a node reaching them can allocate stays
        the same while these do (a pool's counters include its devices on other nodes)."""
        return tuple(self._pool_versions[pool] for pool in pools)

    def base_usage(
        self, pools: collections.abc.Iterable[resourceslices.PoolId]
    ) -> tuple[devices.PoolUsage, ...] | None:
        """What the snapshot's claims hold of each of ``pools`` (equal across snapshots while
        they hold the same), ``None`` when this session changed one of them: an answer about
        these pools keyed by it holds in any session that sees the same usage."""
        usage = []
        for pool in pools:
            if self._pool_versions[pool]:
                return None
            usage.append(self._base.pool_usage(pool))
        return tuple(usage)

    def _draws(self, device: DeviceId) -> bool:
        """Whether the device counts as allocated for its pool's counters (once, however
        many share it)."""
        return self.exclusive(device) or self.shared(device)

    def without(self, choices: collections.abc.Iterable[Choice], /) -> InUse:
        """A copy of these books in which ``choices`` are free (what a Reservation holds, as
        its owner sees it); this object is left as it is."""
        copy = InUse(self._base)
        copy._exclusive = collections.Counter(self._exclusive)
        copy._shares = collections.Counter(self._shares)
        copy._consumed = {device: dict(amounts) for device, amounts in self._consumed.items()}
        copy._counters = {key: dict(amounts) for key, amounts in self._counters.items()}
        copy._pool_versions = collections.Counter(self._pool_versions)
        copy.release(choices)
        return copy

    # Changes --------------------------------------------------------------------------------
    def hold(self, choices: collections.abc.Iterable[Choice]) -> None:
        """The session allocated ``choices``."""
        self._move(choices, sign=1)

    def release(self, choices: collections.abc.Iterable[Choice]) -> None:
        """Undo :meth:`hold`, or free devices the snapshot's claims hold (an eviction)."""
        self._move(choices, sign=-1)

    def _move(self, choices: collections.abc.Iterable[Choice], *, sign: int) -> None:
        self.version += 1
        for choice in choices:
            if choice.admin_access:
                continue  # takes nothing from anyone
            device = choice.device
            self._pool_versions[(device.driver, device.pool)] += 1
            self.log.append((device.driver, device.pool))
            drew = self._draws(device.id)
            if choice.consumed is not None:
                self._shares[device.id] += sign
                _add(self._consumed.setdefault(device.id, {}), choice.consumed, sign)
                if not self._consumed[device.id]:
                    del self._consumed[device.id]
            else:
                self._exclusive[device.id] += sign
            if drew != self._draws(device.id):
                change = 1 if not drew else -1
                for draw in device.consumes:
                    key = ((device.driver, device.pool), draw.counter_set)
                    into = self._counters.setdefault(key, {})
                    _add(into, draw.counters, change)
                    if not into:
                        del self._counters[key]
