"""Admission mode's pending allocations: nodes Berth chose for gated pods, not bound there yet.

:class:`Allocations` is the ledger :class:`~berth.kube.admission.admission.Admission` keeps, one
:class:`Allocation` per pod key, and the one place that keeps it and the scheduler's cache in
step: while an allocation lives the cache assumes the pod on its node (the next cycle already
counts the capacity as used; admission assumes the devices found for its ResourceClaims too),
and dropping the allocation makes the cache forget both (the capacity is free again). An
allocation ends well when the pod is bound where Berth put it — the assumption has become
the real thing, so it is only forgotten here.

Allocations a previous leader made are *adopted* from the pods' annotations
(``admitted-node``/``admitted-at``); the informers may deliver such a pod before the cache has
it, so the cache assumes adopted ones at the next snapshot (:meth:`Allocations.assume_adopted`).
Runs on the event loop only.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.kube.admission.admission_states import AllocationState
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import resourceclaims

__all__ = ["Allocation", "AllocationState", "Allocations"]


@dataclasses.dataclass
class Allocation:
    """A pending allocation: Berth chose ``node`` for the pod; it is not bound there yet."""

    key: str
    uid: str
    node: str
    group: str | None
    state: AllocationState
    since: float  # when it was admitted (the gate removed), for the bind timeout


class Allocations(collections.abc.Mapping[str, Allocation]):
    """Pending allocations by pod key, mirrored in ``cache`` (see the module docstring)."""

    def __init__(self, cache: cluster_cache.ClusterCache) -> None:
        self._cache = cache
        self._by_key: dict[str, Allocation] = {}
        self._unassumed: set[str] = set()  # adopted, and the cache has yet to assume them

    def __getitem__(self, key: str) -> Allocation:
        return self._by_key[key]

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._by_key)

    def __contains__(self, key: object) -> bool:
        # Asked of every pod the informer sees: the Mapping default raises a KeyError per miss.
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def start(self, key: str, *, uid: str, node: str, group: str | None, now: float) -> bool:
        """Assume the pod on ``node`` and record its allocation (pin and ungate to follow);
        False when the cache no longer has the pod (it went while the session ran)."""
        try:
            self._cache.assume_pod(key, node=node)
        except KeyError:
            return False
        self._by_key[key] = Allocation(key, uid, node, group, AllocationState.PINNING, now)
        return True

    def adopt(self, key: str, *, uid: str, node: str, since: float) -> None:
        """Take over an ungated, unbound pod a previous leader admitted to ``node``."""
        self._by_key[key] = Allocation(key, uid, node, None, AllocationState.UNGATED, since)
        self._unassumed.add(key)

    def assume_adopted(self) -> None:
        """Let the cache assume the adopted allocations it has the pods of by now."""
        for key in sorted(self._unassumed):
            allocation = self._by_key.get(key)
            if allocation is not None:
                try:
                    self._cache.assume_pod(key, node=allocation.node)
                except KeyError:
                    continue  # not cached yet: the next snapshot
            self._unassumed.discard(key)

    def bound(self, key: str) -> None:
        """The pod is bound where Berth put it: the allocation is done, the cache keeps it."""
        self._by_key.pop(key, None)

    def assume_devices(self, reserving: collections.abc.Iterable[decisions.ReserveClaim]) -> None:
        """Count the devices found for admitted pods' claims as taken while their pending
        allocations live (:meth:`drop` forgets them)."""
        for decision in reserving:
            if f"{decision.namespace}/{decision.pod}" not in self._by_key:
                continue  # gone while the session ran
            self._cache.assume_resource_claim(
                decision.key,
                uid=decision.uid,
                pod=decision.pod,
                pod_uid=decision.pod_uid,
                allocation=resourceclaims.allocation_info(decision.allocation)
                if decision.allocation is not None
                else None,
            )

    def drop(self, allocation: Allocation) -> None:
        """End ``allocation`` unbound: the cache forgets the pod's assumed place, and the
        devices assumed for its ResourceClaims."""
        self._by_key.pop(allocation.key, None)
        self._cache.forget_pod(allocation.key)
        self._cache.forget_pod_resource_claims(allocation.key)

    def overdue(self, now: float, *, timeout: float) -> list[Allocation]:
        """Ungated allocations still unbound ``timeout`` seconds after their gate went."""
        return [
            self._by_key[key]
            for key in sorted(self._by_key)
            if self._by_key[key].state is AllocationState.UNGATED
            and now - self._by_key[key].since >= timeout
        ]
