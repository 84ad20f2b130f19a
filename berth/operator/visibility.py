"""The visibility API's answers: queues, the line in each, a group's place, the dashboard's data.

What users of every batch scheduler ask — where does my job stand, and why — answered from the
scheduler's last snapshot and cycle result (the same :class:`Board` the status writer reads),
like Kueue's visibility API. :mod:`berth.operator.http` serves it under ``/berth/v1/``:

- :meth:`Visibility.queues`: every queue with its state (Open, Closed, Invalid and why),
  guaranteed, allocated and fair share, pods and groups pending and running;
- :meth:`Visibility.waiting`: one queue's waiting groups in the order the scheduler tries
  them, each with its position and why it waits — one page at a time (``limit``, and the
  ``continue`` token of the previous page), never the whole line at once;
- :meth:`Visibility.position`: one PodGroup's place in its queue's line and the queue's share;
- :meth:`Visibility.overview`: what the dashboard draws — the queue tree with an hour of
  usage against guarantee and fair share (:class:`History`, sampled after each cycle), the
  first waiting groups of every queue, reservations and what they hold, node usage.

Unknown queues and groups raise :class:`NotFound` (the server answers 404 with its message);
a malformed page request raises :class:`BadRequest` (400); before the first cycle,
:class:`NotReady` (503). Everything is read-only.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import threading
import typing

import typing_extensions

from berth.api import resources
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import snapshots
from berth.status import queues as queue_status
from berth.status import reservations as reservation_status
from berth.util import clocks, suggestions

__all__ = [
    "MAX_PAGE",
    "Answer",
    "BadRequest",
    "Board",
    "History",
    "NotFound",
    "NotReady",
    "Overview",
    "Position",
    "QueueList",
    "Visibility",
    "WaitingList",
]

MAX_PAGE = 500
"""The most waiting groups one page holds."""
DEFAULT_PAGE = 100
_DASHBOARD_LINE = 20  # waiting groups per queue the dashboard shows
_MAIN = ("cpu", "memory", "nvidia.com/gpu")

# The answers, as the JSON documents they are served as (camelCase keys, in this order) ----


class Sample(typing_extensions.TypedDict):
    """One point of a queue's history: milli-units of the main resources."""

    t: float
    allocated: dict[str, int]
    fairShare: dict[str, int]
    guaranteed: dict[str, int]


class Amounts(typing_extensions.TypedDict):
    allocated: dict[str, int]
    fairShare: dict[str, int]
    guaranteed: dict[str, int]
    limit: dict[str, int]


class WaitingEntry(typing_extensions.TypedDict):
    """One waiting group (or pod of its own) in its queue's line."""

    position: int
    kind: str  # PodGroup, Pod
    namespace: str
    name: str
    minMember: int | None
    priority: int | None
    created: float | None
    reason: str | None


class QueueItem(typing_extensions.TypedDict):
    """One queue; the overview adds what the dashboard draws of it."""

    name: str
    parent: str | None
    state: str  # Open, Closed, Invalid
    stateReason: str | None
    weight: int
    priority: int
    guaranteed: str
    allocated: str
    fairShare: str
    limit: str
    share: float | None
    pendingPods: int
    runningPods: int
    pendingGroups: int | None
    runningGroups: int | None
    waiting: int
    amounts: typing_extensions.NotRequired[Amounts]
    history: typing_extensions.NotRequired[list[Sample]]
    line: typing_extensions.NotRequired[list[WaitingEntry]]


class QueueList(typing_extensions.TypedDict):
    kind: str  # QueueList
    items: list[QueueItem]


WaitingList = typing_extensions.TypedDict(
    "WaitingList",
    {
        "kind": str,  # WaitingList
        "queue": str,
        "total": int,
        "items": list[WaitingEntry],
        "continue": typing_extensions.NotRequired[str],  # the next page's token
    },
)


class QueueShare(typing_extensions.TypedDict):
    allocated: str
    fairShare: str
    share: float | None


class Position(typing_extensions.TypedDict):
    kind: str  # Position
    podGroup: str
    queue: str
    waiting: int
    position: int | None
    reason: str | None
    queueShare: QueueShare


class ReservationRow(typing_extensions.TypedDict):
    name: str
    phase: str
    node: str | None
    holds: str
    used: str
    ownerSelector: str
    owners: list[str]
    queue: str | None


class NodeRow(typing_extensions.TypedDict):
    name: str
    allocatable: dict[str, int]
    requested: dict[str, int]
    text: str


class Overview(typing_extensions.TypedDict):
    kind: str  # Overview
    now: float
    resources: list[str]
    queues: list[QueueItem]
    reservations: list[ReservationRow]
    nodes: list[NodeRow]


Answer = QueueList | WaitingList | Position | Overview
"""Any answer of the visibility API."""


class NotFound(LookupError):
    """No such queue or group (HTTP 404)."""


class BadRequest(ValueError):
    """A request the API cannot answer as asked (HTTP 400)."""


class NotReady(RuntimeError):
    """The scheduler has not taken its first snapshot yet (HTTP 503)."""


class Board(typing.Protocol):
    """What the scheduler last saw and decided."""

    def snapshot(self) -> snapshots.Snapshot | None: ...

    def result(self) -> decisions.CycleResult | None: ...


@dataclasses.dataclass(frozen=True)
class _Sample:
    at: float
    # queue -> (allocated, fair share, guaranteed) of the main resources, milli-units
    queues: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]]


class History:
    """An hour (``keep`` seconds) of per-queue usage, one sample at most every ``every``
    seconds; bounded whatever the cycle rate."""

    def __init__(self, *, keep: float = 3600.0, every: float = 10.0) -> None:
        self._keep = keep
        self._every = every
        self._samples: collections.deque[_Sample] = collections.deque()
        self._lock = threading.Lock()

    def add(self, snapshot: snapshots.Snapshot, result: decisions.CycleResult) -> None:
        now = snapshot.now
        with self._lock:
            if self._samples and now - self._samples[-1].at < self._every:
                return
            values = {
                name: (
                    _main(summary.allocated),
                    _main(summary.fair_share),
                    _main(snapshot.queues[name].guaranteed) if name in snapshot.queues else {},
                )
                for name, summary in result.queues.items()
            }
            self._samples.append(_Sample(now, values))
            while self._samples and now - self._samples[0].at > self._keep:
                self._samples.popleft()

    def series(self, queue: str) -> list[Sample]:
        """``[{t, allocated, fairShare, guaranteed}]`` of ``queue``, oldest first."""
        with self._lock:
            samples = list(self._samples)
        return [
            {
                "t": s.at,
                "allocated": s.queues[queue][0],
                "fairShare": s.queues[queue][1],
                "guaranteed": s.queues[queue][2],
            }
            for s in samples
            if queue in s.queues
        ]


def _main(amounts: collections.abc.Mapping[str, int]) -> dict[str, int]:
    return {name: int(amounts[name]) for name in _MAIN if amounts.get(name)}


class Visibility:
    """Answers from ``board``; see the module docstring."""

    def __init__(self, board: Board, *, clock: clocks.Clock, history: History | None = None):
        self._board = board
        self._clock = clock
        self.history = history if history is not None else History()

    def observe(self) -> None:
        """A cycle ended: sample the queues for the history."""
        snapshot, result = self._board.snapshot(), self._board.result()
        if snapshot is not None and result is not None:
            self.history.add(snapshot, result)

    # Queues ---------------------------------------------------------------------------------
    def queues(self) -> QueueList:
        snapshot, result = self._seen()
        pods = queue_status.pods_by_queue(snapshot)
        lines = result.waiting if result is not None else {}
        items: list[QueueItem] = []
        for name in sorted(snapshot.queues):
            info = snapshot.queues[name]
            summary = result.queues.get(name) if result is not None else None
            counts = pods.get(name, queue_status.PodCounts())
            state, why = _state(snapshot, name, summary)
            items.append(
                {
                    "name": name,
                    "parent": info.parent,
                    "state": state,
                    "stateReason": why,
                    "weight": info.weight,
                    "priority": info.priority,
                    "guaranteed": _text(info.guaranteed),
                    "allocated": _text(summary.allocated if summary else None),
                    "fairShare": _text(summary.fair_share if summary else None),
                    "limit": _text(info.limit) if info.limit else "none",
                    "share": _share(summary),
                    "pendingPods": counts.pending,
                    "runningPods": counts.running,
                    "pendingGroups": summary.pending if summary else None,
                    "runningGroups": summary.running if summary else None,
                    "waiting": len(lines.get(name, ())),
                }
            )
        return {"kind": "QueueList", "items": items}

    def waiting(
        self, queue: str, *, limit: str | None = None, token: str | None = None
    ) -> WaitingList:
        """One page of ``queue``'s line (see the module docstring)."""
        snapshot, result = self._seen()
        if queue not in snapshot.queues:
            raise NotFound(
                f"queue {queue!r} does not exist{suggestions.suffix(queue, snapshot.queues)}"
            )
        size = _number(limit, default=DEFAULT_PAGE, what="limit", low=1, high=MAX_PAGE)
        start = _number(token, default=0, what="continue", low=0, high=None)
        line = result.waiting.get(queue, ()) if result is not None else ()
        page = line[start : start + size]
        items = [
            self._entry(snapshot, result, key, place=start + i + 1) for i, key in enumerate(page)
        ]
        out: WaitingList = {
            "kind": "WaitingList",
            "queue": queue,
            "total": len(line),
            "items": items,
        }
        if start + size < len(line):
            out["continue"] = str(start + size)
        return out

    def position(self, namespace: str, name: str) -> Position:
        """Where PodGroup ``namespace/name`` stands in its queue's line, and the queue's share."""
        snapshot, result = self._seen()
        key = f"{namespace}/{name}"
        group = snapshot.pod_groups.get(key)
        if group is None:
            raise NotFound(f"podgroup {key!r} does not exist (or is not Berth's)")
        line = result.waiting.get(group.queue, ()) if result is not None else ()
        summary = result.queues.get(group.queue) if result is not None else None
        out: Position = {
            "kind": "Position",
            "podGroup": key,
            "queue": group.queue,
            "waiting": len(line),
            "position": line.index(key) + 1 if key in line else None,
            "reason": _message(result, key),
            "queueShare": {
                "allocated": _text(summary.allocated if summary else None),
                "fairShare": _text(summary.fair_share if summary else None),
                "share": _share(summary),
            },
        }
        return out

    # The dashboard --------------------------------------------------------------------------
    def overview(self) -> Overview:
        """Everything the dashboard draws, in one answer. Amounts are milli-units of the main
        resources (cpu, memory, nvidia.com/gpu); ``resources`` lists those the nodes have."""
        snapshot, result = self._seen()
        queues = self.queues()["items"]
        for item in queues:
            name = item["name"]
            summary = result.queues.get(name) if result is not None else None
            info = snapshot.queues[name]
            item["amounts"] = {
                "allocated": _main(summary.allocated) if summary else {},
                "fairShare": _main(summary.fair_share) if summary else {},
                "guaranteed": _main(info.guaranteed),
                "limit": _main(info.limit) if info.limit else {},
            }
            item["history"] = self.history.series(name)
            page = self.waiting(name, limit=str(_DASHBOARD_LINE))
            item["line"] = page["items"]
        table = snapshot.nodes
        present = [
            c
            for i, c in enumerate(table.resources)
            if c in _MAIN and len(table.index) and int(table.allocatable[:, i].sum()) > 0
        ]
        return {
            "kind": "Overview",
            "now": snapshot.now,
            "resources": [c for c in _MAIN if c in present],
            "queues": queues,
            "reservations": _reservations(snapshot),
            "nodes": _nodes(snapshot),
        }

    # Helpers --------------------------------------------------------------------------------
    def _seen(self) -> tuple[snapshots.Snapshot, decisions.CycleResult | None]:
        snapshot = self._board.snapshot()
        if snapshot is None:
            raise NotReady("the scheduler has not taken its first snapshot yet")
        return snapshot, self._board.result()

    @staticmethod
    def _entry(
        snapshot: snapshots.Snapshot,
        result: decisions.CycleResult | None,
        key: str,
        *,
        place: int,
    ) -> WaitingEntry:
        group = snapshot.pod_groups.get(key)
        namespace, _, name = key.partition("/")
        implicit = group is not None and group.implicit
        return {
            "position": place,
            "kind": "Pod" if implicit else "PodGroup",
            "namespace": namespace,
            "name": name.removeprefix("pod:") if implicit else name,
            "minMember": group.min_member if group is not None else None,
            "priority": group.priority if group is not None else None,
            "created": group.creation_timestamp if group is not None else None,
            "reason": _message(result, key),
        }


def _state(
    snapshot: snapshots.Snapshot, name: str, summary: decisions.QueueStatusSummary | None
) -> tuple[str, str | None]:
    info = snapshot.queues[name]
    parents = {q: i.parent for q, i in snapshot.queues.items()}
    problem = queue_status.tree_problem(name, parents=parents)
    problem = problem or (summary.problem if summary else None) or info.invalid
    if problem:
        return "Invalid", problem
    if not info.open:
        return "Closed", "spec.state is Closed: no new work is admitted"
    return "Open", None


def _text(amounts: collections.abc.Mapping[str, int] | None) -> str:
    return queue_status.resource_text(amounts)


def _share(summary: decisions.QueueStatusSummary | None) -> float | None:
    """Allocated over fair share of the dominant resource (1.0: exactly its share)."""
    if summary is None:
        return None
    ratios = [
        summary.allocated.get(name, 0) / summary.fair_share[name]
        for name in summary.fair_share
        if name != resources.PODS and summary.fair_share[name] > 0
    ]
    return round(max(ratios), 3) if ratios else None


def _reservations(snapshot: snapshots.Snapshot) -> list[ReservationRow]:
    out: list[ReservationRow] = []
    for key in sorted(snapshot.reservations):
        info = snapshot.reservations[key]
        out.append(
            {
                "name": key,
                "phase": info.phase,
                "node": info.node_name,
                "holds": _text(info.allocatable),
                "used": _text(info.allocated),
                "ownerSelector": reservation_status.owner_selector(info.owners),
                "owners": list(info.current_owners),
                "queue": info.queue,
            }
        )
    return out


def _nodes(snapshot: snapshots.Snapshot) -> list[NodeRow]:
    table = snapshot.nodes
    columns = [(i, c) for i, c in enumerate(table.resources) if c in _MAIN]
    out: list[NodeRow] = []
    for name, row in sorted(table.index.items()):
        out.append(
            {
                "name": name,
                "allocatable": {c: int(table.allocatable[row, i]) for i, c in columns},
                "requested": {c: int(table.requested[row, i]) for i, c in columns},
                "text": _text({c: int(table.requested[row, i]) for i, c in columns})
                + " of "
                + _text({c: int(table.allocatable[row, i]) for i, c in columns}),
            }
        )
    return out


def _number(text: str | None, *, default: int, what: str, low: int, high: int | None) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{what} must be a whole number, got {text!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise BadRequest(f"{what} must be {bound}, got {value}")
    return value


def _message(result: decisions.CycleResult | None, group: str) -> str | None:
    """Why the last cycle left ``group`` pending, as users read it (None: it did not)."""
    why = result.group_why.get(group) if result is not None else None
    return why.message if why is not None else None
