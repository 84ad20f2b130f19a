"""What a Reservation's status becomes after a scheduling cycle's fact: one pure owner.

A cycle publishes its Reservation facts as decisions (``SetReservationAvailable``,
``AllocateReservation``, ``EndReservation``, a Reservation's ``Unschedulable``).
:func:`reservation_status` turns one fact and the status the object has now into the status it
should have. The live operator (:mod:`berth.kube.reservations.reservation_statuses`, reading at a
version and writing back) and ``berth sim`` (:mod:`berth.sim.cluster`, in memory) both call it, so
the simulator and the cluster cannot drift: in both, an ended reservation (``Succeeded``,
``Expired``, ``Failed``) never becomes ``Available`` again, whatever order a cycle's facts land
in. See "Status owners" in docs/architecture.md.

:func:`owner_selector` words a reservation's owners as selectors people read (``app=train``,
``pod/trainer``, ``Job/train``), for ``status.ownerSelector`` (the ``OWNER`` column of ``kubectl
get resv``) and the dashboard.

Pure functions of JSON dicts; conditions follow :mod:`berth.status.conditions`. Nothing here
talks to the API server.
"""

from __future__ import annotations

import collections.abc
import copy
import typing

from berth.api import custom_objects, resources
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import reservations as snapshot_reservations
from berth.scheduler.snapshot import selectors
from berth.status import conditions

__all__ = ["ENDED_PHASES", "ReservationFact", "owner_selector", "reservation_status"]

ENDED_PHASES = frozenset({"Succeeded", "Expired", "Failed"})
"""Phases a reservation never leaves: it holds nothing any more."""

ReservationFact = (
    decisions.SetReservationAvailable
    | decisions.AllocateReservation
    | decisions.EndReservation
    | decisions.Unschedulable
)
"""The facts of a cycle about one Reservation."""

_Status = custom_objects.ReservationStatus
_WORDED = {
    selectors.IN: "{key} in ({values})",
    selectors.NOT_IN: "{key} notin ({values})",
    selectors.EXISTS: "{key}",
    selectors.DOES_NOT_EXIST: "!{key}",
}


def _one_owner(owner: snapshot_reservations.ReservationOwner) -> str:
    if owner.object_name is not None:
        return f"pod/{owner.object_name}"
    if owner.controller_kind is not None or owner.controller_name is not None:
        return f"{owner.controller_kind or '?'}/{owner.controller_name or '?'}"
    # A label selector, in kubectl's form (metav1.FormatLabelSelector): keys sorted.
    parts = [(key, f"{key}={value}") for key, value in owner.match_labels]
    for requirement in owner.match_expressions:
        worded = _WORDED.get(requirement.operator, "{key} {operator} ({values})")
        values = ",".join(sorted(requirement.values))
        parts.append(
            (requirement.key, worded.format(key=requirement.key, values=values,
                                            operator=requirement.operator))
        )  # fmt: skip
    return ",".join(text for _, text in sorted(parts)) or "every pod"


def owner_selector(owners: collections.abc.Sequence[snapshot_reservations.ReservationOwner]) -> str:
    """The owners as selectors people read, ``; `` between owners: ``pod/NAME`` for a pod
    named, ``KIND/NAME`` for the pods a controller owns, ``k=v,k2 in (a,b)`` for a label
    selector (``every pod`` for an empty one)."""
    return "; ".join(_one_owner(owner) for owner in owners)


def reservation_status(
    current: custom_objects.ReservationStatus, fact: ReservationFact, *, now: float
) -> _Status:
    """The status a Reservation whose status is ``current`` should have after ``fact``.

    - available: placed on the node holding ``allocatable`` and ``devices`` (``Scheduled``
      True); ``Available``
      and ``Ready`` True unless it has ended already (an owner placed in the same cycle may
      have ended it first);
    - allocated: the owner joins ``currentOwners`` (once, by UID) and its requests add to
      ``allocated``; an allocate-once reservation becomes ``Succeeded``;
    - ended: the phase and the ``Ready`` condition the fact says;
    - unschedulable: ``Pending``, ``Scheduled`` False with the reason's message.
    """
    status: _Status = copy.deepcopy(current)
    if isinstance(fact, decisions.SetReservationAvailable):
        status.update({"nodeName": fact.node, "allocatable": fact.allocatable.to_api()})
        if fact.devices:
            status["devices"] = [
                typing.cast(custom_objects.ReservedDevice, device.to_api())
                for device in fact.devices
            ]
        else:
            status.pop("devices", None)
        _set(status, "Scheduled", "True", "Scheduled", f"placed on {fact.node}", now=now)
        if status.get("phase") not in ENDED_PHASES:
            status["phase"] = "Available"
            _set(status, "Ready", "True", "Available", "holding capacity for its owners", now=now)
    elif isinstance(fact, decisions.AllocateReservation):
        owners = [
            o
            for o in status.get("currentOwners") or []
            if isinstance(o, dict) and o.get("uid") != fact.owner_uid
        ]
        owners.append({"namespace": fact.namespace, "name": fact.owner, "uid": fact.owner_uid})
        try:
            allocated = resources.ResourceList.parse(status.get("allocated"))
        except Exception:
            allocated = resources.ResourceList()  # unreadable: start again from this owner
        status.update({"currentOwners": owners, "allocated": (allocated + fact.requests).to_api()})
        if fact.succeeded:
            status["phase"] = "Succeeded"
            _set(status, "Ready", "False", "Succeeded", f"used by its owner {fact.owner}", now=now)
    elif isinstance(fact, decisions.EndReservation):
        status["phase"] = fact.phase
        _set(status, "Ready", "False", fact.reason, fact.message, now=now)
    else:
        status.setdefault("phase", "Pending")  # what the CRD defaults it to
        _set(status, "Scheduled", "False", fact.reason.code.value, fact.reason.message, now=now)
    return status


def _set(status: _Status, kind: str, value: str, reason: str, message: str, *, now: float) -> None:
    status["conditions"] = conditions.updated(
        status, kind=kind, value=value, reason=reason, message=message, now=now
    )
