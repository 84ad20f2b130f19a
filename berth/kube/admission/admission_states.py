"""Admission mode's per-pod state machine: pure, no I/O, no clock, no asyncio.

:class:`~berth.kube.admission.admission.Admission` is the thin asynchronous part: it watches pods,
sends the pins, gate removals, evictions and recreations, and asks this module what each thing it
learns means for the pod's pending allocation. Everything here is a function of its
arguments, so every state and transition is tested exhaustively (tests/admission/
test_admission_states.py, with a hypothesis test over event sequences).

The states of a pending allocation (:class:`AllocationState`):

- ``PINNING``: the cycle admitted the pod onto a node; the cache assumes it there; the pin
  (node affinity and annotations) and then the gate removal are in flight, for the whole
  group at once. A pending allocation adopted from a previous leader starts ``UNGATED``.
- ``UNGATED``: the gate is gone; kube-scheduler (or Berth, for pods naming its scheduler) is
  to bind the pod there within the bind timeout.

and how an allocation ends (:class:`Ending`): ``BOUND`` where Berth put it (the cache keeps
the pod), ``DROPPED`` (the capacity is released and the pod is offered to a later cycle: a pin
or gate removal failed, victims outstayed their wait, the pod finished, was recreated or
went), or ``REJECTED`` (YuniKorn's RejectTask: the capacity is released, the pod and its group
are told why, and the pod is sent back to wait gated — bound elsewhere, reported
unschedulable by its scheduler, or not bound in time).

:func:`observed` turns what the informer saw of a pod (:class:`Observation`, parsed from the
wire by :meth:`Observation.of`) into the :class:`Event` it means for the pod's allocation, and
:func:`advance` is the transition table. :func:`classify` says what a pod without an
allocation is to Berth (:class:`Holding`): held by the gate, not Berth's, admitted earlier (to
adopt), bypassing the gate, or carrying Berth's ``admitted-node`` marker Berth never wrote
(forged: the gate removed by someone else with the marker added, or the marker on a pod the
webhook never gates — opted out with ``scheduling.berth.io/admission: disabled`` outside a
namespace that requires admission — and that Berth did not admit).
"""

from __future__ import annotations

import dataclasses
import enum

from berth.api import core, keys
from berth.kube.transport import pod_edits
from berth.scheduler.snapshot import pods, wire

__all__ = [
    "AllocationState",
    "Ending",
    "Event",
    "Holding",
    "Observation",
    "Transition",
    "advance",
    "classify",
    "observed",
    "unmarked_key",
]

_GATE = keys.ADMISSION_GATE
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class AllocationState(enum.Enum):
    """Where a pending allocation is (see the module docstring)."""

    PINNING = "pinning"
    UNGATED = "ungated"


class Ending(enum.Enum):
    """How a pending allocation ended (see the module docstring)."""

    BOUND = "bound"
    DROPPED = "dropped"
    REJECTED = "rejected"


class Event(enum.Enum):
    """What can happen to a pod with a pending allocation."""

    PINNED = "pinned"  # the pin landed (the group's other pins may still be in flight)
    PIN_FAILED = "pin-failed"  # a pin of the group did not land: the group releases nothing
    UNGATED = "ungated"  # Berth removed its gate
    UNGATE_FAILED = "ungate-failed"  # the gate removal did not land: the pod is still gated
    VICTIMS_STAYED = "victims-stayed"  # the victims on its node outstayed the eviction wait
    BOUND_THERE = "bound-there"  # the informer saw it bound to the allocated node
    BOUND_ELSEWHERE = "bound-elsewhere"  # bound to another node
    UNSCHEDULABLE = "unschedulable"  # its scheduler reported it cannot place it there
    BIND_TIMEOUT = "bind-timeout"  # still unbound the bind timeout after the gate went
    FINISHED = "finished"  # Succeeded, Failed or being deleted
    RECREATED = "recreated"  # another pod (UID) under the same name
    GONE = "gone"  # it left the cluster
    BIND_FAILED = "bind-failed"  # Berth's own binding of an ungated pod of its scheduler failed


@dataclasses.dataclass(frozen=True)
class Transition:
    """The result of one event: the allocation's next state, or how it ended."""

    state: AllocationState | None = None  # None when it ended
    ending: Ending | None = None

    def __post_init__(self) -> None:
        if (self.state is None) == (self.ending is None):
            raise ValueError("a transition has either a next state or an ending")


_STAY: dict[AllocationState, Transition] = {s: Transition(state=s) for s in AllocationState}
_BOUND = Transition(ending=Ending.BOUND)
_DROPPED = Transition(ending=Ending.DROPPED)
_REJECTED = Transition(ending=Ending.REJECTED)

_TABLE: dict[tuple[AllocationState, Event], Transition] = {
    # While pinning, the pod is still gated: nobody but Berth can move it, and its own
    # requests either land (and it moves on) or release the group.
    (AllocationState.PINNING, Event.PINNED): _STAY[AllocationState.PINNING],
    (AllocationState.PINNING, Event.PIN_FAILED): _DROPPED,
    (AllocationState.PINNING, Event.UNGATED): Transition(state=AllocationState.UNGATED),
    (AllocationState.PINNING, Event.UNGATE_FAILED): _DROPPED,
    (AllocationState.PINNING, Event.VICTIMS_STAYED): _DROPPED,
    (AllocationState.PINNING, Event.BOUND_THERE): _BOUND,
    (AllocationState.PINNING, Event.BOUND_ELSEWHERE): _REJECTED,
    # A gated pod's scheduler has not tried it yet: an old Unschedulable condition is stale.
    (AllocationState.PINNING, Event.UNSCHEDULABLE): _STAY[AllocationState.PINNING],
    # The bind timeout runs from the gate's removal only.
    (AllocationState.PINNING, Event.BIND_TIMEOUT): _STAY[AllocationState.PINNING],
    (AllocationState.PINNING, Event.FINISHED): _DROPPED,
    (AllocationState.PINNING, Event.RECREATED): _DROPPED,
    (AllocationState.PINNING, Event.GONE): _DROPPED,
    (AllocationState.PINNING, Event.BIND_FAILED): _STAY[AllocationState.PINNING],
    # Ungated: the pod's scheduler binds it, or the allocation is rejected.
    (AllocationState.UNGATED, Event.PINNED): _STAY[AllocationState.UNGATED],
    (AllocationState.UNGATED, Event.PIN_FAILED): _STAY[AllocationState.UNGATED],
    (AllocationState.UNGATED, Event.UNGATED): _STAY[AllocationState.UNGATED],
    (AllocationState.UNGATED, Event.UNGATE_FAILED): _STAY[AllocationState.UNGATED],
    (AllocationState.UNGATED, Event.VICTIMS_STAYED): _STAY[AllocationState.UNGATED],
    (AllocationState.UNGATED, Event.BOUND_THERE): _BOUND,
    (AllocationState.UNGATED, Event.BOUND_ELSEWHERE): _REJECTED,
    (AllocationState.UNGATED, Event.UNSCHEDULABLE): _REJECTED,
    (AllocationState.UNGATED, Event.BIND_TIMEOUT): _REJECTED,
    (AllocationState.UNGATED, Event.FINISHED): _DROPPED,
    (AllocationState.UNGATED, Event.RECREATED): _DROPPED,
    (AllocationState.UNGATED, Event.GONE): _DROPPED,
    # Ungated and Berth's own: the inner sink binds it from the next cycle on.
    (AllocationState.UNGATED, Event.BIND_FAILED): _DROPPED,
}


def advance(state: AllocationState, event: Event) -> Transition:
    """The transition ``event`` makes from ``state`` (every pair has one)."""
    return _TABLE[(state, event)]


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the informer saw of one pod, reduced to what admission decides on."""

    key: str
    uid: str
    node: str | None  # spec.nodeName
    finished: bool  # Succeeded, Failed, or being deleted
    gates: frozenset[str]
    admitted_node: str | None  # the admitted-node annotation: Berth admitted it earlier
    admitted_at: float | None  # the admitted-at annotation
    belongs: bool  # names a PodGroup or a queue (or may still be grouped by its owner)
    opted_out: bool  # labelled scheduling.berth.io/admission: disabled
    unschedulable: str | None  # its scheduler's PodScheduled=False/Unschedulable message

    @classmethod
    def of(cls, obj: core.Pod) -> Observation:
        """The observation of the pod ``obj`` (wire form)."""
        meta = wire.part(obj.get("metadata"))
        annotations = wire.part(meta.get("annotations"))
        phase = wire.part(obj.get("status")).get("phase")
        admitted = annotations.get(keys.ADMITTED_NODE_ANNOTATION)
        return cls(
            key=f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}",
            uid=str(meta.get("uid") or ""),
            node=str(wire.part(obj.get("spec")).get("nodeName") or "") or None,
            finished=phase in _TERMINAL_PHASES or bool(meta.get("deletionTimestamp")),
            gates=frozenset(pod_edits.gate_names(obj)),
            admitted_node=str(admitted) if admitted else None,
            admitted_at=wire.parse_time(annotations.get(keys.ADMITTED_AT_ANNOTATION)),
            belongs=pod_edits.belongs(obj) or pods.awaits_owner_group(obj),
            opted_out=wire.part(meta.get("labels")).get(keys.ADMISSION_LABEL) == "disabled",
            unschedulable=pod_edits.unschedulable_message(obj),
        )

    @property
    def namespace(self) -> str:
        """The pod's namespace."""
        return self.key.partition("/")[0]

    @property
    def held(self) -> bool:
        """Held by Berth's gate: unbound, unfinished, with the gate."""
        return _GATE in self.gates and self.node is None and not self.finished


def observed(seen: Observation, *, node: str, uid: str, state: AllocationState) -> Event | None:
    """The event ``seen`` means for the pod's allocation on ``node`` (of pod ``uid``, in
    ``state``); None when it changes nothing."""
    if uid and seen.uid and uid != seen.uid:
        return Event.RECREATED
    if seen.node == node:
        return Event.BOUND_THERE
    if seen.node is not None:
        return Event.BOUND_ELSEWHERE
    if seen.finished:
        return Event.FINISHED
    if state is AllocationState.UNGATED and not seen.gates and seen.unschedulable is not None:
        return Event.UNSCHEDULABLE
    return None


def unmarked_key(obj: core.Pod) -> str | None:
    """The key of the pod ``obj`` (wire form) when it has no scheduling gate and no
    ``admitted-node`` marker; None when it has either. Such a pod is not :attr:`~Observation.held`
    and is :attr:`Holding.NONE` to :func:`classify` unless Berth's gate held it when last seen:
    a pod with no allocation, not held before and not being sent back, is none of admission's
    business whatever else it says, and reading no more of it spares the informer the whole
    :class:`Observation` of every pod it sees (scheduler mode's included)."""
    if wire.part(obj.get("spec")).get("schedulingGates"):
        return None
    meta = wire.part(obj.get("metadata"))
    if wire.part(meta.get("annotations")).get(keys.ADMITTED_NODE_ANNOTATION):
        return None
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


class Holding(enum.Enum):
    """What a pod without an allocation is to admission."""

    NONE = "none"  # nothing of Berth's: not gated by it, not admitted by it
    HELD = "held"  # held by Berth's gate: offered to sessions as pending
    NOT_BERTHS = "not-berths"  # held by the gate, but names neither group nor queue: release
    ADOPT = "adopt"  # ungated and unbound, admitted by an earlier leader: adopt its allocation
    BYPASSED = "bypassed"  # its gate was removed by someone other than Berth
    FORGED = "forged"  # carries the admitted-node marker, but Berth never admitted it


def classify(
    seen: Observation,
    *,
    was_held: bool,
    recreating: bool,
    opted_in: bool = False,
    admitted: bool = False,
) -> Holding:
    """What ``seen`` (a pod with no pending allocation) is to admission; ``was_held``: Berth's
    gate held it when last seen; ``recreating``: Berth is deleting it to create it again;
    ``opted_in``: its namespace requires admission (the webhook gates every pod there, the
    opt-out label ignored); ``admitted``: this process wrote the marker on this pod (pinned
    it; its allocation may have ended since, bound or dropped)."""
    if seen.held:
        return Holding.HELD if seen.belongs else Holding.NOT_BERTHS
    unbound = seen.node is None and not seen.finished
    gone = was_held and _GATE not in seen.gates and not seen.finished and not recreating
    if gone and not admitted:
        # Berth's gate went while Berth held no allocation for the pod, and the marker (if
        # any) is not one Berth wrote: someone else removed the gate.
        return Holding.FORGED if seen.admitted_node is not None else Holding.BYPASSED
    if seen.admitted_node is not None:
        if seen.opted_out and not opted_in and not admitted and not recreating:
            return Holding.FORGED  # never gated by the webhook, so never admitted by Berth
        return Holding.ADOPT if unbound and not seen.gates and not recreating else Holding.NONE
    return Holding.NONE
