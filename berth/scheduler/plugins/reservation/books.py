"""The Reservation plugin's per-session books: which reservations an owner may use where, and
the capacity they hand back.

Private to the Reservation plugin package (only :mod:`.plugin` imports it); the plugin's
extension points read and move these books, this module holds no plugin. :class:`Books` is
built at session open and dropped at close (R8). It owns:

- **lifetime**: at construction, the decisions ending each reservation whose time ran out or
  whose node is gone (:attr:`Books.endings`);
- **owner matching**: whether a pod may use the reservation it names
  (:meth:`Books.named_status`), the reservations it may use otherwise (:meth:`Books.candidates`),
  the ``reserved_credit`` answer (:meth:`Books.credit`) and one reservation per node
  (:meth:`Books.choose`);
- **hand-back arithmetic**: what an owner is charged to its reservation and what an
  allocate-once reservation lets go of (:meth:`Books.charge`, undone by :meth:`Books.uncharge`),
  moved in the session's node table;
- **the route's listing** (:meth:`Books.publish`): the reservations held per node.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime

import numpy as np

from berth.api import keys, resources
from berth.scheduler.framework import decisions, interfaces, jobs, reasons, sessions, statuses
from berth.scheduler.snapshot import ids, nodetable, pods
from berth.scheduler.snapshot import reservations as resv

__all__ = [
    "Books",
    "Charge",
    "Held",
    "unschedulable",
]

IntArray = nodetable.IntArray


def _timestamp(seconds: float) -> str:
    when = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def unschedulable(text: str, *, reservation: str) -> statuses.Status:
    """An owner waits: the reservation it must use (``ns/name``) cannot take it now."""
    return statuses.new(
        statuses.Code.UNSCHEDULABLE,
        text,
        reason_code=reasons.ReasonCode.RESERVATION_UNAVAILABLE,
        details={"reservation": reservation},
    )


def _unresolvable(text: str, *, reservation: str) -> statuses.Status:
    """An owner waits: the reservation it names can never take it."""
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        text,
        reason_code=reasons.ReasonCode.RESERVATION_UNAVAILABLE,
        details={"reservation": reservation},
    )


@dataclasses.dataclass(eq=False)
class Held:
    """An Available reservation in a session: where it is and what it still holds there."""

    info: resv.ReservationInfo
    row: int
    remaining: IntArray  # counted in the session's table; Reserve/Unreserve move it

    @property
    def takes_owners(self) -> bool:
        return not self.info.unschedulable and bool(self.remaining.any())


@dataclasses.dataclass(frozen=True, eq=False)
class Charge:
    """What Reserve moved for one owner pod: charged to ``held``, and freed (allocate-once)."""

    held: Held
    charged: IntArray
    freed: IntArray


def _ending(
    info: resv.ReservationInfo, *, now: float, nodes: collections.abc.Container[str]
) -> decisions.EndReservation | None:
    """The decision ending ``info`` when its time ran out or its node is gone, else ``None``."""
    expired = resv.expiry(info, now=now)
    if expired is not None:
        return decisions.EndReservation(
            namespace=info.namespace,
            name=info.name,
            phase=expired.phase,
            reason=resv.EXPIRED_REASON,
            message=expired.message,
        )
    if info.terminal:
        return None
    if info.available and info.node_name not in nodes:
        return decisions.EndReservation(
            namespace=info.namespace,
            name=info.name,
            phase=resv.FAILED,
            reason="NodeGone",
            message=f"node {info.node_name} no longer exists",
        )
    return None


class Books:
    """One session's reservations: what each Available one still holds, and the charges."""

    def __init__(self, session: sessions.Session) -> None:
        snapshot = session.snapshot
        self.session = session
        self.table = session.nodes
        self.held: dict[str, Held] = {}
        self.by_namespace: dict[str, list[Held]] = {}
        self.charges: dict[str, Charge] = {}
        self.credited: dict[str, list[str]] = {}  # pods admitted on reservations' room
        self.rows: dict[str, dict[str, str]] = {}  # owner pod -> node -> reservation it uses
        self.placed: dict[str, str] = {}  # reservations placed this session -> node
        self.endings: list[decisions.EndReservation] = []
        for key in sorted(snapshot.reservations):
            info = snapshot.reservations[key]
            ending = _ending(info, now=snapshot.now, nodes=snapshot.node_infos)
            if ending is not None:
                self.endings.append(ending)
                continue
            if not info.available or info.node_name is None:
                continue
            row = self.table.index.get(info.node_name)
            reserve = snapshot.pods.get(resv.reserve_pod_key(key))
            if row is None or reserve is None or reserve.node_name != info.node_name:
                continue  # used up (or used once): it holds nothing any more
            held = Held(info=info, row=row, remaining=self.table.vector(reserve.requests).copy())
            self.held[key] = held
            self.by_namespace.setdefault(info.namespace, []).append(held)

    def reservation(self, key: str) -> resv.ReservationInfo | None:
        """The reservation as this session sees it (Available once placed in it)."""
        held = self.held.get(key)
        return held.info if held is not None else self.session.snapshot.reservations.get(key)

    # Booked for later ---------------------------------------------------------------------
    def not_started(self, info: resv.ReservationInfo, *, pod: pods.PodInfo) -> statuses.Status:
        """The reserve ``pod`` of a reservation whose ``startAt`` is ahead waits, saying when
        it starts and, once the starvation guard drains for it, where."""
        start = _timestamp(resv.starts(info))
        job = self.session.job_of(pod)
        draining = self.session.hooks.nominations(job) if job is not None else None
        where = sorted(set(draining.values())) if draining else []
        message = f"starts at {start}" + (
            f"; draining {', '.join(where)} for it meanwhile" if where else ""
        )
        return statuses.new(
            statuses.Code.PENDING,
            message,
            reason_code=reasons.ReasonCode.NOT_STARTED,
            details={"startAt": start},
        )

    def starts_at(self, job: jobs.Job) -> float | None:
        """When a reserve pod's reservation booked for later starts (``revisit_at``)."""
        now = self.session.snapshot.now
        for pod in job.pending:
            info = self.reservation(str(pod.reservation)) if pod.reserve else None
            if info is not None and resv.not_started(info, now=now):
                return resv.starts(info)
        return None

    def next_start(self) -> float | None:
        """When the first reservation booked for later starts (the session's revisit)."""
        now = self.session.snapshot.now
        times = [
            resv.starts(info)
            for info in self.session.snapshot.reservations.values()
            if not info.terminal and resv.not_started(info, now=now)
        ]
        return min(times, default=None)

    def hold(self, pod: pods.PodInfo, node: str) -> None:
        """The reserve ``pod`` was bound to ``node`` in this session: from now on its owners
        tried in this session see it as Available there, holding the reserve pod's requests
        (what the table counted for it), as the next snapshot will."""
        key = str(pod.reservation)
        self.placed[key] = node
        info = self.session.snapshot.reservations.get(key)
        row = self.table.index.get(node)
        if info is None or row is None or key in self.held:
            return
        placed = dataclasses.replace(info, phase=resv.AVAILABLE, node_name=ids.NodeName(node))
        held = Held(info=placed, row=row, remaining=self.table.vector(pod.requests).copy())
        self.held[key] = held
        self.by_namespace.setdefault(info.namespace, []).append(held)

    # Owners ------------------------------------------------------------------------------
    def named_status(self, pod: pods.PodInfo, key: str) -> tuple[statuses.Status, Held | None]:
        """Whether ``pod`` may use the reservation it names, and that reservation."""
        name = key.partition("/")[2]
        info = self.reservation(key)
        if info is None:
            return unschedulable(f"reservation {name} does not exist", reservation=key), None
        if not resv.is_owner(info, pod):
            return _unresolvable(
                f"pod is not an owner of reservation {name}", reservation=key
            ), None
        if info.terminal:
            return _unresolvable(f"reservation {name} is {info.phase}", reservation=key), None
        if not info.available:
            return unschedulable(
                f"reservation {name} is not Available yet ({info.phase})", reservation=key
            ), None
        if info.unschedulable:
            return unschedulable(
                f"reservation {name} is unschedulable: it takes no owners", reservation=key
            ), None
        held = self.held.get(key)
        if held is None or not held.remaining.any():
            return unschedulable(
                f"reservation {name} holds nothing any more", reservation=key
            ), None
        return statuses.SUCCESS, held

    def candidates(self, pod: pods.PodInfo) -> list[Held]:
        """The reservations ``pod`` may use now (any it owns that takes owners)."""
        return [
            held
            for held in self.by_namespace.get(pod.namespace, ())
            if held.takes_owners and resv.is_owner(held.info, pod)
        ]

    def credit(self, pod: pods.PodInfo) -> resources.ResourceList | None:
        """The ``reserved_credit`` hook: the pod's requests when reservations of its own queue
        each cover all of them; the pod is then placed only into one of those."""
        if pod.reserve or pod.queue is None:
            return None
        if pod.reservation is not None:
            _, named = self.named_status(pod, str(pod.reservation))
            usable = [named] if named is not None else []
        else:
            usable = self.candidates(pod)
        vec = self.table.vector(pod.requests)
        covering = [
            held
            for held in usable
            if (held.info.queue or keys.DEFAULT_QUEUE) == pod.queue
            and bool((held.remaining >= vec).all())
        ]
        if not covering:
            return None
        self.credited[pod.key] = [held.info.key for held in covering]
        # The devices the reservation holds for its template's claims are the queue's already
        # too: the owner's own claims take them over (counted once, not twice).
        devices = self.session.snapshot.devices
        reserve = self.session.snapshot.pods.get(resv.reserve_pod_key(covering[0].info.key))
        held_devices = devices.pod_devices(reserve) if reserve is not None else {}
        if not held_devices:
            return pod.requests
        return resources.ResourceList({**pod.requests, **held_devices})

    def choose(self, pod: pods.PodInfo, usable: list[Held]) -> dict[int, str]:
        """One reservation per row for ``pod``: one covering all its requests if any (the
        oldest), else the one covering the largest share of them."""
        vec = self.table.vector(pod.requests)
        asked = vec > 0
        best: dict[int, tuple[tuple[int, float, float, str], str]] = {}
        for held in usable:
            covered = np.minimum(vec, held.remaining)[asked] / vec[asked]
            full = bool((covered >= 1.0).all())
            share = float(covered.mean()) if covered.size else 1.0
            rank = (
                0 if full else 1,
                0.0 if full else -share,  # the larger share covered first
                held.info.creation_timestamp,
                held.info.key,
            )
            current = best.get(held.row)
            if current is None or rank < current[0]:
                best[held.row] = (rank, held.info.key)
        return {row: key for row, (_, key) in sorted(best.items())}

    # Charging ----------------------------------------------------------------------------
    def charge(self, pod: pods.PodInfo, held: Held) -> None:
        vec = self.table.vector(pod.requests)
        charged = np.minimum(vec, np.clip(held.remaining, 0, None))
        freed = held.remaining - charged if held.info.allocate_once else np.zeros_like(charged)
        moved = charged + freed
        held.remaining = held.remaining - moved
        self.table.forget(held.row, moved)
        self.charges[pod.key] = Charge(held=held, charged=charged, freed=freed)

    def uncharge(self, pod: pods.PodInfo) -> None:
        charge = self.charges.pop(pod.key, None)
        if charge is None:
            return
        moved = charge.charged + charge.freed
        charge.held.remaining = charge.held.remaining + moved
        self.table.assume(charge.held.row, moved)

    # Publishing --------------------------------------------------------------------------
    def publish(self) -> dict[str, list[interfaces.JSONValue]]:
        """The reservations held per node, for the route (node name -> entries, by key; a node
        holding none is absent: the cost is the reservations', not the nodes')."""
        snapshot = self.session.snapshot
        out: dict[str, list[interfaces.JSONValue]] = {}
        ended = {ending.key for ending in self.endings}
        for key in sorted(snapshot.reservations):
            info = snapshot.reservations[key]
            node = info.node_name if info.available else self.placed.get(key)
            if node is None or node not in snapshot.node_infos or info.terminal or key in ended:
                continue
            held = self.held.get(key)
            remaining = (
                self._resources(held.remaining)
                if held is not None
                else self._without_pods(resv.held(info))
                if key in self.placed
                else {}
            )
            ends = resv.deadline(info)
            out.setdefault(node, []).append(
                {
                    "namespace": info.namespace,
                    "name": info.name,
                    "uid": info.uid,
                    "phase": resv.AVAILABLE,
                    "allocatable": self._without_pods(resv.held(info)),
                    "remaining": remaining,
                    "currentOwners": [str(owner) for owner in info.current_owners],
                    "allocateOnce": info.allocate_once,
                    "unschedulable": info.unschedulable,
                    "expiresAt": _timestamp(ends) if ends is not None else None,
                }
            )
        return out

    def _resources(self, vec: IntArray) -> dict[str, interfaces.JSONValue]:
        names_ = self.table.resources
        listed = resources.ResourceList(
            {names_[c]: int(v) for c, v in enumerate(vec.tolist()) if names_[c] != resources.PODS}
        )
        return dict(listed.clamp_negative().to_api())

    @staticmethod
    def _without_pods(held: resources.ResourceList) -> dict[str, interfaces.JSONValue]:
        listed = resources.ResourceList({k: v for k, v in held.items() if k != resources.PODS})
        return dict(listed.to_api())
