"""Reservation: capacity held on one node for named owners, scheduled as a disguised pod.

DESIGN.md §4, after Koordinator's ``Reservation`` plugin (reference/peers.md §3). The cache
turns every Reservation into a *reserve pod* (:mod:`berth.scheduler.snapshot.reservations`):
a Pending one waits in its queue like any pod and is placed by the normal cycle (node
affinity, taints, fit, scores, its queue's quota); an Available one sits on its node holding
what its owners do not use, so every other pod sees that room as taken. This plugin does the
rest:

- **Bind** of a reserve pod records ``SetReservationAvailable`` (the sink writes ``Available``,
  ``nodeName``, ``allocatable``, the ``Scheduled`` and ``Ready`` conditions and an Event)
  instead of a pod binding; other pods are ``SKIP``ped to the next binder.
- **Owners** (an owner entry matches the pod, in the reservation's namespace): PreFilter finds
  the reservations the pod may use (Available, not ``unschedulable``, not used up; only the
  one it names with the label ``scheduling.berth.io/reservation``, which it *must* use); the
  **FilterHook** hands one reservation's unused capacity per node back to that pod's view of
  the node; **Score** gives 100 to those nodes (0 elsewhere); **Reserve** charges the pod to
  that reservation — what the reservation still holds shrinks by the part of the pod's
  requests it covers, and an ``allocateOnce`` reservation lets go of the rest at once —
  (Unreserve undoes it); **PreBind** records the pod's ``reservation-allocated`` annotation
  and **PostBind** ``AllocateReservation`` (``currentOwners``, ``allocated``, and
  ``Succeeded`` for an allocate-once reservation).
- **Same session**: the allocate action places reserve pods before any other pod, and
  PostBind of a reserve pod makes its reservation Available in this session's books, so an
  owner applied together with its Reservation goes into it in the same cycle (Koordinator
  schedules reservations first for the same reason).
- **Queues**: a reserve pod is a pod of the reservation's queue, so what a reservation holds
  counts against that queue like running pods. An owner of the same queue is not counted
  twice: when its queue would refuse it, the session's ``reserved_credit`` hook answers with
  the pod's requests if reservations of that queue each cover all of them, and the pod is
  then placed only into one of those.
- **Lifetime**, at session open: a reservation whose ``ttl``/``expires`` has passed is ended
  (``Expired`` while it held capacity, ``Failed`` if it never got placed), and so is one whose
  node is gone (``Failed``); the cache already stopped counting its capacity.
- **Bad input**, as the reservation's ``Scheduled`` condition (the session reports a reserve
  pod's "why pending" on its Reservation): a template without requests, owners that can never
  match a pod (PreEnqueue keeps such a reservation out of the cycle), a size no node offers.
- ``GET /apis/v1/plugins/Reservation/nodeReservations/{node}``: the reservations held on a
  node as the last session left them.

Everything per session lives in ``_Books``, built at open and dropped at close (R8).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import threading

import numpy as np

from berth.api import keys, resources
from berth.scheduler.framework import (
    cyclestate,
    decisions,
    filtering,
    handles,
    interfaces,
    registries,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import ids, nodetable, pods
from berth.scheduler.snapshot import reservations as resv

__all__ = [
    "MATCHES_KEY",
    "NAME",
    "ROUTE",
    "Matches",
    "Reservation",
    "get_matches",
    "new",
]

NAME = names.RESERVATION
MATCHES_KEY = cyclestate.StateKey(f"{NAME}/matches")
ROUTE = "nodeReservations/{node}"
"""Served at ``/apis/v1/plugins/Reservation/nodeReservations/{node}``."""

IntArray = nodetable.IntArray


@dataclasses.dataclass
class Matches:
    """Cycle state of one owner pod's attempt: the reservation its view uses on each row."""

    by_row: dict[int, str]  # row -> reservation key
    must: str | None = None  # why the pod may go only to these rows (it names one, ...)

    def clone(self) -> Matches:
        return Matches(dict(self.by_row), self.must)


def get_matches(state: cyclestate.CycleState) -> Matches | statuses.Status | None:
    """The typed getter (R8): ``None`` when PreFilter found no reservation for the pod, an
    ``ERROR`` status when something else sits under the key."""
    if MATCHES_KEY not in state:
        return None
    return state.read_as(MATCHES_KEY, kind=Matches)


def _matches(state: cyclestate.CycleState) -> Matches | None:
    """:func:`get_matches` for the points that cannot answer with a status (they raise, and
    the runtime reports the error under this plugin's name)."""
    found = get_matches(state)
    if isinstance(found, statuses.Status):
        raise TypeError(found.message())
    return found


def _timestamp(seconds: float) -> str:
    when = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _unschedulable(text: str) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE, text)


def _unresolvable(text: str) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, text)


@dataclasses.dataclass(eq=False)
class _Held:
    """An Available reservation in a session: where it is and what it still holds there."""

    info: resv.ReservationInfo
    row: int
    remaining: IntArray  # counted in the session's table; Reserve/Unreserve move it

    @property
    def takes_owners(self) -> bool:
        return not self.info.unschedulable and bool(self.remaining.any())


@dataclasses.dataclass(frozen=True, eq=False)
class _Charge:
    """What Reserve moved for one owner pod: charged to ``held``, and freed (allocate-once)."""

    held: _Held
    charged: IntArray
    freed: IntArray


def _ending(
    info: resv.ReservationInfo, *, now: float, nodes: collections.abc.Container[str]
) -> decisions.EndReservation | None:
    """The decision ending ``info`` when its time ran out or its node is gone, else ``None``."""
    if info.terminal:
        return None
    ends = resv.deadline(info)
    if ends is not None and ends <= now:
        if info.phase == resv.AVAILABLE:
            phase, message = resv.EXPIRED, f"expired at {_timestamp(ends)}"
        else:
            phase = resv.FAILED
            message = f"expired at {_timestamp(ends)} before it could be placed on a node"
        return decisions.EndReservation(
            namespace=info.namespace, name=info.name, phase=phase, reason="Expired", message=message
        )
    if info.available and info.node_name not in nodes:
        return decisions.EndReservation(
            namespace=info.namespace,
            name=info.name,
            phase=resv.FAILED,
            reason="NodeGone",
            message=f"node {info.node_name} no longer exists",
        )
    return None


class _Books:
    """One session's reservations: what each Available one still holds, and the charges."""

    def __init__(self, session: sessions.Session) -> None:
        snapshot = session.snapshot
        self.session = session
        self.table = session.nodes
        self.held: dict[str, _Held] = {}
        self.by_namespace: dict[str, list[_Held]] = {}
        self.charges: dict[str, _Charge] = {}
        self.credited: dict[str, list[str]] = {}  # pods admitted on reservations' room
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
            held = _Held(info=info, row=row, remaining=self.table.vector(reserve.requests).copy())
            self.held[key] = held
            self.by_namespace.setdefault(info.namespace, []).append(held)

    def reservation(self, key: str) -> resv.ReservationInfo | None:
        """The reservation as this session sees it (Available once placed in it)."""
        held = self.held.get(key)
        return held.info if held is not None else self.session.snapshot.reservations.get(key)

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
        held = _Held(info=placed, row=row, remaining=self.table.vector(pod.requests).copy())
        self.held[key] = held
        self.by_namespace.setdefault(info.namespace, []).append(held)

    # Owners ------------------------------------------------------------------------------
    def named_status(self, pod: pods.PodInfo, key: str) -> tuple[statuses.Status, _Held | None]:
        """Whether ``pod`` may use the reservation it names, and that reservation."""
        name = key.partition("/")[2]
        info = self.reservation(key)
        if info is None:
            return _unschedulable(f"reservation {name} does not exist"), None
        if not resv.is_owner(info, pod):
            return _unresolvable(f"pod is not an owner of reservation {name}"), None
        if info.terminal:
            return _unresolvable(f"reservation {name} is {info.phase}"), None
        if not info.available:
            return _unschedulable(f"reservation {name} is not Available yet ({info.phase})"), None
        if info.unschedulable:
            return _unschedulable(f"reservation {name} is unschedulable: it takes no owners"), None
        held = self.held.get(key)
        if held is None or not held.remaining.any():
            return _unschedulable(f"reservation {name} holds nothing any more"), None
        return statuses.SUCCESS, held

    def candidates(self, pod: pods.PodInfo) -> list[_Held]:
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
        return pod.requests

    def choose(self, pod: pods.PodInfo, usable: list[_Held]) -> dict[int, str]:
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
    def charge(self, pod: pods.PodInfo, held: _Held) -> None:
        vec = self.table.vector(pod.requests)
        charged = np.minimum(vec, np.clip(held.remaining, 0, None))
        freed = held.remaining - charged if held.info.allocate_once else np.zeros_like(charged)
        moved = charged + freed
        held.remaining = held.remaining - moved
        self.table.forget(held.row, moved)
        self.charges[pod.key] = _Charge(held=held, charged=charged, freed=freed)

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


class Reservation(
    interfaces.SessionPlugin,
    interfaces.PreEnqueuePlugin,
    interfaces.PreFilterPlugin,
    interfaces.FilterHook,
    interfaces.FilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ReservePlugin,
    interfaces.PreBindPlugin,
    interfaces.BindPlugin,
    interfaces.PostBindPlugin,
    interfaces.APIServiceProvider,
):
    """Session plugin, PreEnqueue, PreFilter, FilterHook, Filter, PreScore, Score, Reserve,
    PreBind, Bind, PostBind, and a route."""

    name = NAME

    def __init__(self) -> None:
        self._books: _Books | None = None
        self._published: dict[str, list[interfaces.JSONValue]] = {}
        self._nodes: collections.abc.Container[str] = ()  # the nodes the last session saw
        self._lock = threading.Lock()  # the route reads from the event loop, sessions write

    # Session ---------------------------------------------------------------------------------
    def on_session_open(self, session: sessions.Session) -> None:
        books = self._books = _Books(session)
        session.recorder.extend(books.endings)
        session.hooks.reserved_credit.add(books.credit, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        books, self._books = self._books, None
        if books is None or books.session is not session:
            return
        published = books.publish()
        with self._lock:
            self._published, self._nodes = published, session.snapshot.node_infos

    # Queueing ---------------------------------------------------------------------------------
    def pre_enqueue(self, pod: pods.PodInfo) -> statuses.Status:
        books = self._books
        if not pod.reserve or pod.reservation is None or books is None:
            return statuses.SUCCESS
        info = books.reservation(pod.reservation)
        problem = resv.owners_problem(info) if info is not None else None
        if problem is not None:
            return statuses.new(statuses.Code.PENDING, problem)
        return statuses.SUCCESS

    # Filtering ---------------------------------------------------------------------------------
    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        books = self._books
        if books is None or pod.reserve:
            return statuses.SKIP
        named = str(pod.reservation) if pod.reservation is not None else None
        if named is not None:
            status, held = books.named_status(pod, named)
            if held is None:
                return status
            must = f"pod must use reservation {named.partition('/')[2]}"
            state.write(MATCHES_KEY, Matches({held.row: named}, must=must))
            return statuses.SUCCESS
        credited = books.credited.get(pod.key)
        if credited is not None:
            # Its queue admitted it on the room these reservations hold: only there.
            names_ = ", ".join(key.partition("/")[2] for key in credited)
            must = f"pod was admitted to queue {pod.queue} on the room of reservation {names_}"
            held_ = [books.held[key] for key in credited if books.held[key].takes_owners]
            if not held_:
                return _unschedulable(f"{must}, which holds nothing any more")
            state.write(MATCHES_KEY, Matches(books.choose(pod, held_), must=must))
            return statuses.SUCCESS
        usable = books.candidates(pod)
        if usable:
            state.write(MATCHES_KEY, Matches(books.choose(pod, usable)))
        # Only a pod naming a reservation is restricted by the Filter.
        return statuses.SKIP

    def filter_hook(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> nodetable.NodeTable | None:
        books, matches = self._books, _matches(state)
        if books is None or matches is None or not matches.by_row:
            return None
        view = nodes.copy()
        for row, key in matches.by_row.items():
            view.requested[row] -= books.held[key].remaining
        return view

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        matches = _matches(state)
        if matches is None or matches.must is None:
            return filtering.passing(len(nodes))
        passed = np.zeros(len(nodes), dtype=np.bool_)
        for row in matches.by_row:
            passed[row] = True
        where = ", ".join(nodes.names[row] for row in sorted(matches.by_row))
        return filtering.NodeFilter(passed=passed, reason=f"{matches.must}, held on {where}")

    # Scoring ---------------------------------------------------------------------------------
    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        matches = get_matches(state)
        if isinstance(matches, statuses.Status):
            return matches
        return statuses.SUCCESS if matches is not None and matches.by_row else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        scores = np.zeros(len(nodes), dtype=np.int64)
        matches = _matches(state)
        if matches is not None:
            scores[list(matches.by_row)] = interfaces.MAX_NODE_SCORE
        return scores

    def score_extensions(self) -> interfaces.ScoreExtensions | None:
        return None

    # Reserve -----------------------------------------------------------------------------------
    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        books, matches = self._books, get_matches(state)
        if isinstance(matches, statuses.Status):
            return matches
        if books is None or matches is None or pod.reserve:
            return statuses.SUCCESS
        key = matches.by_row.get(books.table.index[node])
        if key is not None:
            books.charge(pod, books.held[key])
        return statuses.SUCCESS

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        books = self._books
        if books is not None:
            books.uncharge(pod)

    # Binding -----------------------------------------------------------------------------------
    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        books = self._books
        charge = books.charges.get(pod.key) if books is not None else None
        if charge is not None:
            recorder.record(
                decisions.AnnotatePod(
                    namespace=pod.namespace,
                    name=pod.name,
                    uid=pod.uid,
                    annotations={
                        keys.RESERVATION_ALLOCATED_ANNOTATION: resv.allocated_annotation(
                            charge.held.info
                        )
                    },
                )
            )
        return statuses.SUCCESS

    def bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        if not pod.reserve or pod.reservation is None:
            return statuses.SKIP
        namespace, _, name = str(pod.reservation).partition("/")
        allocatable = resources.ResourceList(
            {k: v for k, v in pod.requests.items() if k != resources.PODS}
        )
        recorder.record(
            decisions.SetReservationAvailable(
                namespace=namespace, name=name, node=node, allocatable=allocatable
            )
        )
        return statuses.SUCCESS

    def post_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> None:
        books = self._books
        if books is not None and pod.reserve and pod.reservation is not None:
            # After every Bind of the statement succeeded: the reservation is placed for good.
            books.hold(pod, node)
            return
        charge = books.charges.get(pod.key) if books is not None else None
        if charge is None:
            return
        info = charge.held.info
        held = resv.held(info)
        recorder.record(
            decisions.AllocateReservation(
                namespace=info.namespace,
                name=info.name,
                owner=pod.name,
                owner_uid=pod.uid,
                requests=resources.ResourceList(
                    {k: v for k, v in pod.requests.items() if k in held and k != resources.PODS}
                ),
                succeeded=info.allocate_once,
            )
        )

    # Route ---------------------------------------------------------------------------------
    def routes(self) -> collections.abc.Sequence[interfaces.Route]:
        return [interfaces.Route(method="GET", path=ROUTE, handler=self._node_reservations)]

    def _node_reservations(self, request: interfaces.RouteRequest) -> interfaces.JSONValue:
        node = request.path_params["node"]
        with self._lock:
            if node not in self._nodes:
                raise KeyError(node)  # an unknown node is a 404
            entries = self._published.get(node, [])
        return {"node": node, "reservations": list(entries)}


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> Reservation:
    """Build the plugin (it takes no arguments)."""
    return Reservation()
