"""Why kube-scheduler refused a pod Berth pinned, and what of the node that refusal rested on.

In admission mode kube-scheduler binds the pods Berth admits. When it will not bind one where
Berth pinned it, it says why in words (the pod's ``PodScheduled=False`` condition). Berth keeps
those words for people, verbatim and never parsed, and works out the rest from its own view of
the cluster (the snapshot of the cycle before), as data (:class:`Refusal`):

- the node's ``NoSchedule``/``NoExecute`` taints the pod does not tolerate (kube-scheduler
  honours them whatever Berth's profile does), and whether the node is cordoned;
- the pod's ResourceClaims not allocated on the node (kube-scheduler allocates them as it binds:
  one it could not allocate there is why a pod with claims stays unbound);
- how the refusal showed (reported ``Unschedulable``, bound elsewhere, or not bound in time).

:class:`NodeMark` is what of the node the refusal rested on, as Berth saw it: the node object's
scheduling fields (UID, labels, taints, allocatable, cordon) and the devices it reaches (which
are allocated, what capacity is consumed). :func:`cause_gone` says when the node has changed so
that the cause may have gone — a taint removed, the node uncordoned or replaced, a label or its
capacity changed, a device freed or added — which is when kube-scheduler would try the pod again
(its queueing hints), and when :mod:`berth.kube.admission.rejections` forgets the node for the pod.

Pure and synchronous.
"""

from __future__ import annotations

import dataclasses
import types

from berth.kube.admission import admission_states as states
from berth.scheduler.framework import reasons
from berth.scheduler.snapshot import devices as devices_
from berth.scheduler.snapshot import pods, snapshots
from berth.scheduler.snapshot import taints as taints_

__all__ = ["NodeMark", "Refusal", "cause_gone", "mark", "refusal"]

_REPELLING = frozenset({taints_.NO_SCHEDULE, taints_.NO_EXECUTE})
_HOW = {
    states.Event.UNSCHEDULABLE: "its scheduler reported it unschedulable there",
    states.Event.BOUND_ELSEWHERE: "its scheduler bound it to another node",
    states.Event.BIND_TIMEOUT: "its scheduler did not bind it: not bound within",
}


@dataclasses.dataclass(frozen=True)
class NodeMark:
    """What of a node a refusal there rested on, as Berth saw it (see the module docstring)."""

    uid: str
    labels: tuple[tuple[str, str], ...]
    taints: tuple[taints_.Taint, ...]
    allocatable: tuple[tuple[str, int], ...]
    unschedulable: bool
    # The devices the node reaches (with their taints), those allocated whole, and the capacity
    # consumed of those shared by capacity.
    devices: frozenset[tuple[devices_.DeviceId, tuple[taints_.Taint, ...]]] = frozenset()
    held: frozenset[devices_.DeviceId] = frozenset()
    consumed: tuple[tuple[devices_.DeviceId, tuple[tuple[str, int], ...]], ...] = ()


def mark(snapshot: snapshots.Snapshot, node: str) -> NodeMark | None:
    """The mark of ``node`` in ``snapshot`` (None: Berth does not know the node)."""
    info = snapshot.node_infos.get(node)
    if info is None:
        return None
    reached: set[tuple[devices_.DeviceId, tuple[taints_.Taint, ...]]] = set()
    ids: set[devices_.DeviceId] = set()
    found = snapshot.devices
    if found.watched and not found.catalog.empty:
        for pool in found.catalog.pools_for(node, labels=info.labels):
            for device in pool.devices:
                device_id = (device.driver, device.pool, device.name)
                ids.add(device_id)
                reached.add((device_id, device.taints))
    allocated = found.allocated if ids else None
    return NodeMark(
        uid=info.uid,
        labels=tuple(sorted(info.labels.items())),
        taints=info.taints,
        allocatable=tuple(sorted(info.allocatable.items())),
        unschedulable=info.unschedulable,
        devices=frozenset(reached),
        held=frozenset(ids & allocated.exclusive) if allocated is not None else frozenset(),
        consumed=tuple(
            sorted(
                (device_id, tuple(sorted(used.items())))
                for device_id, used in allocated.consumed.items()
                if device_id in ids
            )
        )
        if allocated is not None
        else (),
    )


def cause_gone(then: NodeMark | None, now: NodeMark | None) -> bool:
    """Whether the node changed from ``then`` to ``now`` so that a refusal there may no longer
    hold (see the module docstring). Without a mark then (the node unknown to Berth when the
    pod was refused), only time forgets."""
    if then is None:
        return False
    if now is None:
        return True  # the node went: one coming back under its name is another node
    if (then.uid, then.labels, then.taints, then.allocatable, then.unschedulable) != (
        now.uid,
        now.labels,
        now.taints,
        now.allocatable,
        now.unschedulable,
    ):
        return True
    if now.devices - then.devices or then.held - now.held:
        return True  # a device added (or its taints changed), or one freed
    before = dict(then.consumed)
    after = dict(now.consumed)
    return any(
        dict(used).get(name, 0) < amount
        for device_id, was in before.items()
        for used in (after.get(device_id, ()),)
        for name, amount in was
    )


@dataclasses.dataclass(frozen=True)
class Refusal:
    """kube-scheduler's refusal of pod ``pod`` pinned to ``node`` (see the module docstring)."""

    pod: str
    node: str
    how: states.Event
    said: str | None = None  # the pod's scheduler's words (PodScheduled=False), verbatim
    bound_to: str | None = None  # where it was bound instead (BOUND_ELSEWHERE)
    timeout: float | None = None  # the bind timeout it outstayed (BIND_TIMEOUT)
    taints: tuple[taints_.Taint, ...] = ()  # the node's taints the pod does not tolerate
    cordoned: bool = False
    claims: tuple[str, ...] = ()  # the pod's ResourceClaims not allocated on the node
    mark: NodeMark | None = None

    @property
    def causes(self) -> tuple[str, ...]:
        """What Berth sees on the node that may have made kube-scheduler refuse, in words."""
        found = [f"untolerated taint {t}" for t in self.taints]
        if self.cordoned:
            found.append("node is unschedulable (cordoned)")
        found.extend(f"resourceclaim {claim} not allocated there" for claim in self.claims)
        return tuple(found)

    @property
    def message(self) -> str:
        """The refusal in words: how it showed, what Berth sees, and what the scheduler said."""
        how = _HOW.get(self.how, str(self.how.value))
        if self.bound_to is not None:
            how = f"{how} ({self.bound_to})"
        if self.how is states.Event.BIND_TIMEOUT:
            how = f"{how} {self.timeout or 0:g}s of its admission"
        text = f"{how}"
        if self.causes:
            text += f" ({'; '.join(self.causes)})"
        if self.said:
            text += f"; it said: {self.said}"
        return text

    def reason(self, *, message: str) -> reasons.Reason:
        """An ``AdmissionRejected`` reason saying ``message``, the refusal in its details."""
        details: dict[str, reasons.Detail] = {"node": self.node, "rejection": self.how.value}
        if self.claims:
            details["resourceClaims"] = ",".join(self.claims)
        if self.taints:
            details["taints"] = ",".join(f"{t.key}={t.value}:{t.effect}" for t in self.taints)
        if self.cordoned:
            details["unschedulable"] = True
        return reasons.Reason(
            code=reasons.ReasonCode.ADMISSION_REJECTED,
            message=message,
            details=types.MappingProxyType(details),
        )


def refusal(
    snapshot: snapshots.Snapshot | None,
    pod: pods.PodInfo | None,
    *,
    node: str,
    how: states.Event,
    said: str | None = None,
    bound_to: str | None = None,
    timeout: float | None = None,
) -> Refusal:
    """The refusal of ``pod`` on ``node``, what Berth sees of it read from ``snapshot`` (the
    last one taken; None: nothing known but kube-scheduler's words)."""
    key = pod.key if pod is not None else ""
    if snapshot is None or pod is None:
        return Refusal(key, node, how, said=said, bound_to=bound_to, timeout=timeout)
    node_mark = mark(snapshot, node)
    info = snapshot.node_infos.get(node)
    untolerated = tuple(
        t
        for t in (info.taints if info is not None else ())
        if t.effect in _REPELLING
        and not any(taints_.tolerates(o, taint=t) for o in pod.tolerations)
    )
    reached = {device_id for device_id, _ in node_mark.devices} if node_mark is not None else set()
    claims: list[str] = []
    for claim_key in pod.resource_claim_keys:
        claim = snapshot.devices.claims.get(claim_key)
        allocation = claim.allocation if claim is not None else None
        if allocation is None or not all(d.id in reached for d in allocation.devices):
            claims.append(claim_key)
    return Refusal(
        pod=key,
        node=node,
        how=how,
        said=said,
        bound_to=bound_to,
        timeout=timeout,
        taints=untolerated,
        cordoned=info.unschedulable if info is not None else False,
        claims=tuple(claims),
        mark=node_mark,
    )
