"""What Berth says of the capacity requests it made: the group's note, and Events on the owner.

- **The note** (:func:`request_verdict`): what was asked and what the autoscaler says of it,
  as a :class:`~berth.status.scale_up.ScaleUp` (its code, by
  :func:`berth.status.scale_up.of_request`, and a message): asked and not answered yet,
  answered and pending (the autoscaler's own condition, quoted), provisioned, refused (with
  when Berth asks again), or nobody answering within the timeout. :class:`Noted` appends the
  notes to the groups' reasons (the code stands: it says why the group waits); :func:`unserved`
  says why a want no served API can carry was not asked.
- **A held gang's verdict** (:func:`held`) says until when it is held, and how.
- **Events on the owner** (:func:`tell`): ``CapacityRequestAccepted``,
  ``CapacityProvisioned``, ``CapacityRequestRefused`` (Warning) when a request's state
  changes, and ``CapacityRequestUnanswered`` (Warning) once when nobody answered in time.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import autoscaling
from berth.kube.autoscaling import request_entries as entries
from berth.kube.transport import events
from berth.scheduler.framework import reasons
from berth.status import capacity_requests as plans
from berth.status import conditions, scale_up

__all__ = [
    "Noted",
    "Record",
    "held",
    "request_verdict",
    "tell",
    "unanswered",
    "unserved",
    "what",
]

Kind = plans.Kind


class Record(typing.Protocol):
    """Records an Event on a request's owner."""

    def __call__(self, owner: plans.Owner, *, type: str, reason: str, message: str) -> None: ...


def request_verdict(entry: entries.Entry, *, now: float, timeout: float) -> scale_up.ScaleUp:
    """What the group of ``entry`` is told of its request at ``now`` (``timeout``: the
    seconds an autoscaler has to answer)."""
    state = entry.verdict.state
    overdue = now - entry.created >= timeout
    code = scale_up.of_request(state, overdue=overdue)
    if state is plans.State.UNANSWERED:
        message = (
            unanswered(entry, timeout=timeout)
            if overdue
            else f"asked the autoscaler for {what(entry)}"
        )
    elif state is plans.State.REFUSED:
        # The time to ask again, not the seconds left: the words stay the same while
        # nothing changes (a countdown would rewrite the group's status every pass).
        again = conditions.timestamp(entry.retry_at if entry.retry_at is not None else now)
        message = (
            f"the autoscaler refused {what(entry)}: {entry.verdict.detail}; asking again at {again}"
        )
    elif state is plans.State.PROVISIONED:
        message = f"the autoscaler provided {what(entry)}"
    else:
        message = f"asked the autoscaler for {what(entry)}: {entry.verdict.detail}"
    return scale_up.ScaleUp(code, message)


def tell(entry: entries.Entry, *, now: float, timeout: float, record: Record) -> None:
    """An Event on ``entry``'s owner when its verdict changed, or once when nobody answered
    in ``timeout`` seconds."""
    state = entry.verdict.state
    if state is not entry.told and state is not plans.State.UNANSWERED:
        entry.told = state
        asked = what(entry)
        detail = entry.verdict.detail
        if state is plans.State.PROVISIONED:
            record(
                entry.want.owner,
                type=events.NORMAL,
                reason="CapacityProvisioned",
                message=f"the autoscaler provided {asked}: {detail}",
            )
        elif state is plans.State.REFUSED:
            record(
                entry.want.owner,
                type=events.WARNING,
                reason="CapacityRequestRefused",
                message=f"the autoscaler refused {asked}: {detail}",
            )
        else:
            record(
                entry.want.owner,
                type=events.NORMAL,
                reason="CapacityRequestAccepted",
                message=f"the autoscaler works on {asked}: {detail}",
            )
    if (
        state is plans.State.UNANSWERED
        and now - entry.created >= timeout
        and not entry.unanswered_told
    ):
        entry.unanswered_told = True
        record(
            entry.want.owner,
            type=events.WARNING,
            reason="CapacityRequestUnanswered",
            message=unanswered(entry, timeout=timeout),
        )


def held(
    verdict: scale_up.ScaleUp, *, until: float, pods: reasons.ReasonCode | None
) -> scale_up.ScaleUp:
    """``verdict`` on a gang held until ``until``: its pods waiting as ``pods`` off the
    autoscalers' list (scheduler mode), or (None) its requests withdrawn."""
    how = (
        f"its pods wait as {pods.value}, off the autoscalers' list"
        if pods is not None
        else "it asks the autoscaler for nothing (its requests withdrawn)"
    )
    return dataclasses.replace(
        verdict, message=f"{verdict.message}; {how}, until {conditions.timestamp(until)}"
    )


def unanswered(entry: entries.Entry, *, timeout: float) -> str:
    """The words saying nobody answered ``entry``'s request in ``timeout`` seconds."""
    return f"no autoscaler has answered {what(entry)} in {timeout:g}s: is " + (
        "Cluster Autoscaler (with ProvisioningRequests enabled) running?"
        if entry.kind is Kind.PROVISIONING_REQUEST
        else "Karpenter (with its CapacityBuffer feature gate) or Cluster Autoscaler running?"
    )


def what(entry: entries.Entry) -> str:
    """What ``entry`` asked for, with which objects."""
    namespace = entry.want.owner.namespace
    names = ", ".join(f"{namespace}/{n}" for n in entry.requests)
    pods = (
        "a reservation's room"
        if entry.want.purpose is plans.Purpose.RESERVATION
        else (f"{entry.pods} pod{'s' if entry.pods != 1 else ''}' capacity")
    )
    return f"{pods} with {entry.kind.value} {names}"


def unserved(want: plans.Want) -> str:
    """Why ``want`` was not asked: no served API can carry it."""
    if want.purpose is plans.Purpose.QUEUE:
        return (
            f"its queue asks for a ProvisioningRequest ({want.class_name}), which this cluster "
            f"does not serve ({autoscaling.PROVISIONING_REQUEST_API_VERSION}): its pods' "
            "Unschedulable condition is the autoscalers' only signal"
        )
    if want.purpose is plans.Purpose.RESERVATION:
        return (
            f"no autoscaler to ask for its room: CapacityBuffers "
            f"({autoscaling.CAPACITY_BUFFER_API_VERSION}) are not served"
        )
    return (
        "no autoscaler API to ask for its capacity: neither ProvisioningRequests "
        f"({autoscaling.PROVISIONING_REQUEST_API_VERSION}) nor CapacityBuffers "
        f"({autoscaling.CAPACITY_BUFFER_API_VERSION}) are served"
    )


class Noted(collections.abc.Mapping[str, reasons.Reason]):
    """Groups' reasons with their capacity-request notes appended (read on demand: a parked
    backlog's reasons are many, the notes few)."""

    __slots__ = ("_notes", "_why")

    def __init__(
        self,
        why: collections.abc.Mapping[str, reasons.Reason],
        notes: collections.abc.Mapping[str, str],
    ) -> None:
        self._why = why
        self._notes = notes

    def __getitem__(self, key: str) -> reasons.Reason:
        why = self._why[key]
        note = self._notes.get(key)
        if note is None:
            return why
        return dataclasses.replace(why, message=f"{why.message}; {note}")

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._why)

    def __len__(self) -> int:
        return len(self._why)
