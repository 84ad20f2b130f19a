"""The capacity requests Berth made, as it keeps them: one :class:`Entry` per owner.

An entry is a request as made (:mod:`berth.kube.autoscaling.request_objects`): its want, its
attempt, the names and uids of its objects, and what the autoscaler last said on them.

- **Adopting.** A new leader finds Berth's objects by label (:func:`adopt`): those of an
  owner it wants capacity for (the owner's uid, :data:`~berth.kube.autoscaling
  .request_objects.OWNER_LABEL`, and the attempt, :data:`~berth.kube.autoscaling
  .request_objects.MANAGED_LABEL`) become its entries, the others are stray (deleted).
- **Reading back** (:func:`read`): the objects' statuses become the entry's verdict — the
  worst of its objects' (:func:`berth.status.capacity_requests.verdict`): refused, then
  unanswered, pending, provisioned — and, for a gang's CapacityBuffers, where each one's
  virtual pods fit and since when (:class:`berth.status.scale_up.BufferSaid`), the time kept
  while its fit stays the same.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import logging

from berth.api import autoscaler_objects, autoscaling
from berth.kube.autoscaling import request_objects
from berth.scheduler.snapshot import wire
from berth.status import capacity_requests as plans
from berth.status import scale_up

__all__ = ["Entry", "adopt", "read"]

logger = logging.getLogger(__name__)

Kind = plans.Kind
CapacityRequest = autoscaler_objects.CapacityRequest


@dataclasses.dataclass
class Entry:
    """One request as made: its want, attempt, objects and what the autoscaler said."""

    want: plans.Want
    kind: Kind
    attempt: int
    requests: tuple[str, ...]  # the request objects' names (one PR, or a buffer per shape)
    templates: tuple[str, ...]  # its PodTemplates' names
    counts: tuple[int, ...]  # pods per shape, as asked
    created: float
    uids: dict[str, str] = dataclasses.field(default_factory=dict)  # object name -> uid
    verdict: plans.Verdict = dataclasses.field(
        default_factory=lambda: plans.Verdict(plans.State.UNANSWERED, "")
    )
    told: plans.State | None = None  # the state last told in an Event
    retry_at: float | None = None  # refused: when to ask again
    active: bool = True  # a buffer's replicas as written (False: 0)
    unanswered_told: bool = False  # the Event saying nobody answered went out
    said: dict[str, scale_up.BufferSaid] = dataclasses.field(default_factory=dict)
    """A gang's buffers: where each one's virtual pods fit, since when (by object name)."""

    @property
    def pods(self) -> int:
        return sum(self.counts)


def adopt(
    found: collections.abc.Iterable[tuple[Kind, CapacityRequest]],
    *,
    wants: collections.abc.Mapping[str, plans.Want],
    entries: collections.abc.Mapping[str, Entry],
    now: float,
) -> tuple[dict[str, Entry], list[tuple[Kind, CapacityRequest]]]:
    """A new leader's leftovers ``found``, matched to its ``wants`` (by owner uid and
    attempt) for owners without an entry yet: the entries adopted (by owner), and the stray
    objects nobody wants."""
    by_uid = {want.owner.uid: key for key, want in wants.items()}
    stray: list[tuple[Kind, CapacityRequest]] = []
    grouped: dict[tuple[str, Kind, str], list[CapacityRequest]] = {}
    for kind, obj in found:
        labels = wire.part(wire.part(obj.get("metadata")).get("labels"))
        owner = by_uid.get(str(labels.get(request_objects.OWNER_LABEL) or ""))
        attempt = str(labels.get(request_objects.MANAGED_LABEL) or "")
        if owner is None or owner in entries or not attempt.isdigit():
            stray.append((kind, obj))
            continue
        grouped.setdefault((owner, kind, attempt), []).append(obj)
    adopted: dict[str, Entry] = {}
    for (owner, kind, attempt), objects in sorted(grouped.items()):
        if owner in adopted:
            stray.extend((kind, o) for o in objects)
            continue
        names = tuple(sorted(str(o["metadata"]["name"]) for o in objects))
        adopted[owner] = Entry(
            want=wants[owner],
            kind=kind,
            attempt=int(attempt),
            requests=names,
            templates=tuple(request_objects.template_names(kind, objects)),
            counts=(1,)
            if wants[owner].purpose is plans.Purpose.RESERVATION
            else tuple(request_objects.counts(kind, objects)),
            created=now,
            uids={str(o["metadata"]["name"]): str(o["metadata"].get("uid") or "") for o in objects},
        )
        logger.info("capacity requests: adopted %s %s", kind.value, ", ".join(names))
    return adopted, stray


def read(
    entry: Entry,
    current: collections.abc.Mapping[tuple[Kind, str], CapacityRequest],
    *,
    now: float,
) -> None:
    """Take what the autoscaler says on ``entry``'s objects (``current``: Berth's objects
    as listed, by kind and ``namespace/name``) into its verdict and, for buffers, its fits."""
    namespace = entry.want.owner.namespace
    statuses = [
        wire.part(wire.part(current.get((entry.kind, f"{namespace}/{n}"))).get("status"))
        for n in entry.requests
    ]
    entry.verdict = _worst([plans.verdict(entry.kind, status) for status in statuses])
    if entry.kind is Kind.CAPACITY_BUFFER:
        entry.said = _buffers_said(entry, statuses, now=now)


def _worst(verdicts: collections.abc.Sequence[plans.Verdict]) -> plans.Verdict:
    order = (
        plans.State.REFUSED,
        plans.State.UNANSWERED,
        plans.State.PENDING,
        plans.State.PROVISIONED,
    )
    for state in order:
        for v in verdicts:
            if v.state is state:
                return v
    return plans.Verdict(plans.State.UNANSWERED, "")


def _buffers_said(
    entry: Entry,
    statuses: collections.abc.Sequence[autoscaler_objects.RequestStatus],
    *,
    now: float,
) -> dict[str, scale_up.BufferSaid]:
    """Where each of a gang's buffers' virtual pods fit, as ``statuses`` say; since when,
    kept from what was read before while it stays the same."""
    namespace = entry.want.owner.namespace
    said: dict[str, scale_up.BufferSaid] = {}
    for name, count, status in zip(entry.requests, entry.counts, statuses, strict=False):
        fit = plans.fit(status)
        had = entry.said.get(name)
        said[name] = scale_up.BufferSaid(
            name=f"{namespace}/{name}",
            pods=count,
            fit=fit,
            since=had.since if had is not None and had.fit is fit else now,
            detail=plans.told(status, autoscaling.BUFFER_PROVISIONING),
        )
    return said
