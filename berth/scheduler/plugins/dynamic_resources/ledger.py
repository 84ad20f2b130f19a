"""``Ledger``: the claims a session has allocated and reserved, held until it commits or undoes.

kube-scheduler keeps an allocation made in Reserve "in flight" until PreBind writes it, and a
gang's members see each other's in-flight allocations. Berth's session does the same: the
ledger holds each allocation a Reserve made (:class:`Held`: the claim, the devices, the pod
whose Reserve made it, and the other pods of the session that use the claim), so that

- the next pods of the session see those devices taken (:attr:`Ledger.in_use`) and the claim
  allocated, with its node selector (a gang's members sharing a claim go where it is);
- Unreserve gives them back, unless another pod of the session still uses the claim (it then
  takes over the allocation, as upstream keeps it until its last user goes);
- PreBind knows which pod writes the allocation (its holder) and which only reserve the claim.

It also frees, for the session, the devices of the claims made for pods the session evicts
(reclaim and preemption can then place DRA pods where the victims' devices were), and answers
what each pod's claims take of devices for queue accounting. Built at session open, dropped at
close (R8).
"""

from __future__ import annotations

import collections.abc
import dataclasses

import numpy as np
import numpy.typing as npt

from berth.api import resources
from berth.scheduler.plugins.dynamic_resources import allocator, inuse
from berth.scheduler.snapshot import devices, pods, resourceclaims, resourceslices

__all__ = ["Feasibility", "Held", "Ledger"]


@dataclasses.dataclass
class Held:
    """An allocation the session made for a claim and holds until it commits or undoes."""

    allocation: allocator.ClaimAllocation
    holder: str  # the pod whose Reserve made it (its PreBind writes it)
    users: list[str] = dataclasses.field(default_factory=list)  # other pods reserving it


@dataclasses.dataclass
class Feasibility:
    """Where claims of some specs can be allocated now, row by row of the node table, and as
    of which change of the devices in use (:attr:`inuse.InUse.log`)."""

    fits: npt.NDArray[np.bool_]
    failures: dict[int, allocator.Unallocatable]
    seen: int


class Ledger:
    """One session's allocations and reservations; see the module docstring."""

    def __init__(
        self,
        snapshot_devices: devices.Devices,
        *,
        pods_by_key: collections.abc.Mapping[str, pods.PodInfo] | None = None,
    ) -> None:
        self.devices = snapshot_devices
        self._pods = pods_by_key or {}
        self._first_users: dict[str, str] | None = None
        self.catalog = snapshot_devices.catalog
        self.in_use = inuse.InUse(snapshot_devices.allocated)
        self.held: dict[str, Held] = {}  # claim key -> what the session allocated for it
        self.users: dict[str, list[str]] = {}  # claim key -> pods of the session reserving it
        self._freed: set[str] = set()  # pods evicted this session whose devices are free
        self._pools: dict[str, tuple[devices.Pool, ...]] = {}
        self.feasible: dict[collections.abc.Hashable, bool | allocator.Unallocatable] = {}
        """Per (claims' specs, node, versions of the pools it reaches): whether claims like
        these can be allocated there now — pods of one template share the answer until a pool
        the node reaches changes."""
        self.masks: dict[tuple[resourceclaims.ClaimSpec, ...], Feasibility] = {}
        """The same per row, for whole node tables: a Filter brings one up to date by the rows
        whose pools changed since, not by every row."""
        self._pool_rows: dict[resourceslices.PoolId, list[int]] | None = None

    @property
    def version(self) -> int:
        """Moves whenever the devices in use change."""
        return self.in_use.version

    def pools_for(
        self, node: str, /, *, labels: collections.abc.Mapping[str, str]
    ) -> tuple[devices.Pool, ...]:
        """The pools ``node`` reaches (worked out once per session)."""
        found = self._pools.get(node)
        if found is None:
            found = self._pools[node] = self.catalog.pools_for(node, labels=labels)
        return found

    def rows_changed(
        self,
        since: int,
        /,
        *,
        rows: collections.abc.Callable[
            [], collections.abc.Iterable[tuple[int, tuple[devices.Pool, ...]]]
        ],
    ) -> set[int]:
        """The rows reaching a pool changed since ``since`` (a position in the in-use log).
        ``rows`` gives each row's pools, once per session, to index them."""
        if self._pool_rows is None:
            index: dict[resourceslices.PoolId, list[int]] = {}
            for row, pools in rows():
                for pool in pools:
                    index.setdefault(pool.id, []).append(row)
            self._pool_rows = index
        changed = set(self.in_use.log[since:])
        return {row for pool in changed for row in self._pool_rows.get(pool, ())}

    def allocation_of(self, key: str, /) -> resourceclaims.AllocationInfo | None:
        """The claim's allocation as this session sees it (the snapshot's, else its own)."""
        claim = self.devices.claims.get(key)
        if claim is not None and claim.allocation is not None:
            return claim.allocation
        held = self.held.get(key)
        return held.allocation.info if held is not None else None

    def consumers(self, key: str, /) -> int:
        """How many consumers the claim would list once the session's reservations land."""
        claim = self.devices.claims.get(key)
        return (len(claim.reserved_for) if claim is not None else 0) + len(self.users.get(key, ()))

    # Reserve / Unreserve --------------------------------------------------------------------
    def reserve(
        self,
        pod: pods.PodInfo,
        *,
        allocations: collections.abc.Sequence[allocator.ClaimAllocation],
        reused: collections.abc.Sequence[str],
    ) -> None:
        """``pod`` allocated ``allocations`` and uses the claims ``reused`` (allocated already)."""
        for allocation in allocations:
            self.held[allocation.claim.key] = Held(allocation=allocation, holder=pod.key)
            self.in_use.hold(allocation.choices)
        for key in reused:
            held = self.held.get(key)
            if held is not None and held.holder != pod.key and pod.key not in held.users:
                held.users.append(pod.key)
            listed = self.users.setdefault(key, [])
            if pod.key not in listed:
                listed.append(pod.key)
        for allocation in allocations:
            listed = self.users.setdefault(allocation.claim.key, [])
            if pod.key not in listed:
                listed.append(pod.key)

    def unreserve(self, pod: pods.PodInfo) -> None:
        """Undo :meth:`reserve` for ``pod`` (idempotent)."""
        for key in list(self.users):
            listed = self.users[key]
            if pod.key not in listed:
                continue
            listed.remove(pod.key)
            if not listed:
                del self.users[key]
            held = self.held.get(key)
            if held is None:
                continue
            if pod.key in held.users:
                held.users.remove(pod.key)
            if held.holder != pod.key:
                continue
            if held.users:
                held.holder = held.users.pop(0)  # another member still uses it: it writes it
            else:
                del self.held[key]
                self.in_use.release(held.allocation.choices)

    def holder(self, key: str, /) -> str | None:
        """The pod whose PreBind writes the claim's allocation, if the session made one."""
        held = self.held.get(key)
        return held.holder if held is not None else None

    def claim_allocations(
        self, pod: pods.PodInfo, /
    ) -> tuple[tuple[str, resourceclaims.AllocationInfo], ...] | None:
        """The allocations ``pod``'s Reserve made this session (the ``claim_allocations``
        hook): (claim key, allocation), ``None`` when it made none."""
        found = tuple(
            (key, held.allocation.info)
            for key in pod.resource_claim_keys
            if (held := self.held.get(key)) is not None and held.holder == pod.key
        )
        return found or None

    def held_choices(self, pod: pods.PodInfo, /) -> list[inuse.Choice]:
        """The devices ``pod``'s claims hold, allocated this session or before it (a reserve
        pod's: what its Reservation holds for its owners)."""
        out: list[inuse.Choice] = []
        for key in pod.resource_claim_keys:
            held = self.held.get(key)
            if held is not None:
                out.extend(held.allocation.choices)
                continue
            out.extend(self._choices(key))
        return out

    def _choices(self, key: str, /) -> list[inuse.Choice]:
        """The devices the snapshot's claim ``key`` holds."""
        claim = self.devices.claims.get(key)
        out: list[inuse.Choice] = []
        if claim is None or claim.allocation is None:
            return out
        for result in claim.allocation.devices:
            device = self.catalog.devices.get(result.id)
            if device is None:
                continue
            out.append(
                inuse.Choice(
                    request=result.request,
                    device=device,
                    admin_access=result.admin_access,
                    consumed=(result.consumed or {}) if result.share_id is not None else None,
                )
            )
        return out

    # Evictions ------------------------------------------------------------------------------
    def _own_choices(self, pod: pods.PodInfo) -> list[inuse.Choice]:
        """The devices the allocated claims made for ``pod`` hold (what evicting it frees)."""
        out: list[inuse.Choice] = []
        for key in pod.resource_claim_keys:
            claim = self.devices.claims.get(key)
            if claim is None or claim.allocation is None:
                continue
            if claim.controller is None or claim.controller[2] != pod.uid:
                continue
            out.extend(self._choices(key))
        return out

    def evicted(self, pod: pods.PodInfo) -> None:
        """The session evicted ``pod``: its own claims' devices are free for the session."""
        if pod.key in self._freed or not pod.resource_claims:
            return
        self._freed.add(pod.key)
        self.in_use.release(self._own_choices(pod))

    def restored(self, pod: pods.PodInfo) -> None:
        """An eviction of ``pod`` was undone."""
        if pod.key not in self._freed:
            return
        self._freed.discard(pod.key)
        self.in_use.hold(self._own_choices(pod))

    # Queue accounting -----------------------------------------------------------------------
    def _first_user(self, key: str) -> str | None:
        """The first (by key) of the snapshot's pending pods using the claim ``key``."""
        if self._first_users is None:
            found: dict[str, str] = {}
            for pod_key in self.devices.claimants:  # sorted
                pod = self._pods.get(pod_key)
                if pod is None or pod.node_name is not None or pod.terminal:
                    continue
                for claim_key in pod.resource_claim_keys:
                    found.setdefault(claim_key, pod_key)
            self._first_users = found
        return self._first_users.get(key)

    def device_requests(self, pod: pods.PodInfo) -> resources.ResourceList | None:
        """What ``pod``'s claims take of devices (``SessionHooks.device_requests``)."""
        if not pod.resource_claims:
            return None
        if pod.node_name is not None:
            found = self.devices.pod_devices(pod)
            return resources.ResourceList(found) if found else None
        out: dict[str, int] = {}
        for key in pod.resource_claim_keys:
            held = self.held.get(key)
            if held is not None:
                if held.holder == pod.key:
                    amounts = devices.claim_devices(
                        dataclasses.replace(held.allocation.claim, allocation=held.allocation.info),
                        catalog=self.catalog,
                    )
                else:
                    continue  # another pod of the session took it: counted there
            else:
                claim = self.devices.claims.get(key)
                if claim is None or claim.allocation is not None:
                    continue
                if self._first_user(key) not in (None, pod.key):
                    continue  # a claim several pending pods share is counted on one of them
                amounts = devices.estimate(claim.spec, catalog=self.catalog)
            for name, amount in amounts.items():
                out[name] = out.get(name, 0) + amount
        return resources.ResourceList(out) if out else None
