"""Equivalence classes of jobs: pending work of the same shape, tried once per cycle.

Two jobs are equivalent when every plugin must judge them alike: the same queue, namespace,
priority, quorum (``minMember`` and the members already holding a node) and the same pending
pods — each pod's filter signature (node selector, node affinity, tolerations) and requests.
Allocate tries the first job of a class; when it does not fit, the rest of the class stays
pending this cycle with the same reason instead of paying one more attempt each, and the
parking lot (:mod:`.parking`) keeps a class's members parked together.

A class key is what kube-scheduler's opportunistic batching (KEP-5598) calls the pods'
*signature*. Some work cannot be signed and is never classed (:func:`class_of` returns
``None``; each pod is scheduled on its own), because more than its shape decides where it may
go: pods with pod (anti-)affinity, spread constraints or host ports (they depend on where
other pods are), pods with PersistentVolumeClaims (each claim's volume decides where its pod
may go), pods a session plugin refuses to sign (``SessionHooks.unsignable``: a pod naming an
object, a reserve pod, a pod with ResourceClaims), and invalid groups. When other pods'
constraints could match a pod by its labels, or a plugin reads them
(``SessionHooks.labels_in_signature``), the labels join the key.
"""

from __future__ import annotations

import collections
import collections.abc
import typing

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import jobs, sessions
    from berth.scheduler.snapshot import pods

__all__ = ["ClassKey", "class_of", "shape_of", "signable"]

ClassKey = collections.abc.Hashable


def signable(pod: pods.PodInfo, *, hooks: sessions.SessionHooks) -> bool:
    """Whether ``pod`` may share a class: its shape alone decides where it may go."""
    return (
        pod.pod_affinity is None
        and not pod.spread
        and not pod.host_ports
        and not pod.claims  # its own claims decide where it may go
        and pod.invalid is None
        and not hooks.unsignable(pod)
    )


def _pod_shape(pod: pods.PodInfo, *, labels: bool) -> collections.abc.Hashable:
    return (
        pod.signature,
        pod.requests,  # hashed once (ResourceList), equal by content
        pod.priority,
        pod.preemption_policy,
        tuple(sorted(pod.labels.items())) if labels else None,
    )


def _labels_count(session: sessions.Session) -> bool:
    """Whether pods' labels join their shape: other pods' constraints or a plugin read them."""
    return bool(session.snapshot.constraining) or session.hooks.labels_in_signature()


def shape_of(pod: pods.PodInfo, *, session: sessions.Session) -> collections.abc.Hashable | None:
    """``pod``'s shape in ``session`` — pods of one shape are judged alike on the same nodes —
    or ``None`` when it cannot be signed (:func:`signable`)."""
    if not signable(pod, hooks=session.hooks):
        return None
    return _pod_shape(pod, labels=_labels_count(session))


def class_of(job: jobs.Job, *, session: sessions.Session) -> ClassKey | None:
    """``job``'s class in ``session``, or ``None`` when a pod of it cannot be signed."""
    group = job.group
    if group.invalid is not None or not job.pending:
        return None
    hooks = session.hooks
    if not all(signable(pod, hooks=hooks) for pod in job.pending):
        return None
    labels = _labels_count(session)
    each = [_pod_shape(p, labels=labels) for p in job.pending]
    first = each[0]
    shapes: collections.abc.Hashable
    if len(each) == 1:
        shapes = first
    elif all(shape == first for shape in each):  # replicas of one template, the usual case
        shapes = frozenset({(first, len(each))})
    else:
        shapes = frozenset(collections.Counter(each).items())
    return (
        group.queue,
        group.namespace,
        group.priority,
        group.min_member,
        group.placed + group.succeeded,
        group.schedule_timeout_seconds,
        shapes,
    )
