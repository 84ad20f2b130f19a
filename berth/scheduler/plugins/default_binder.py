"""DefaultBinder: bind a placed pod by recording ``decisions.BindPod`` (the sink POSTs it,
once the pod's PersistentVolumeClaims, which the decision lists, are bound).

Kubernetes' ``DefaultBinder``, without the I/O: the sink applies the decision. Reserve pods
(the in-memory pods standing for Reservations) are not pods in the API; their binder is the
Reservation plugin, so this one answers ``SKIP`` for them. Must come last among binders.
"""

from __future__ import annotations

from berth.scheduler.framework import (
    cyclestate,
    decisions,
    handles,
    interfaces,
    registries,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import pods

__all__ = ["NAME", "DefaultBinder", "new"]

NAME = names.DEFAULT_BINDER


class DefaultBinder(interfaces.BindPlugin):
    """Bind."""

    name = NAME

    def bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        if pod.reserve:
            return statuses.SKIP
        recorder.record(
            decisions.BindPod(
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                node=node,
                claims=pod.claim_keys if pod.claims else (),
                resource_claims=pod.resource_claim_keys if pod.resource_claims else (),
            )
        )
        return statuses.SUCCESS


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> DefaultBinder:
    """Build the plugin (it takes no arguments)."""
    return DefaultBinder()
