"""Reservations and a small world to schedule them in: builders and a multi-cycle harness.

``reservation(...)`` builds a Reservation (wire form) with every field the tests vary;
``owner_*`` build owner entries. :class:`World` is the simulator's in-memory cluster, the
default profile (``allocate`` only, as the scenario tables elsewhere) and a virtual clock, with
helpers that read back what the cycles did: where a pod runs, a reservation's status and
conditions, the reasons of the last cycle.
"""

from __future__ import annotations

import collections.abc
import typing

from berth.scheduler import loop
from berth.scheduler.framework import decisions, profiles
from berth.sim import cluster
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


def owner_object(name: str) -> Obj:
    """An owner entry matching the pod named ``name``."""
    return {"object": {"name": name}}


def owner_controller(kind: str, name: str) -> Obj:
    """An owner entry matching the pods controlled by ``kind``/``name``."""
    return {"controller": {"kind": kind, "name": name}}


def owner_labels(
    labels: collections.abc.Mapping[str, str] | None = None,
    *,
    expressions: collections.abc.Iterable[Obj] = (),
) -> Obj:
    """An owner entry matching pods by ``labels`` (and ``expressions``)."""
    selector: Obj = {}
    if labels:
        selector["matchLabels"] = dict(labels)
    exprs = list(expressions)
    if exprs:
        selector["matchExpressions"] = exprs
    return {"labelSelector": selector}


def template(
    *,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpu: int | None = None,
    node_selector: collections.abc.Mapping[str, str] | None = None,
    tolerations: collections.abc.Iterable[Obj] = (),
    affinity: Obj | None = None,
    node_name: str | None = None,
    labels: collections.abc.Mapping[str, str] | None = None,
    priority: int | None = None,
) -> Obj:
    """A pod template (``spec.template``) of one container requesting ``cpu``/``memory``."""
    requests: Obj = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    if gpu is not None:
        requests[b.GPU] = str(gpu)
    spec: Obj = {"containers": [b.container(requests=requests)]}
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    toleration_list = list(tolerations)
    if toleration_list:
        spec["tolerations"] = toleration_list
    if affinity is not None:
        spec["affinity"] = affinity
    if node_name is not None:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    out: Obj = {"spec": spec}
    if labels:
        out["metadata"] = {"labels": dict(labels)}
    return out


def reservation(
    name: str,
    *,
    namespace: str = "default",
    owners: collections.abc.Iterable[Obj] | None = None,
    ttl: str | None = None,
    expires: float | None = None,
    allocate_once: bool | None = None,
    queue: str | None = None,
    unschedulable: bool | None = None,
    created: float | None = None,
    **template_fields: typing.Any,
) -> Obj:
    """A Reservation (wire form); ``template_fields`` go to :func:`template`. Owners default to
    pods labelled ``app: <name>``."""
    spec: Obj = {
        "template": template(**template_fields),
        "owners": list(owners if owners is not None else [owner_labels({"app": name})]),
    }
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = b.timestamp(expires)
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    if queue is not None:
        spec["queue"] = queue
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-resv-{namespace}-{name}",
        "creationTimestamp": b.timestamp(b.EPOCH if created is None else created),
    }
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Reservation",
        "metadata": meta,
        "spec": spec,
    }


def pod_from(name: str, tmpl: Obj, *, queue: str | None = None) -> Obj:
    """A pending pod built from a reservation template (for "lands where the pod would")."""
    labels = dict((tmpl.get("metadata") or {}).get("labels") or {})
    if queue is not None:
        labels["scheduling.berth.io/queue"] = queue
    metadata: Obj = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-pod-{name}",
        "creationTimestamp": b.timestamp(b.EPOCH),
        "labels": labels,
    }
    spec = {**tmpl["spec"], "schedulerName": b.SCHEDULER}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


class World:
    """An in-memory cluster, a scheduler and a virtual clock; see the module docstring."""

    def __init__(self, *objects: Obj, profile: profiles.Profile | None = None) -> None:
        self.clock = clocks.VirtualClock(b.EPOCH)
        self.sim: cluster.InMemoryCluster = harness.in_memory(*objects, clock=self.clock)
        self.scheduler: loop.Scheduler = harness.scheduler(
            profile or harness.profile_with(), clock=self.clock
        )
        self.last: decisions.CycleResult | None = None

    # Changing the world ---------------------------------------------------------------------
    def put(self, *objects: Obj) -> None:
        for obj in objects:
            self.sim.put(obj)

    def delete(self, kind: str, name: str, *, namespace: str = "default") -> None:
        assert self.sim.delete(kind, namespace=namespace, name=name) is not None

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def finish(self, pod: str, *, namespace: str = "default") -> None:
        """The pod's run ends (it succeeds and, being a plain pod, is deleted)."""
        obj = self.sim.get("Pod", namespace=namespace, name=pod)
        assert obj is not None
        assert self.sim.succeed_pod(f"{namespace}/{pod}", uid=obj["metadata"]["uid"])

    def cycle(self) -> decisions.CycleResult:
        """One scheduling cycle, applied to the cluster."""
        self.last = self.scheduler.run_once(self.sim, self.sim)
        assert not self.last.errors, self.last.errors
        return self.last

    # Reading it back ----------------------------------------------------------------------
    def node_of(self, pod: str, *, namespace: str = "default") -> str | None:
        obj = self.sim.get("Pod", namespace=namespace, name=pod)
        assert obj is not None, f"no pod {namespace}/{pod}"
        node = obj["spec"].get("nodeName")
        return str(node) if node else None

    def annotations(self, pod: str, *, namespace: str = "default") -> dict[str, str]:
        obj = self.sim.get("Pod", namespace=namespace, name=pod)
        assert obj is not None
        return dict(obj["metadata"].get("annotations") or {})

    def status(self, name: str, *, namespace: str = "default") -> Obj:
        obj = self.sim.get("Reservation", namespace=namespace, name=name)
        assert obj is not None, f"no reservation {namespace}/{name}"
        return dict(obj.get("status") or {})

    def phase(self, name: str, *, namespace: str = "default") -> str:
        return str(self.status(name, namespace=namespace).get("phase") or "Pending")

    def condition(self, name: str, kind: str, *, namespace: str = "default") -> Obj:
        conditions = self.status(name, namespace=namespace).get("conditions") or []
        found = [c for c in conditions if c["type"] == kind]
        assert found, f"reservation {name} has no {kind} condition: {conditions}"
        return dict(found[0])

    def reason(self, pod: str, *, namespace: str = "default") -> str | None:
        assert self.last is not None
        return self.last.pod_reasons.get(f"{namespace}/{pod}")
