"""``ReservationStore``: the cache's Reservations, their owners, and the reserve pods they want.

Owns each Reservation as last seen — or as the binder assumed it Available while its status
write is in flight —, which pods are annotated ``scheduling.berth.io/reservation-allocated``
with each (its owners, and the reverse), the deadlines of the reserve pods that end at one, and
the time of the last snapshot (an expired Reservation holds nothing from then on, whatever its
status says yet).

Reservations become *reserve pods* (docs/architecture.md, :mod:`.reservations`):
:meth:`ReservationStore.reserve_pod` says what a Reservation's should be now — a Pending one is
a pending pod of its queue, an Available one a placed pod holding what its owners do not use
(the owners are the pods its owners' selector matches that are annotated with it and run on its
node: the annotation on any other pod is ignored, so a tenant cannot end another's reservation
by writing it). An allocate-once reservation holds nothing once it has an owner; an ended,
expired or deleted one holds nothing at once. The cache stores the reserve pods among the pods.

Pure and synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types

from berth.api import resources
from berth.scheduler.snapshot import ids, pods, reservations, resourceclaims

__all__ = ["ReservationStore"]


class ReservationStore:
    """Reservations by key and their owners; :meth:`view` gives a snapshot the Reservations."""

    def __init__(self) -> None:
        self._reservations: dict[str, reservations.ReservationInfo] = {}
        self._assumed: set[str] = set()  # placed by the binder, status not seen yet
        # Owners: reservation key -> pods annotated as placed into it, and the reverse.
        self._owners: dict[str, set[str]] = {}
        self._owned_by: dict[str, str] = {}
        self._deadlines: dict[str, float] = {}  # reserve pods that end at a time
        self.now: float | None = None
        """The time of the last snapshot (``None`` before the first)."""

    def add(self, info: reservations.ReservationInfo, /) -> None:
        """Add or update a Reservation. An update still ``Pending`` keeps an assumed placement
        (:meth:`assume`): it was written before the status (Kopf's handling marks, a label),
        and taking it at its word would place the reservation a second time."""
        assumed = self._reservations.get(info.key)
        if (
            assumed is not None
            and assumed.uid == info.uid
            and info.key in self._assumed
            and info.phase == reservations.PENDING
        ):
            info = dataclasses.replace(
                info,
                phase=assumed.phase,
                node_name=assumed.node_name,
                allocatable=assumed.allocatable,
                devices=assumed.devices,
            )
        else:
            self._assumed.discard(info.key)
        self._reservations[info.key] = info

    def remove(self, key: str, /) -> bool:
        """Forget the Reservation ``key``; whether it was known."""
        self._assumed.discard(key)
        return self._reservations.pop(key, None) is not None

    def assume(
        self,
        key: str,
        /,
        *,
        node: str,
        allocatable: resources.ResourceList,
        devices: tuple[tuple[str, resourceclaims.AllocatedDevice], ...] = (),
    ) -> None:
        """Count the Reservation ``key`` as Available on ``node`` (holding ``devices`` for its
        template's claims) until an update shows its status moved on, or it is replaced or
        removed."""
        info = self._reservations.get(key)
        if info is None:
            raise KeyError(f"cannot assume unknown reservation {key!r}")
        self._assumed.add(key)
        self._reservations[key] = dataclasses.replace(
            info,
            phase=reservations.AVAILABLE,
            node_name=ids.NodeName(node),
            allocatable=allocatable,
            devices=devices,
        )

    def owner_changed(self, info: pods.PodInfo, /) -> list[str]:
        """Keep the owners current for the (non-reserve) pod ``info`` that changed: the keys of
        the Reservations whose reserve pod may change with it."""
        found = reservations.allocated_to(info)
        now = found[0] if found is not None else None
        before = self._owned_by.get(info.key)
        if before is None and now is None:
            return []
        touched = []
        if before != now:
            if before is not None:
                self._drop_owner(info.key, before)
                touched.append(before)
            if now is not None:
                self._owned_by[info.key] = now
                self._owners.setdefault(now, set()).add(info.key)
        if now is not None:
            touched.append(now)
        return touched

    def owner_gone(self, key: str, /) -> str | None:
        """The pod ``key`` is gone: the Reservation it owned, if any."""
        owned = self._owned_by.pop(key, None)
        if owned is not None:
            self._owners[owned].discard(key)
            if not self._owners[owned]:
                del self._owners[owned]
        return owned

    def _drop_owner(self, pod: str, reservation: str) -> None:
        self._owned_by.pop(pod)
        self._owners[reservation].discard(pod)
        if not self._owners[reservation]:
            del self._owners[reservation]

    def expired(self, now: float, /) -> list[str]:
        """Set the snapshot's time to ``now``: the Reservations whose reserve pod ran out by
        then, sorted."""
        self.now = now
        return sorted(k for k, ends in self._deadlines.items() if ends <= now)

    def reserve_pod(
        self,
        key: str,
        /,
        *,
        infos: collections.abc.Mapping[str, pods.PodInfo],
        scheduler_names: tuple[str, ...],
        priority_classes: collections.abc.Mapping[str, int],
        default_priority: int,
    ) -> pods.PodInfo | None:
        """The reserve pod the Reservation ``key`` should have now (``None``: none), its owners
        looked up in ``infos``; remembers when it ends."""
        wanted = self._reserve_pod(
            key,
            infos=infos,
            scheduler_names=scheduler_names,
            priority_classes=priority_classes,
            default_priority=default_priority,
        )
        info = self._reservations.get(key)
        ends = reservations.deadline(info) if info is not None and wanted is not None else None
        if ends is not None:
            self._deadlines[key] = ends
        else:
            self._deadlines.pop(key, None)
        return wanted

    def held_claims(self, key: str, /, *, holds: bool) -> tuple[reservations.HeldClaim, ...]:
        """The held claims of the Reservation ``key`` (none unless its reserve pod ``holds``:
        it exists, i.e. the reservation has not ended or been used)."""
        info = self._reservations.get(key)
        return reservations.held_claims(info) if info is not None and holds else ()

    def _reserve_pod(
        self,
        key: str,
        /,
        *,
        infos: collections.abc.Mapping[str, pods.PodInfo],
        scheduler_names: tuple[str, ...],
        priority_classes: collections.abc.Mapping[str, int],
        default_priority: int,
    ) -> pods.PodInfo | None:
        info = self._reservations.get(key)
        if info is None or info.terminal:
            return None
        ends = reservations.deadline(info)
        if ends is not None and self.now is not None and ends <= self.now:
            return None  # expired: free at once, whatever its status says yet
        pod = reservations.reserve_pod(
            info,
            scheduler_names=scheduler_names,
            priority_classes=priority_classes,
            default_priority=default_priority,
        )
        if pod.node_name is None:
            return pod
        owners, used = self._owners_used(info, infos)
        if info.allocate_once and (owners or info.current_owners):
            return None  # used once: the remainder is free
        remaining = (pod.requests - used).clamp_negative()
        return dataclasses.replace(pod, requests=remaining) if remaining else None

    def _owners_used(
        self,
        info: reservations.ReservationInfo,
        infos: collections.abc.Mapping[str, pods.PodInfo],
    ) -> tuple[int, resources.ResourceList]:
        """How many live owners run in ``info`` on its node, and what they request."""
        count, used = 0, resources.ResourceList()
        for key in sorted(self._owners.get(info.key, ())):
            pod = infos.get(key)
            found = reservations.allocated_to(pod) if pod is not None else None
            if pod is None or found is None or pod.terminal or pod.node_name != info.node_name:
                continue
            if not reservations.is_owner(info, pod):
                continue  # the annotation on a pod its owners do not select: not Berth's word
            if found[1] is not None and found[1] != info.uid:
                continue  # placed into an earlier reservation of the same name
            count += 1
            used += pod.requests
        return count, used

    def view(self) -> collections.abc.Mapping[str, reservations.ReservationInfo]:
        """The Reservations for a snapshot, sorted."""
        return types.MappingProxyType(dict(sorted(self._reservations.items())))
