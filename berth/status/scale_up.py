"""What the cluster's autoscaler did for a group waiting for capacity: the ``ScaleUp`` verdict.

A group whose pods wait ``Unschedulable`` for capacity hands its fate to an autoscaler
(docs/autoscaling.md). Whether the autoscaler acted, and what it could not do, Berth reads
from what the autoscaler itself writes, and says on the group as data (:class:`ScaleUp`: a
:class:`ScaleUpReason` code, the ``ScaleUp`` condition's status, and a message quoting the
autoscaler's own words, never parsed):

- **The autoscaler's Events on the gang's pods** (scheduler mode, where the pods'
  ``Unschedulable`` condition is the signal). Karpenter (Event source ``karpenter``) writes a
  Normal ``Nominated`` Event (``Pod should schedule on: nodeclaim/...``) when a provisioning
  round planned a node for the pod, and a Warning ``FailedScheduling`` Event (``Failed to
  schedule pod, no instance type has enough resources ...``; at most one per pod in five
  minutes) when no NodePool's instance type can take it. Cluster Autoscaler (source
  ``cluster-autoscaler``) writes ``TriggeredScaleUp`` and ``NotTriggerScaleUp``
  (``pod didn't trigger scale-up: ...``) in the same two cases. :func:`sighting_of` reads one
  Event into a :class:`Sighting` by its source and reason (fields, not words);
  :func:`judge` turns a gang's sightings into its verdict: any member the autoscaler cannot
  place makes the gang ``AutoscalerCannotFit`` (a gang is placed whole or not at all);
  else a nomination since it began waiting is ``ScalingUp``; else, once it has waited
  ``timeout`` on a cluster that runs an autoscaler (one of its APIs is served), nobody
  acting is ``NoAutoscalerActed``.
- **The requests Berth made** (ProvisioningRequests, CapacityBuffers;
  :mod:`berth.status.capacity_requests`): :func:`of_request` maps a request's
  :class:`~berth.status.capacity_requests.State` to the same codes — refused is
  ``CapacityRequestRefused``, unanswered past the timeout ``NoAutoscalerActed``.
- **A gated gang's CapacityBuffers** (admission mode; one per pod shape, which Karpenter fills
  shape by shape, not atomically): :func:`judge_buffers` reads their ``Provisioning``
  conditions (:class:`BufferSaid`). A buffer ``False`` with reason ``Infeasible`` makes the
  gang ``AutoscalerCannotFit`` at once. Karpenter v1.15 does not say ``Infeasible``: its
  ``RequiresNewCapacity`` covers virtual pods that need a new node and those that fit none,
  its count of the latter only in words. The two part with time: a shape that needs a node
  reads ``True`` a round after Karpenter launched it (a launched NodeClaim is a node its next
  round fills), a shape that fits none stays ``False``. So a buffer still ``False``
  ``timeout`` after Berth first read it so, while another buffer of the same gang reads
  ``True`` (the autoscaler serves this gang, and has room for some members), makes it
  ``AutoscalerCannotFit`` too — unless a node was still launching meanwhile (one of
  Karpenter's NodeClaims not yet ``Registered``): a cloud slower than ``timeout`` to launch
  the node a shape needs must not read as a shape that fits nowhere, so the time counts from
  when Berth last saw a launch in flight. A gang all of whose shapes fit nowhere gets no
  node either way, and keeps its request's code.

:func:`with_condition` renders a verdict as the PodGroup's ``ScaleUp`` condition (a type no
autoscaler reads). Pure and synchronous.

**A gang the autoscaler cannot fit is kept off its list** (:class:`Holds`). Karpenter decides
a provisioning round pod by pod: it buys nodes for the members that fit and says
``FailedScheduling`` for the one that fits nowhere — nodes the gang, placed whole or not at
all, can never use, kept alive by its nominations. Once a gang's verdict is
``AutoscalerCannotFit``, its pods wait as ``AutoscalerCannotFit`` instead of
``Unschedulable`` (:func:`berth.scheduler.framework.pending.withheld`): no autoscaler reads
that reason, so it buys nothing more and consolidates what it bought. After a backoff
(:data:`HOLD_FIRST`, doubling after each verdict in a row up to :data:`HOLD_CAP`) the pods are
shown to it again, so that a NodePool changed meanwhile is noticed: one provisioning round,
whose verdict either holds them again or (a plan for every member) lets the gang scale up.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum

from berth.api import core, custom_objects, durations, objects
from berth.scheduler.framework import reasons
from berth.scheduler.snapshot import wire
from berth.status import capacity_requests as plans
from berth.status import conditions

__all__ = [
    "CONDITION_SCALE_UP",
    "HOLD_CAP",
    "HOLD_FIRST",
    "Action",
    "BufferSaid",
    "Holds",
    "ScaleUp",
    "PLAN_STANDS",
    "SOURCES",
    "ScaleUpReason",
    "Sighting",
    "judge",
    "judge_buffers",
    "of_request",
    "sighting_of",
    "with_condition",
]

CONDITION_SCALE_UP = "ScaleUp"
"""The PodGroup condition saying what the autoscaler did for the group (no autoscaler reads
it: both act on pods' ``PodScheduled`` only)."""

KARPENTER = "karpenter"
CLUSTER_AUTOSCALER = "cluster-autoscaler"


class ScaleUpReason(enum.Enum):
    """What the autoscaler did for a group waiting for capacity; the value is the ``ScaleUp``
    condition's reason and the Event's."""

    SCALING_UP = "ScalingUp"
    """An autoscaler planned nodes for its pods (Karpenter's ``Nominated``, Cluster
    Autoscaler's ``TriggeredScaleUp``)."""

    AUTOSCALER_CANNOT_FIT = "AutoscalerCannotFit"
    """An autoscaler said it cannot place a member on any node it could add (Karpenter's
    ``FailedScheduling``, Cluster Autoscaler's ``NotTriggerScaleUp``)."""

    NO_AUTOSCALER_ACTED = "NoAutoscalerActed"
    """The group waited the timeout on a cluster with an autoscaler API, and no autoscaler
    acted on its pods or answered its request: it is absent, failing, or ignores them."""

    CAPACITY_REQUESTED = "CapacityRequested"
    """Berth asked with a ProvisioningRequest or CapacityBuffer; no answer yet."""

    CAPACITY_REQUEST_PENDING = "CapacityRequestPending"
    """The autoscaler answered the request; the capacity is not there yet."""

    CAPACITY_PROVISIONED = "CapacityProvisioned"
    """The autoscaler provided (or booked) the capacity asked for."""

    CAPACITY_REQUEST_REFUSED = "CapacityRequestRefused"
    """The autoscaler refused the request (``Failed``, booking expired, capacity revoked, a
    buffer not ready); Berth asks again after a backoff."""

    CAPACITY_API_UNSERVED = "CapacityApiUnserved"
    """Berth would ask with a request, but the cluster serves no API to carry it."""


_STATUS = {
    ScaleUpReason.SCALING_UP: "True",
    ScaleUpReason.CAPACITY_PROVISIONED: "True",
    ScaleUpReason.CAPACITY_REQUESTED: "Unknown",
    ScaleUpReason.CAPACITY_REQUEST_PENDING: "Unknown",
    ScaleUpReason.AUTOSCALER_CANNOT_FIT: "False",
    ScaleUpReason.NO_AUTOSCALER_ACTED: "False",
    ScaleUpReason.CAPACITY_REQUEST_REFUSED: "False",
    ScaleUpReason.CAPACITY_API_UNSERVED: "False",
}


@dataclasses.dataclass(frozen=True)
class ScaleUp:
    """A group's verdict: the code, and the message said on the group."""

    code: ScaleUpReason
    message: str
    at: float | None = None
    """When the autoscaler last said it (``AutoscalerCannotFit``: its latest refusal)."""

    @property
    def status(self) -> str:
        """The ``ScaleUp`` condition's status: ``True`` (capacity coming or there), ``False``
        (the autoscaler could not, or none acted), ``Unknown`` (asked, no answer yet)."""
        return _STATUS[self.code]

    @property
    def warning(self) -> bool:
        """Worth a Warning Event (the autoscaler could not help)."""
        return self.status == "False"


class Action(enum.Enum):
    """What an autoscaler's Event on a pod says it did."""

    PLANNED = "planned"  # it plans a node for the pod
    CANNOT_FIT = "cannot fit"  # no node it could add takes the pod


# (source component, Event reason) -> what it says. Karpenter v1.15:
# pkg/controllers/provisioning/scheduling/events.go (NominatePodEvent, PodFailedToScheduleEvent);
# Cluster Autoscaler: its event reasons for unschedulable pods.
_ACTIONS: dict[tuple[str, str], Action] = {
    (KARPENTER, "Nominated"): Action.PLANNED,
    (KARPENTER, "FailedScheduling"): Action.CANNOT_FIT,
    (CLUSTER_AUTOSCALER, "TriggeredScaleUp"): Action.PLANNED,
    (CLUSTER_AUTOSCALER, "NotTriggerScaleUp"): Action.CANNOT_FIT,
}

PLAN_STANDS = 300.0
"""Seconds an autoscaler's plan for a pod stands without being repeated. Karpenter repeats
its ``Nominated`` Event for a pod still pending at most every two minutes (its recorder's
dedupe); a plan not repeated in five has stalled (the autoscaler stopped, or its node never
came), and the gang is judged as if none was made since."""

SOURCES = (KARPENTER, CLUSTER_AUTOSCALER)
"""The Event sources read (``source.component``; Events with these sources are listed)."""


@dataclasses.dataclass(frozen=True)
class Sighting:
    """One autoscaler Event on a pod: who, what it did, when (seconds), its words."""

    pod_uid: str
    source: str
    action: Action
    at: float
    message: str


def sighting_of(event: core.Event) -> Sighting | None:
    """The sighting a core/v1 Event is, if an autoscaler wrote it about a pod (its source —
    ``source.component``, else ``reportingComponent`` — and its reason; the message is kept
    as written; its time is the latest it carries)."""
    involved = wire.part(event.get("involvedObject"))
    if involved.get("kind") != "Pod":
        return None
    source = wire.part(event.get("source")).get("component") or event.get("reportingComponent")
    action = _ACTIONS.get((str(source or ""), str(event.get("reason") or "")))
    uid = involved.get("uid")
    if action is None or not uid:
        return None
    metadata = wire.part(event.get("metadata"))
    stamps = (
        event.get("lastTimestamp"),
        wire.part(event.get("series")).get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        metadata.get("creationTimestamp"),
    )
    at = max((t for t in (wire.parse_time(s) for s in stamps if s) if t is not None), default=None)
    if at is None:
        return None
    return Sighting(str(uid), str(source), action, at, str(event.get("message") or ""))


_WHO = {KARPENTER: "Karpenter", CLUSTER_AUTOSCALER: "Cluster Autoscaler"}


def judge(
    members: collections.abc.Mapping[str, str],
    sightings: collections.abc.Collection[Sighting],
    *,
    since: float,
    now: float,
    timeout: float,
    autoscaled: bool,
) -> ScaleUp | None:
    """The verdict on a gang whose waiting ``members`` (key -> uid) have waited
    ``Unschedulable`` since ``since``, from the autoscalers' ``sightings`` (any pods'; its
    members' count). Each member's latest sighting stands. One the autoscaler cannot fit
    makes the gang ``AutoscalerCannotFit`` (quoting it); else a plan made since the gang
    began waiting and not older than :data:`PLAN_STANDS` is ``ScalingUp``; else, once
    ``timeout`` has passed without either on an ``autoscaled`` cluster (an autoscaler's API
    is served), ``NoAutoscalerActed``; else None (nothing to say yet)."""
    if not sightings and (not autoscaled or now - since < timeout):
        return None  # the common case of a long backlog, told without the work below
    uids = {uid: key for key, uid in members.items()}
    latest: dict[str, Sighting] = {}
    for seen in sightings:
        if seen.pod_uid not in uids:
            continue
        had = latest.get(seen.pod_uid)
        if had is None or (seen.at, seen.action is Action.CANNOT_FIT) > (
            had.at,
            had.action is Action.CANNOT_FIT,
        ):
            latest[seen.pod_uid] = seen
    refused = sorted(
        (s for s in latest.values() if s.action is Action.CANNOT_FIT),
        key=lambda s: uids[s.pod_uid],
    )
    pods = len(members)
    if refused:
        first = refused[0]
        return ScaleUp(
            ScaleUpReason.AUTOSCALER_CANNOT_FIT,
            f"{_WHO.get(first.source, first.source)} cannot place {len(refused)} of its {pods} "
            f"waiting pod{'s' if pods != 1 else ''} on any node it could add, and the gang is "
            f"placed whole or not at all (pod {uids[first.pod_uid]}: {first.message})",
            at=max(s.at for s in refused),
        )
    planned = sorted(
        (s for s in latest.values() if s.action is Action.PLANNED and s.at >= since - 1),
        key=lambda s: uids[s.pod_uid],
    )
    fresh = [s for s in planned if now - s.at <= PLAN_STANDS]
    if fresh:
        first = fresh[0]
        return ScaleUp(
            ScaleUpReason.SCALING_UP,
            f"{_WHO.get(first.source, first.source)} plans nodes for {len(fresh)} of its "
            f"{pods} waiting pod{'s' if pods != 1 else ''} (pod {uids[first.pod_uid]}: "
            f"{first.message})",
        )
    quiet = now - max([since, *(s.at for s in planned)])
    if autoscaled and quiet >= timeout:
        # The words stay the same while nothing changes: a message that counted the seconds
        # would rewrite the group's status (and its Event) on every pass.
        stalled = " since its last plan" if planned else ""
        return ScaleUp(
            ScaleUpReason.NO_AUTOSCALER_ACTED,
            f"no autoscaler has acted on its {pods} Unschedulable pod{'s' if pods != 1 else ''} "
            f"in {timeout:g}s{stalled}: is Karpenter or Cluster Autoscaler running, and does "
            "any of its node pools or groups match the pods?",
        )
    return None


@dataclasses.dataclass(frozen=True)
class BufferSaid:
    """What one CapacityBuffer of a gang says, as Berth read it."""

    name: str  # namespace/name
    pods: int  # the virtual pods it asks for: the gang's members of its shape
    fit: plans.Fit
    since: float  # when Berth first read this fit (its clock)
    detail: str  # its Provisioning condition as the autoscaler wrote it


def judge_buffers(
    said: collections.abc.Sequence[BufferSaid],
    *,
    now: float,
    timeout: float,
    launching: float | None = None,
) -> ScaleUp | None:
    """The verdict on a gang asking with the CapacityBuffers ``said`` (one per pod shape;
    module docstring): ``AutoscalerCannotFit`` when one reads ``Infeasible``, or when one has
    read ``False`` for ``timeout`` while another reads ``True`` and the autoscaler launched
    no node meanwhile (``launching``: when Berth last saw one of its NodeClaims not yet
    registered; None: never) — a shape whose node is still on its way (a cloud slower than
    ``timeout`` to launch it) is not one it cannot fit; else None (its requests' code stands).
    ``at`` is when the verdict came true, on Berth's clock."""
    pods = sum(s.pods for s in said)
    waiting = f"{pods} waiting pod{'s' if pods != 1 else ''}"
    infeasible = sorted((s for s in said if s.fit is plans.Fit.INFEASIBLE), key=lambda s: s.name)
    if infeasible:
        first, count = infeasible[0], sum(s.pods for s in infeasible)
        return ScaleUp(
            ScaleUpReason.AUTOSCALER_CANNOT_FIT,
            f"the autoscaler cannot place {count} of its {waiting} on any node it could add, "
            f"and the gang is placed whole or not at all (CapacityBuffer {first.name}: "
            f"{first.detail})",
            at=max(s.since for s in infeasible),
        )
    fits = [s for s in said if s.fit is plans.Fit.FITS]
    quiet = launching if launching is not None else float("-inf")
    stuck = sorted(
        (s for s in said if s.fit is plans.Fit.SHORT and now - max(s.since, quiet) >= timeout),
        key=lambda s: s.name,
    )
    if not fits or not stuck:
        return None
    first, count = stuck[0], sum(s.pods for s in stuck)
    return ScaleUp(
        ScaleUpReason.AUTOSCALER_CANNOT_FIT,
        f"the autoscaler has room for {sum(s.pods for s in fits)} of its {waiting} but, in "
        f"{timeout:g}s, none for {count} more, and the gang is placed whole or not at all "
        f"(CapacityBuffer {first.name}: {first.detail})",
        at=max(max(s.since, quiet) for s in stuck) + timeout,
    )


def of_request(state: plans.State, *, overdue: bool, served: bool = True) -> ScaleUpReason:
    """The code of a request Berth made, in ``state`` (``overdue``: unanswered past the
    timeout; ``served`` False: no API could carry it, so none was made)."""
    if not served:
        return ScaleUpReason.CAPACITY_API_UNSERVED
    if state is plans.State.UNANSWERED:
        return ScaleUpReason.NO_AUTOSCALER_ACTED if overdue else ScaleUpReason.CAPACITY_REQUESTED
    return {
        plans.State.PENDING: ScaleUpReason.CAPACITY_REQUEST_PENDING,
        plans.State.PROVISIONED: ScaleUpReason.CAPACITY_PROVISIONED,
        plans.State.REFUSED: ScaleUpReason.CAPACITY_REQUEST_REFUSED,
    }[state]


def with_condition(
    found: collections.abc.Sequence[objects.Condition],
    verdict: ScaleUp | None,
    *,
    now: float,
) -> list[objects.Condition]:
    """The conditions ``found`` with the ``ScaleUp`` condition of ``verdict`` (None: without
    one, as no autoscaler is waited on); its ``lastTransitionTime`` moves with its status."""
    status: custom_objects.ObjectStatus = {"conditions": list(found)}
    if verdict is None:
        return [
            {**c}
            for c in found
            if isinstance(c, collections.abc.Mapping) and c.get("type") != CONDITION_SCALE_UP
        ]
    return conditions.updated(
        status,
        kind=CONDITION_SCALE_UP,
        value=verdict.status,
        reason=verdict.code.value,
        message=verdict.message,
        now=now,
    )


HOLD_FIRST = 300.0
"""Seconds a gang the autoscaler cannot fit is first kept off its list. Karpenter repeats its
``FailedScheduling`` Event for a pod at most every five minutes (its recorder's dedupe): a
shorter hold could show the pods again before Karpenter may say its verdict again, and they
would stay ``Unschedulable`` on the old one."""

HOLD_CAP = 3600.0
"""The longest hold: a NodePool changed meanwhile is noticed within an hour."""

_SKEW = 30.0  # seconds the autoscaler's clock may lag Berth's when its Event is stamped


@dataclasses.dataclass(frozen=True)
class _Hold:
    until: float  # when the pods are shown to the autoscaler again
    rounds: int  # holds in a row: the backoff's exponent
    seen: float  # the autoscaler's latest refusal when it was held (its clock)
    backoff: float  # how long it is held


class Holds:
    """Which gangs' pods wait as ``AutoscalerCannotFit`` (module docstring): fed every pass's
    verdicts, on a clock of the caller's. Pure: no I/O, no clock of its own."""

    def __init__(self, *, first: float = HOLD_FIRST, cap: float = HOLD_CAP) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"hold backoff must satisfy 0 < first <= cap, got {first}, {cap}")
        self._first = first
        self._cap = cap
        self._holds: dict[str, _Hold] = {}  # group key -> its last hold (held or released)
        self._held: dict[str, reasons.Reason] = {}  # group key -> what its pods say

    @property
    def held(self) -> collections.abc.Mapping[str, reasons.Reason]:
        """The gangs whose pods are kept off the autoscalers' list, and what they say."""
        return self._held

    def until(self, group: str) -> float | None:
        """When ``group``'s pods are shown to the autoscaler again (None: not held)."""
        hold = self._holds.get(group)
        return hold.until if hold is not None and group in self._held else None

    def update(self, verdicts: collections.abc.Mapping[str, ScaleUp], *, now: float) -> bool:
        """Take a pass's ``verdicts`` (by group key) at ``now``; whether :attr:`held` changed.

        A gang is held when its verdict first becomes ``AutoscalerCannotFit``; released when
        its hold ends; held again, for twice as long, only when the autoscaler says it again
        after the release (its pods were shown to it and it still cannot fit them). A verdict
        that is anything else (a plan for every member, the gang placed or gone) forgets it:
        its next refusal starts over at :data:`HOLD_FIRST`."""
        changed = False
        for group in [g for g in self._holds if not _cannot_fit(verdicts.get(g))]:
            del self._holds[group]
            changed |= self._held.pop(group, None) is not None
        for group, verdict in sorted(verdicts.items()):
            if not _cannot_fit(verdict) or verdict.at is None:
                continue
            hold = self._holds.get(group)
            if hold is None:
                self._hold(group, verdict, rounds=1, now=now)
                changed = True
            elif now >= hold.until:
                if self._held.pop(group, None) is not None:
                    changed = True
                if _said_again(verdict.at, hold):
                    self._hold(group, verdict, rounds=hold.rounds + 1, now=now)
                    changed = True
        return changed

    def _hold(self, group: str, verdict: ScaleUp, *, rounds: int, now: float) -> None:
        backoff = min(self._first * 2 ** (rounds - 1), self._cap)
        until = now + backoff
        self._holds[group] = _Hold(
            until=until, rounds=rounds, seen=verdict.at or now, backoff=backoff
        )
        self._held[group] = reasons.new(
            reasons.ReasonCode.AUTOSCALER_CANNOT_FIT,
            f"pod group {group}: {verdict.message}; so that no node is bought for the members "
            f"that fit, its pods are kept off the autoscalers' list until "
            f"{conditions.timestamp(until)} (backoff "
            f"{durations.format_duration(int(backoff * 1000))}), then shown to them again",
            plugin="autoscaler",
            group=group,
            until=until,
        )


def _said_again(at: float | None, hold: _Hold) -> bool:
    """Whether a refusal stamped ``at`` is one the autoscaler said after ``hold`` ended (its
    pods shown again): newer than the refusal it was held for, and no earlier than its end
    less the clocks' skew. The skew allowed is at most half the hold: a hold shorter than
    :data:`_SKEW` would otherwise take the refusals of the round that started it (a member's
    Event a second after another's) for a new one, and hold the gang again at once, its pods
    never shown to the autoscaler."""
    return at is not None and at > hold.seen and at >= hold.until - min(_SKEW, hold.backoff / 2)


def _cannot_fit(verdict: ScaleUp | None) -> bool:
    return verdict is not None and verdict.code is ScaleUpReason.AUTOSCALER_CANNOT_FIT
