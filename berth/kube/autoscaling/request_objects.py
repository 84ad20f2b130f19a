"""The API objects of a capacity request: PodTemplates, ProvisioningRequests, CapacityBuffers.

:class:`RequestObjects` makes, changes, lists and deletes them for
:class:`~berth.kube.autoscaling.capacity_requests.CapacityRequests` (docs/autoscaling.md, "What
is made"):

- **Shapes** (:meth:`RequestObjects.shapes`). A gang's waiting pods are grouped by shape
  (requests, node selector and affinity, tolerations, spread, pod affinity); one member of
  each shape is read, and :func:`pod_template` makes a PodTemplate's ``template`` of it. A
  Reservation's shape is its template.
- **Making** (:meth:`RequestObjects.make`). The PodTemplates, then one ProvisioningRequest (a
  podSet per shape, with the class and parameters) or one CapacityBuffer per shape
  (``replicas``: the members of that shape). Every object is labelled as Berth's
  (:data:`MANAGED_LABEL`: the attempt; :data:`OWNER_LABEL`: the owner's uid), named after its
  owner and attempt (``berth-pg-train-1``), and owned by the PodGroup, pod or Reservation it is
  for, so the garbage collector removes what Berth does not. :meth:`RequestObjects.consume`
  annotates a gang's pods to consume its ProvisioningRequest
  (``autoscaling.x-k8s.io/consume-provisioning-request`` and its class): Cluster Autoscaler
  then scales up for them only through the request, never pod by pod.
- **Scaling** a Reservation's buffer (:meth:`RequestObjects.scale`: ``replicas: 0`` once it
  holds its node).
- **Removing** (:meth:`RequestObjects.remove`, :meth:`RequestObjects.delete_object`): with uid
  preconditions, an object whose uid is not known read first, and never one without Berth's
  label.
- **Listing** Berth's objects of the served kinds by label (:meth:`RequestObjects.list_all`: a
  new leader's leftovers, and every pass's reading back).

Every write goes through the write primitive (:class:`~berth.kube.transport.writes.Writer`), fenced.
"""

from __future__ import annotations

import asyncio
import collections.abc
import copy
import dataclasses
import logging
import typing

import kubernetes_asyncio.client

from berth.api import autoscaler_objects, autoscaling, core, keys, objects
from berth.kube.transport import errors, pod_edits, rest, watching, writes
from berth.scheduler.snapshot import snapshots, wire
from berth.status import capacity_requests as plans

__all__ = [
    "MANAGED_LABEL",
    "OWNER_LABEL",
    "PATHS",
    "KindGone",
    "Made",
    "RequestObjects",
    "counts",
    "pod_template",
    "template_names",
]

logger = logging.getLogger(__name__)

Kind = plans.Kind
CapacityRequest = autoscaler_objects.CapacityRequest

MANAGED_LABEL = f"{keys.GROUP}/capacity-request"
"""On every object of a request: the attempt (``"1"``, ``"2"``, ...)."""
OWNER_LABEL = f"{keys.GROUP}/capacity-owner"
"""On every object of a request: the owner's uid (a new leader matches objects by it)."""
_OWNER_ANNOTATION = f"{keys.GROUP}/capacity-owner"  # "<Kind> ns/name", for people
_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # a template's container without an image
_GROUP_PATH = f"/apis/{autoscaling.GROUP}"
PATHS = {
    Kind.PROVISIONING_REQUEST: (f"{_GROUP_PATH}/v1", "provisioningrequests"),
    Kind.CAPACITY_BUFFER: (f"{_GROUP_PATH}/v1beta1", "capacitybuffers"),
}
"""Each kind's group version path and plural."""
_API_VERSION = {
    Kind.PROVISIONING_REQUEST: autoscaling.PROVISIONING_REQUEST_API_VERSION,
    Kind.CAPACITY_BUFFER: autoscaling.CAPACITY_BUFFER_API_VERSION,
}


class KindGone(Exception):
    """The API server no longer serves the kind a request was being made with."""

    def __init__(self, kind: Kind) -> None:
        super().__init__(f"{kind.value} is not served")
        self.kind = kind


@dataclasses.dataclass(frozen=True)
class Made:
    """The objects of a request just made."""

    requests: tuple[str, ...]  # the request objects' names (one PR, or a buffer per shape)
    templates: tuple[str, ...]  # its PodTemplates' names
    counts: tuple[int, ...]  # pods per shape
    uids: dict[str, str]  # request object name -> uid


def pod_template(pod: core.Pod | core.PodTemplateSpec) -> core.PodTemplateSpec:
    """A PodTemplate's ``template`` of ``pod``'s shape: its labels and spec, without what
    ties it to one pod (node, gates, ephemeral containers, Berth's pin); a container without
    an image gets a pause image (the autoscaler's virtual pods never run)."""
    metadata = wire.part(pod.get("metadata"))
    spec = copy.deepcopy(wire.part(pod.get("spec")))  # a private copy: containers are defaulted
    spec.pop("nodeName", None)
    spec.pop("schedulingGates", None)
    spec.pop("ephemeralContainers", None)
    admitted = wire.part(metadata.get("annotations")).get(keys.ADMITTED_NODE_ANNOTATION)
    affinity = spec.get("affinity")
    if admitted and affinity:
        unpinned = pod_edits.unpin_affinity(affinity, node=str(admitted))
        if unpinned:
            spec["affinity"] = unpinned
        else:
            spec.pop("affinity")
    for listed in (spec.get("containers"), spec.get("initContainers")):
        for i, container in enumerate(listed or []):
            container.setdefault("name", f"c{i}")
            container.setdefault("image", _PAUSE_IMAGE)
    out: core.PodTemplateSpec = {"spec": spec}
    labels = metadata.get("labels")
    if labels:
        out["metadata"] = {"labels": dict(labels)}
    return out


def template_names(kind: Kind, found: collections.abc.Iterable[CapacityRequest]) -> list[str]:
    names: list[str] = []
    for obj in found:
        # The kind travels beside the object: its spec is that kind's.
        if kind is Kind.PROVISIONING_REQUEST:
            spec = wire.part(typing.cast(autoscaler_objects.ProvisioningRequest, obj).get("spec"))
            names.extend(
                str(wire.part(p.get("podTemplateRef")).get("name"))
                for p in spec.get("podSets") or []
                if isinstance(p, dict)
            )
        else:
            buffer = wire.part(typing.cast(autoscaler_objects.CapacityBuffer, obj).get("spec"))
            ref = wire.part(buffer.get("podTemplateRef")).get("name")
            if ref:
                names.append(str(ref))
    return names


def counts(kind: Kind, found: collections.abc.Iterable[CapacityRequest]) -> list[int]:
    counts: list[int] = []
    for obj in found:
        if kind is Kind.PROVISIONING_REQUEST:
            spec = wire.part(typing.cast(autoscaler_objects.ProvisioningRequest, obj).get("spec"))
            counts.extend(int(p.get("count") or 0) for p in spec.get("podSets") or [])
        else:
            buffer = wire.part(typing.cast(autoscaler_objects.CapacityBuffer, obj).get("spec"))
            counts.append(int(buffer.get("replicas") or 0))
    return counts


class RequestObjects:
    """Makes and removes the objects of Berth's capacity requests (module docstring)."""

    def __init__(self, api: kubernetes_asyncio.client.ApiClient, *, writer: writes.Writer) -> None:
        self._api = api
        self._writer = writer

    async def list_all(
        self, served: collections.abc.Iterable[Kind]
    ) -> list[tuple[Kind, CapacityRequest]]:
        """Berth's request objects as they are now (by label), of every served kind."""
        found: list[tuple[Kind, CapacityRequest]] = []
        for kind in sorted(served, key=lambda k: k.value):
            version, plural = PATHS[kind]
            try:
                listing = await watching.list_pages(
                    self._api, path=f"{version}/{plural}", query={"labelSelector": MANAGED_LABEL}
                )
            except errors.KubeError as exc:
                logger.warning("capacity requests: listing %s failed: %s", plural, exc)
                continue
            found.extend((kind, typing.cast(CapacityRequest, item)) for item in listing.items)
        return found

    async def shapes(
        self, want: plans.Want, snapshot: snapshots.Snapshot | None
    ) -> list[tuple[core.PodTemplateSpec, int]]:
        """The PodTemplates' ``template``\\ s of ``want`` with how many pods each stands for."""
        if want.purpose is plans.Purpose.RESERVATION:
            info = snapshot.reservations.get(want.group) if snapshot is not None else None
            if info is None:
                return []
            return [(pod_template(info.template), 1)]
        groups: dict[str, list[str]] = {}
        for key in want.members:
            pod = snapshot.pods.get(key) if snapshot is not None else None
            if pod is None:
                continue
            shape = repr(
                (
                    sorted(pod.requests.items()),
                    pod.node_selector,
                    pod.required_affinity,
                    pod.tolerations,
                    pod.spread,
                    pod.pod_affinity,
                )
            )
            groups.setdefault(shape, []).append(key)
        out: list[tuple[core.PodTemplateSpec, int]] = []
        for members in groups.values():
            try:
                obj = await rest.request(
                    self._api, method="GET", path=pod_edits.path(members[0]), timeout=10.0
                )
            except errors.KubeError as exc:
                logger.info("capacity requests: cannot read pod %s: %s", members[0], exc)
                continue
            out.append((pod_template(typing.cast(core.Pod, obj)), len(members)))
        return out

    async def make(
        self,
        want: plans.Want,
        *,
        kind: Kind,
        attempt: int,
        shapes: collections.abc.Sequence[tuple[core.PodTemplateSpec, int]],
    ) -> Made | None:
        """Make the objects of ``want``'s request of ``kind``, as ``attempt``, for ``shapes``
        (templates with their pod counts); None when a write was fenced or refused (the next
        pass tries again). Raises :class:`KindGone` when ``kind`` is no longer served."""
        owner = want.owner
        namespace = owner.namespace
        labels = {MANAGED_LABEL: str(attempt), OWNER_LABEL: owner.uid}
        meta: objects.ObjectMeta = {
            "namespace": namespace,
            "labels": labels,
            "annotations": {_OWNER_ANNOTATION: str(owner)},
            "ownerReferences": [
                {
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                }
            ],
        }
        templates: list[str] = []
        for i, (template, _) in enumerate(shapes):
            name = plans.object_name(owner, attempt=attempt, part=str(i))
            written = await self._writer.create(
                f"/api/v1/namespaces/{namespace}/podtemplates",
                {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {**meta, "name": name},
                    "template": template,
                },
                what=f"PodTemplate {namespace}/{name} for {owner}",
            )
            if not written.ok:
                if written.outcome is writes.Outcome.GONE:
                    logger.warning("capacity requests: namespace %s is gone", namespace)
                return None  # fenced, or refused (logged): the next pass tries again
            templates.append(name)
        sizes = tuple(count for _, count in shapes)
        version, plural = PATHS[kind]
        bodies: list[CapacityRequest] = []
        if kind is Kind.PROVISIONING_REQUEST:
            spec: autoscaler_objects.ProvisioningRequestSpec = {
                "provisioningClassName": want.class_name,
                "podSets": [
                    {"podTemplateRef": {"name": t}, "count": c}
                    for t, c in zip(templates, sizes, strict=True)
                ],
            }
            if want.policy is not None and want.policy.parameters:
                spec["parameters"] = dict(want.policy.parameters)
            bodies.append(
                {
                    "metadata": {**meta, "name": plans.object_name(owner, attempt=attempt)},
                    "spec": spec,
                }
            )
        else:
            for i, (t, c) in enumerate(zip(templates, sizes, strict=True)):
                suffix = str(i) if len(templates) > 1 else ""
                bodies.append(
                    {
                        "metadata": {
                            **meta,
                            "name": plans.object_name(owner, attempt=attempt, part=suffix),
                        },
                        "spec": {
                            "provisioningStrategy": autoscaling.BUFFER_ACTIVE_CAPACITY,
                            "podTemplateRef": {"name": t},
                            "replicas": c if want.active else 0,
                        },
                    }
                )
        names: list[str] = []
        uids: dict[str, str] = {}
        for body in bodies:
            name = body["metadata"]["name"]
            written = await self._writer.create(
                f"{version}/namespaces/{namespace}/{plural}",
                {"apiVersion": _API_VERSION[kind], "kind": kind.value, **body},
                what=f"{kind.value} {namespace}/{name} for {owner}",
            )
            if written.outcome is writes.Outcome.GONE:
                raise KindGone(kind)
            if not written.ok:
                return None
            names.append(name)
            if written.object is not None:
                uids[name] = str(wire.part(written.object.get("metadata")).get("uid") or "")
        return Made(tuple(names), tuple(templates), sizes, uids)

    async def consume(self, want: plans.Want, *, request: str) -> None:
        """Annotate the gang's pods to consume ``request``: Cluster Autoscaler then scales up
        for them only through it."""
        annotations = {
            autoscaling.CONSUME_ANNOTATION: request,
            autoscaling.CLASS_ANNOTATION: want.class_name,
        }
        await asyncio.gather(
            *(
                self._writer.patch(
                    pod_edits.path(key),
                    {"metadata": {"annotations": annotations}},
                    what=f"pod {key} consumes ProvisioningRequest {request}",
                )
                for key in want.members
            )
        )

    async def scale(
        self,
        namespace: str,
        buffers: collections.abc.Sequence[str],
        counts: collections.abc.Sequence[int],
        *,
        active: bool,
    ) -> bool:
        """Set the ``replicas`` of ``buffers`` to their ``counts`` (``active``) or 0; whether
        every write went through."""
        version, plural = PATHS[Kind.CAPACITY_BUFFER]
        for name, count in zip(buffers, counts, strict=False):
            written = await self._writer.patch(
                f"{version}/namespaces/{namespace}/{plural}/{name}",
                {"spec": {"replicas": count if active else 0}},
                what=f"CapacityBuffer {namespace}/{name} replicas",
            )
            if not written.ok:
                return False
        return True

    async def remove(
        self,
        kind: Kind,
        owner: plans.Owner,
        *,
        requests: collections.abc.Sequence[str],
        uids: collections.abc.Mapping[str, str],
        templates: collections.abc.Sequence[str],
    ) -> None:
        """Delete a request's objects: ``requests`` of ``kind`` (their ``uids`` where known)
        and its PodTemplates."""
        namespace = owner.namespace
        version, plural = PATHS[kind]
        for name in requests:
            uid = uids.get(name)
            path = f"{version}/namespaces/{namespace}/{plural}/{name}"
            what = f"{kind.value} {namespace}/{name}"
            if uid:
                await self._writer.delete(path, uid=uid, what=what)
            else:
                await self._delete_path(path, what=what)
        for name in templates:
            await self._delete_path(
                f"/api/v1/namespaces/{namespace}/podtemplates/{name}",
                what=f"PodTemplate {namespace}/{name}",
            )
        logger.info("capacity requests: removed %s for %s", ", ".join(requests), owner)

    async def delete_object(self, kind: Kind, obj: CapacityRequest) -> None:
        metadata = wire.part(obj.get("metadata"))
        namespace, name = metadata.get("namespace"), metadata.get("name")
        version, plural = PATHS[kind]
        await self._writer.delete(
            f"{version}/namespaces/{namespace}/{plural}/{name}",
            uid=str(metadata.get("uid") or ""),
            what=f"{kind.value} {namespace}/{name} (no longer wanted)",
        )
        for name in template_names(kind, [obj]):
            await self._delete_path(
                f"/api/v1/namespaces/{namespace}/podtemplates/{name}",
                what=f"PodTemplate {namespace}/{name}",
            )

    async def _delete_path(self, path: str, *, what: str) -> None:
        """Delete Berth's object at ``path`` (read first for its uid: never another's)."""
        try:
            obj = await rest.request(self._api, method="GET", path=path, timeout=10.0)
        except errors.KubeError:
            return  # gone (or unreadable: the owner's garbage collection takes it)
        metadata = obj.get("metadata") or {}
        if MANAGED_LABEL not in (metadata.get("labels") or {}):
            return
        await self._writer.delete(path, uid=str(metadata.get("uid") or ""), what=what)
