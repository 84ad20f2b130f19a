"""``PodInfo``: one pod as the scheduler sees it, built once per change from the API's dict.

Owns the Kubernetes sizing of a pod (containers summed, the maximum with each init container,
restartable "sidecar" init containers running alongside, pod-level ``spec.resources`` in place
of that for cpu and memory, plus ``overhead``; ``pods`` counts 1),
the pod's Berth keys (group, queue, reservation), its static scheduling constraints, and the
``signature`` that lets identical pod shapes share cached filter masks. A malformed or negative
quantity does not raise: the info carries ``invalid`` and the pod is reported unschedulable
with that text. Built by :class:`berth.scheduler.snapshot.cache.ClusterCache`; read by every
plugin. A later version of a pod whose scheduling inputs did not change (a status update, its
binding) reuses what its parse derived (:class:`Parsed`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import hashlib
import marshal
import typing

from berth.api import core, errors, keys, objects, quantities, resources, workload_refs
from berth.scheduler.snapshot import (
    gpushare,
    ids,
    nodes,
    podclaims,
    podconstraints,
    selectors,
    taints,
    wire,
)

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_PREEMPTION_POLICY",
    "GROUP_ANNOTATION_INTEROP",
    "GROUP_LABEL",
    "GROUP_LABEL_INTEROP",
    "QUEUE_LABEL",
    "RESERVATION_LABEL",
    "RESERVE_POD_ANNOTATION",
    "OwnerReference",
    "Parsed",
    "PodInfo",
    "Signature",
    "awaits_owner_group",
    "implicit_group_key",
    "nonzero_requests",
    "pod_info",
    "pod_requests",
    "replace",
    "resolve",
]

GROUP_LABEL = keys.POD_GROUP_LABEL
GROUP_LABEL_INTEROP = keys.INTEROP_POD_GROUP_LABEL  # scheduler-plugins coscheduling
GROUP_ANNOTATION_INTEROP = keys.INTEROP_POD_GROUP_ANNOTATION  # Volcano / kube-batch
QUEUE_LABEL = keys.QUEUE_LABEL
RESERVATION_LABEL = keys.RESERVATION_LABEL
RESERVE_POD_ANNOTATION = f"{keys.GROUP}/reserve-pod"
"""Annotation (``"true"``) marking the in-memory pod that stands for a Reservation."""
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_ONE_POD = resources.ResourceList({resources.PODS: 1000})
_POD_LEVEL_RESOURCES = frozenset({resources.CPU, resources.MEMORY})


@dataclasses.dataclass(frozen=True)
class OwnerReference:
    """One ``metadata.ownerReferences[]`` entry."""

    kind: str
    name: str
    uid: str = ""
    controller: bool = False
    api_version: str = ""


Signature = tuple[typing.Hashable, ...]
"""Everything static filters and static scores look at; equal signatures share cached masks."""


@dataclasses.dataclass(frozen=True)
class PodInfo:
    """A pod, parsed once. Mappings are never mutated after construction."""

    uid: str
    namespace: str
    name: str
    key: ids.PodKey
    labels: collections.abc.Mapping[str, str] = dataclasses.field(hash=False, repr=False)
    annotations: collections.abc.Mapping[str, str] = dataclasses.field(hash=False, repr=False)
    scheduler_name: str
    node_name: ids.NodeName | None  # None: not placed (bound, or assumed by the cache)
    phase: str
    deleting: bool  # metadata.deletionTimestamp is set
    priority: int  # resolved: spec.priority, else its PriorityClass, else the global default
    spec_priority: int | None
    priority_class_name: str
    preemption_policy: str
    creation_timestamp: float
    requests: resources.ResourceList  # milli-units, ``pods`` included (1000)
    node_selector: tuple[selectors.Requirement, ...]
    required_affinity: tuple[selectors.SelectorTerm, ...] | None  # None: no requirement
    preferred_affinity: tuple[selectors.PreferredTerm, ...]
    tolerations: tuple[taints.Toleration, ...]
    owner_references: tuple[OwnerReference, ...]
    pod_group: ids.PodGroupKey | None  # explicit group, or the implicit group of one
    queue: ids.QueueName | None  # resolved: the pod's label, else its group's queue
    reservation: ids.ReservationKey | None  # a reservation the pod asks for by name
    scheduling_gates: tuple[str, ...]
    invalid: str | None = None  # why the pod can never be scheduled as written
    # What scoring counts for the pod: ``requests`` with kube-scheduler's non-zero defaults
    # (cpu 100m, memory 200Mi for each app container that requests none); None: ``requests``.
    nonzero_requests: resources.ResourceList | None = None
    # Constraints on other pods and on node ports (podconstraints), and every constraint field
    # the pod uses (so that one no enabled plugin implements is refused, never ignored).
    pod_affinity: podconstraints.PodAffinity | None = None
    spread: tuple[podconstraints.SpreadConstraint, ...] = ()
    host_ports: tuple[podconstraints.HostPort, ...] = ()
    claims: tuple[podconstraints.PodClaim, ...] = ()  # PersistentVolumeClaims, in its namespace
    # ResourceClaims (spec.resourceClaims, devices), resolved through resourceClaimStatuses.
    resource_claims: tuple[podclaims.PodResourceClaim, ...] = ()
    uses: frozenset[podconstraints.Field] = frozenset()
    images: tuple[str, ...] = ()  # container and init container images, normalised
    reserve: bool = False
    """An in-memory reserve pod standing for a Reservation (never bound as a pod). Set only
    where Berth builds one (:mod:`berth.scheduler.snapshot.reservations`), never read from the
    pod: the ``reserve-pod`` annotation is a label for people, and users can write it."""
    # The version parsed (Events name it); not part of what scheduling compares.
    resource_version: str = dataclasses.field(default="", compare=False, hash=False, repr=False)
    start_time: float | None = None  # status.startTime: when the kubelet started it
    # When its last container terminated (a finished pod's containerStatuses): learned run
    # times count from start_time to it (berth.scheduler.snapshot.runstats).
    finish_time: float | None = None
    # Grouping by owner is on, the pod has owners and no group yet: it waits for Berth to derive
    # its group from them (berth.kube.grouping.owner_groups). ``group_error`` says why that failed.
    awaiting_group: bool = False
    group_error: str | None = None
    # Kubernetes 1.35's spec.workloadRef: the interop mirrors make a replica's PodGroup from it.
    workload_ref: workload_refs.WorkloadRef | None = None
    # A share of GPUs asked with KAI-Scheduler's annotations (gpushare), its charge already in
    # ``requests``; and, once placed, the devices recorded on it (None: not recorded).
    gpu_share: gpushare.ShareRequest | None = None
    gpu_devices: tuple[int, ...] | None = None
    # What its parse derived from the pod's scheduling inputs, kept so that the next version of
    # the pod reuses it when they did not change (None: built by hand, nothing to reuse).
    parsed: Parsed | None = dataclasses.field(default=None, compare=False, hash=False, repr=False)
    signature: Signature = dataclasses.field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        signature = (
            self.node_name,
            self.node_selector,
            self.required_affinity,
            self.preferred_affinity,
            self.tolerations,
            self.gpu_share,
        )
        object.__setattr__(self, "signature", signature)

    @property
    def score_requests(self) -> resources.ResourceList:
        """What the allocation scores count for this pod (see ``nonzero_requests``)."""
        return self.requests if self.nonzero_requests is None else self.nonzero_requests

    @property
    def constrains_others(self) -> bool:
        """Its pod (anti-)affinity, host ports or claims (ReadWriteOncePod, attach limits)
        constrain where other pods may go."""
        return self.pod_affinity is not None or bool(self.host_ports) or bool(self.claims)

    @property
    def claim_keys(self) -> tuple[str, ...]:
        """The ``namespace/name`` keys of the claims its volumes use."""
        return tuple(ids.key_of(self.namespace, name=c.name) for c in self.claims)

    @property
    def resource_claim_keys(self) -> tuple[str, ...]:
        """The ``namespace/name`` keys of the ResourceClaims made for or named by the pod (each
        once, in the order the pod names them)."""
        return tuple(
            dict.fromkeys(
                key for c in self.resource_claims if (key := c.key(self.namespace)) is not None
            )
        )

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: it holds no resources and will not be scheduled."""
        return self.phase in _TERMINAL_PHASES

    @property
    def plain(self) -> bool:
        """Neither a group nor a queue: default placement, no batch logic."""
        return self.pod_group is None and self.queue is None and not self.awaiting_group

    @property
    def gated(self) -> bool:
        """Held by ``spec.schedulingGates``: not considered until every gate is removed."""
        return bool(self.scheduling_gates)


_FIELDS = frozenset(f.name for f in dataclasses.fields(PodInfo) if f.init)


def _made(fields: dict[str, typing.Any], /) -> PodInfo:  # Untyped: PodInfo's fields by name
    """``PodInfo(**fields)`` (``fields``: every init field), made without the frozen
    dataclass's ``__init__``, which sets each of the 40-odd fields through
    ``object.__setattr__``: half the cost of a pod's watch event once its parse is reused.
    Equal to what ``__init__`` makes, ``__post_init__`` included (tested)."""
    info = object.__new__(PodInfo)
    info.__dict__.update(fields)
    info.__post_init__()
    return info


def replace(info: PodInfo, /, **changes: typing.Any) -> PodInfo:
    """``dataclasses.replace(info, **changes)``, at a fraction of its cost (see :func:`_made`):
    the cache replaces a field or two of a pod on most of its events."""
    unknown = changes.keys() - _FIELDS
    if unknown:
        raise TypeError(f"PodInfo has no field {sorted(unknown)[0]!r} to replace")
    fields = dict(info.__dict__)
    fields.update(changes)
    return _made(fields)


# Sizing -----------------------------------------------------------------------------------


def _container_requests(container: core.Container, /, *, where: str) -> dict[str, int]:
    """A container's requests; a resource with a limit but no request requests its limit
    (the API server's defaulting, repeated so that hand-written dicts size the same)."""
    spec = wire.part(container.get("resources"))
    merged = dict(wire.part(spec.get("limits")))
    merged.update(wire.part(spec.get("requests")))
    out: dict[str, int] = {}
    for name, text in merged.items():
        try:
            value = wire.milli(text)
        except errors.QuantityError as exc:
            raise errors.QuantityError(f"{where} {name}: {exc}") from None
        if value < 0:
            raise errors.QuantityError(f"{where} {name}: negative quantity {text!r}")
        out[str(name)] = value
    return out


def _add(into: dict[str, int], more: dict[str, int], /) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _raise_to(into: dict[str, int], floor: dict[str, int], /) -> None:
    for name, value in floor.items():
        if value > into.get(name, 0):
            into[name] = value


def pod_requests(spec: core.PodSpec, /) -> resources.ResourceList:
    """What a pod with ``spec`` occupies on a node, Kubernetes' way, ``pods`` included.

    Raises ``QuantityError`` naming the container and resource when a quantity is malformed or
    negative.
    """
    total: dict[str, int] = {}
    for i, container in enumerate(wire.parts(spec.get("containers"))):
        _add(total, _container_requests(container, where=_where("containers", i, container)))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, container in enumerate(wire.parts(spec.get("initContainers"))):
        requests = _container_requests(container, where=_where("initContainers", i, container))
        if container.get("restartPolicy") == "Always":
            # A sidecar keeps running beside the app containers and every later init container.
            _add(total, requests)
            _add(sidecars, requests)
            _raise_to(init_peak, sidecars)
        else:
            _add(requests, sidecars)
            _raise_to(init_peak, requests)
    _raise_to(total, init_peak)
    pod_level = wire.part(spec.get("resources"))
    if pod_level:
        # Pod-level resources (``spec.resources``, cpu and memory): they replace what the
        # containers add up to for the resources they name, as kube-scheduler sizes such a pod.
        total.update(
            {
                name: value
                for name, value in _container_requests(
                    {"resources": pod_level}, where="spec.resources"
                ).items()
                if name in _POD_LEVEL_RESOURCES
            }
        )
    overhead = wire.part(spec.get("overhead"))
    if overhead:
        _add(total, _container_requests({"resources": {"requests": overhead}}, where="overhead"))
    _add(total, {resources.PODS: 1000})
    for name, value in total.items():
        if value > quantities.MAX_MILLI:
            raise errors.QuantityError(
                f"the pod's total {name} request ({value}m) is out of "
                f"range (at most {quantities.MAX_TEXT})"
            )
    return resources.ResourceList(total)


DEFAULT_MILLI_CPU_REQUEST = 100
"""kube-scheduler's cpu for scoring an app container that requests none (``100m``)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024 * 1000
"""kube-scheduler's memory for scoring an app container that requests none (``200Mi``, milli)."""


def nonzero_requests(
    spec: core.PodSpec, requests: resources.ResourceList, /
) -> resources.ResourceList | None:
    """``requests`` with kube-scheduler's non-zero defaults for scoring, or ``None`` when they
    change nothing: each app container requesting no cpu (no memory) counts 100m (200Mi), so
    that best-effort pods still spread. Pod-level resources, where set, are taken as they are.
    """
    pod_level = wire.part(spec.get("resources"))
    named = set(wire.part(pod_level.get("requests"))) | set(wire.part(pod_level.get("limits")))
    extra = {resources.CPU: 0, resources.MEMORY: 0}
    for container in wire.parts(spec.get("containers")):
        res = wire.part(container.get("resources"))
        given = set(wire.part(res.get("requests"))) | set(wire.part(res.get("limits")))
        if resources.CPU not in given and resources.CPU not in named:
            extra[resources.CPU] += DEFAULT_MILLI_CPU_REQUEST
        if resources.MEMORY not in given and resources.MEMORY not in named:
            extra[resources.MEMORY] += DEFAULT_MEMORY_REQUEST
    if not any(extra.values()):
        return None
    total = dict(requests)
    _add(total, {name: value for name, value in extra.items() if value})
    return resources.ResourceList(total)


def _where(field: str, index: int, container: core.Container) -> str:
    name = container.get("name")
    return f"{field}[{index}]" + (f" ({name})" if name else "")


# Keys and resolution ---------------------------------------------------------------------


def _scheduling_group(spec: core.PodSpec | None) -> str | None:
    """Kubernetes 1.36's ``spec.schedulingGroup.podGroupName`` (``scheduling.k8s.io/v1alpha2``
    PodGroups)."""
    name = wire.part(wire.part(spec).get("schedulingGroup")).get("podGroupName")
    return str(name) if isinstance(name, str) and name else None


def _workload_group(spec: core.PodSpec | None) -> str | None:
    """The Berth PodGroup standing for Kubernetes 1.35's ``spec.workloadRef``
    (``scheduling.k8s.io/v1alpha1`` Workloads; :mod:`berth.api.workload_refs`)."""
    ref = workload_refs.from_pod_spec(spec or {})
    return ref.group_name if ref is not None else None


def _group_name(
    labels: collections.abc.Mapping[str, str],
    annotations: collections.abc.Mapping[str, str],
    spec: core.PodSpec | None = None,
) -> str | None:
    name = (
        _scheduling_group(spec)
        or _workload_group(spec)
        or labels.get(GROUP_LABEL)
        or labels.get(GROUP_LABEL_INTEROP)
    )
    if not name:
        name = annotations.get(GROUP_ANNOTATION_INTEROP)
    return str(name) if name else None


def _group_claims(
    labels: collections.abc.Mapping[str, str],
    annotations: collections.abc.Mapping[str, str],
    spec: core.PodSpec,
) -> str | None:
    """Why the pod cannot be placed when its keys name two different groups, else None."""
    claims = {
        "spec.schedulingGroup.podGroupName": _scheduling_group(spec),
        "spec.workloadRef": _workload_group(spec),
        f"label {GROUP_LABEL}": labels.get(GROUP_LABEL),
        f"label {GROUP_LABEL_INTEROP}": labels.get(GROUP_LABEL_INTEROP),
        f"annotation {GROUP_ANNOTATION_INTEROP}": annotations.get(GROUP_ANNOTATION_INTEROP),
    }
    named = {key: str(name) for key, name in claims.items() if name}
    if len(set(named.values())) < 2:
        return None
    listed = ", ".join(f"{key}={name}" for key, name in named.items())
    return f"two PodGroups claim the pod ({listed}): remove all but one"


def awaits_owner_group(raw: typing.Any, /) -> bool:
    """Whether a pod waits for Berth to derive its group from its owners: it has owners, names
    no group, was not grouped yet (:data:`~berth.api.keys.GROUPED_BY_ANNOTATION`) and did not
    opt out (:data:`~berth.api.keys.GROUP_BY_OWNER_LABEL` ``disabled``)."""
    obj = typing.cast(core.Pod, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    if not wire.parts(meta.get("ownerReferences")):
        return False
    labels = wire.part(meta.get("labels"))
    annotations = wire.part(meta.get("annotations"))
    if labels.get(keys.GROUP_BY_OWNER_LABEL) == "disabled" or annotations.get(
        keys.GROUPED_BY_ANNOTATION
    ):
        return False
    plain_labels = {str(k): str(v) for k, v in labels.items()}
    return _group_name(plain_labels, annotations, wire.part(obj.get("spec"))) is None


def implicit_group_key(namespace: str, /, *, name: str) -> ids.PodGroupKey:
    """The key of the group of one a pod with a queue but no group forms.

    ``:`` cannot appear in a Kubernetes name, so it never collides with a real PodGroup.
    """
    return ids.PodGroupKey(ids.key_of(namespace, name=f"pod:{name}"))


def _priority(
    spec_priority: int | None,
    /,
    *,
    class_name: str,
    priority_classes: collections.abc.Mapping[str, int],
    default_priority: int,
) -> int:
    if spec_priority is not None:
        return spec_priority
    if class_name:
        # A class that does not exist (yet) counts as the default, as admission would refuse it.
        return priority_classes.get(class_name, default_priority)
    return default_priority


def resolve(
    info: PodInfo,
    /,
    *,
    priority_classes: collections.abc.Mapping[str, int],
    default_priority: int = 0,
    group_queue: str | None = None,
    namespace_queue: str | None = None,
    plain_queue: str | None = None,
) -> PodInfo:
    """``info`` with its priority and queue resolved again (after a PriorityClass, its group or
    its namespace changed); the same object when nothing changed.

    The queue: the pod's queue label, else its group's (``group_queue``). ``namespace_queue``
    is the default queue its Namespace names (label ``scheduling.berth.io/default-queue``):
    there, a queue label ``default`` means that queue. ``plain_queue`` is the queue a pod with
    neither group nor queue joins as a group of one (for one of Berth's pods: its namespace's
    default queue, else ``default``); ``None`` leaves such a pod plain, outside every queue.
    A pod waiting for the group its owners give it joins nothing yet.
    """
    priority = _priority(
        info.spec_priority,
        class_name=info.priority_class_name,
        priority_classes=priority_classes,
        default_priority=default_priority,
    )
    label_queue = info.labels.get(QUEUE_LABEL) or None
    if namespace_queue and label_queue == keys.DEFAULT_QUEUE:
        label_queue = namespace_queue
    group = info.pod_group
    if (
        group is not None
        and group == implicit_group_key(info.namespace, name=info.name)
        and not info.labels.get(QUEUE_LABEL)
    ):
        group = None  # it joined a queue as a plain pod: joined again below, or not
    if (
        group is None
        and label_queue is None
        and plain_queue
        and not info.awaiting_group
        and not info.reserve
    ):
        label_queue = plain_queue
        group = implicit_group_key(info.namespace, name=info.name)
    queue = ids.QueueName(label_queue) if label_queue else _queue_or_none(group_queue)
    if priority == info.priority and queue == info.queue and group == info.pod_group:
        return info
    return replace(info, priority=priority, queue=queue, pod_group=group)


def _queue_or_none(name: str | None) -> ids.QueueName | None:
    return ids.QueueName(name) if name else None


class Parsed(typing.NamedTuple):
    """What :func:`pod_info` derives from a pod's scheduling inputs (its spec but
    ``nodeName``, labels, annotations, owners, ``creationTimestamp``, claim statuses), with
    their fingerprint: a later version of the pod with the same fingerprint reuses all of it.

    Watch events mostly change a pod's status (the kubelet, or KWOK, reporting its phase and
    conditions) and its ``nodeName`` (the binding); deriving its sizing, selectors, tolerations
    and constraints again for each would be most of the scheduler's CPU per pod. The
    fingerprint is a 128-bit BLAKE2 digest of the inputs' ``marshal`` form, which keeps types
    apart (``1``, ``"1"``, ``True``, a list and a tuple) and refuses anything but plain JSON
    values (``None`` then: never reused). A digest, not the inputs: a standing pod keeps 16
    bytes of them, not its spec. A named tuple: cheap to build, immutable.
    """

    inputs: bytes | None
    namespace: str
    name: str
    key: ids.PodKey
    labels: collections.abc.Mapping[str, str]
    annotations: collections.abc.Mapping[str, str]
    scheduler_name: str
    spec_priority: int | None
    priority_class_name: str
    preemption_policy: str
    creation_timestamp: float
    requests: resources.ResourceList
    nonzero_requests: resources.ResourceList | None
    node_selector: tuple[selectors.Requirement, ...]
    required_affinity: tuple[selectors.SelectorTerm, ...] | None
    preferred_affinity: tuple[selectors.PreferredTerm, ...]
    tolerations: tuple[taints.Toleration, ...]
    owner_references: tuple[OwnerReference, ...]
    pod_group: ids.PodGroupKey | None
    label_queue: ids.QueueName | None
    reservation: ids.ReservationKey | None
    scheduling_gates: tuple[str, ...]
    invalid: str | None
    constraints: podconstraints.Constraints
    resource_claims: tuple[podclaims.PodResourceClaim, ...]
    uses: frozenset[podconstraints.Field]
    images: tuple[str, ...]
    awaiting_group: bool
    workload_ref: workload_refs.WorkloadRef | None
    group_error: str | None
    gpu_share: gpushare.ShareRequest | None
    gpu_devices: tuple[int, ...] | None


def _fingerprint(
    meta: objects.ObjectMeta,
    spec: core.PodSpec,
    status: core.PodStatus,
    /,
    *,
    group_by_owner: bool,
) -> bytes | None:
    """The digest of everything :class:`Parsed` is derived from; ``None`` when some of it is
    not plain JSON data (a model's view, a subclass): such a pod is always parsed in full."""
    unbound = dict(spec)
    unbound.pop("nodeName", None)
    inputs = (
        group_by_owner,
        meta.get("namespace"),
        meta.get("name"),
        meta.get("labels"),
        meta.get("annotations"),
        meta.get("ownerReferences"),
        meta.get("creationTimestamp"),
        status.get("resourceClaimStatuses"),
        unbound,
    )
    try:
        # Version 2: no back-references, so equal inputs always give equal bytes.
        text = marshal.dumps(inputs, 2)
    except ValueError:
        return None
    return hashlib.blake2b(text, digest_size=16).digest()


def _parse(
    obj: core.Pod,
    meta: objects.ObjectMeta,
    spec: core.PodSpec,
    status: core.PodStatus,
    /,
    *,
    group_by_owner: bool,
    inputs: bytes | None,
) -> Parsed:
    """Derive :class:`Parsed` from the pod ``obj`` (its ``meta``, ``spec`` and ``status``)."""
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    labels = {str(k): str(v) for k, v in wire.part(meta.get("labels")).items()}
    annotations = {str(k): str(v) for k, v in wire.part(meta.get("annotations")).items()}
    invalid: str | None = _group_claims(labels, annotations, spec)
    nonzero: resources.ResourceList | None = None
    share: gpushare.ShareRequest | None = None
    try:
        requests = pod_requests(spec)
        share = gpushare.parse(annotations, whole_gpus=requests.get(resources.GPU, 0))
        if share is not None and share.problem is None:
            # A gpu-memory share counts whole devices until the cache knows the cluster's GPUs.
            requests = gpushare.charged(requests, share, memory=None)
        nonzero = nonzero_requests(spec, requests)
    except errors.QuantityError as exc:
        invalid, requests = f"invalid resource request: {exc}", _ONE_POD
    spec_priority = spec.get("priority")
    if not isinstance(spec_priority, int) or isinstance(spec_priority, bool):
        spec_priority = None
    required, preferred = selectors.parse_node_affinity(spec.get("affinity"))
    constraints = podconstraints.parse(spec, namespace=namespace, labels=labels, name=name)
    resource_claims, claim_problems = podclaims.parse(spec, status)
    problems = constraints.problems + claim_problems
    if problems and invalid is None:
        invalid = "; ".join(problems)
    group_name = _group_name(labels, annotations, spec)
    label_queue = labels.get(QUEUE_LABEL)
    if group_name:
        group: ids.PodGroupKey | None = ids.PodGroupKey(ids.key_of(namespace, name=group_name))
    elif label_queue:
        group = implicit_group_key(namespace, name=name)
    else:
        group = None
    reservation = labels.get(RESERVATION_LABEL)
    return Parsed(
        inputs=inputs,
        namespace=namespace,
        name=name,
        key=ids.PodKey(ids.key_of(namespace, name=name)),
        labels=labels,
        annotations=annotations,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        spec_priority=spec_priority,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        preemption_policy=str(spec.get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY),
        creation_timestamp=wire.parse_time(meta.get("creationTimestamp")) or 0.0,
        requests=requests,
        nonzero_requests=nonzero,
        node_selector=selectors.parse_node_selector(spec.get("nodeSelector")),
        required_affinity=required,
        preferred_affinity=preferred,
        tolerations=taints.parse_tolerations(spec.get("tolerations")),
        owner_references=tuple(
            OwnerReference(
                kind=str(ref.get("kind") or ""),
                name=str(ref.get("name") or ""),
                uid=str(ref.get("uid") or ""),
                controller=bool(ref.get("controller")),
                api_version=str(ref.get("apiVersion") or ""),
            )
            for ref in wire.parts(meta.get("ownerReferences"))
        ),
        pod_group=group,
        label_queue=ids.QueueName(label_queue) if label_queue else None,
        reservation=(
            ids.ReservationKey(ids.key_of(namespace, name=reservation)) if reservation else None
        ),
        scheduling_gates=tuple(
            str(gate.get("name") or "") for gate in wire.parts(spec.get("schedulingGates"))
        ),
        invalid=invalid,
        constraints=constraints,
        resource_claims=resource_claims,
        uses=(
            constraints.uses | {podconstraints.Field.GPU_SHARING}
            if share is not None
            else constraints.uses
        ),
        images=tuple(
            nodes.normalized_image(str(c["image"]))
            for listed in (spec.get("initContainers"), spec.get("containers"))
            for c in wire.parts(listed)
            if c.get("image")
        ),
        awaiting_group=group_by_owner and awaits_owner_group(obj),
        workload_ref=workload_refs.from_pod_spec(spec),
        group_error=annotations.get(keys.GROUP_ERROR_ANNOTATION) or None,
        gpu_share=share,
        gpu_devices=gpushare.devices_of(annotations) if share is not None else None,
    )


def _finish_time(status: core.PodStatus, /) -> float | None:
    """When the last of a finished pod's containers terminated, from its containerStatuses;
    ``None`` when none says."""
    found: float | None = None
    for entry in wire.parts(status.get("containerStatuses")):
        terminated = wire.part(wire.part(entry.get("state")).get("terminated"))
        when = wire.parse_time(terminated.get("finishedAt"))
        if when is not None and (found is None or when > found):
            found = when
    return found


def pod_info(
    raw: typing.Any,
    /,
    *,
    priority_classes: collections.abc.Mapping[str, int] | None = None,
    default_priority: int = 0,
    group_queue: str | None = None,
    group_by_owner: bool = False,
    previous: PodInfo | None = None,
) -> PodInfo:
    """Parse a pod (the API's dict) into a :class:`PodInfo`.

    ``priority_classes`` (name -> value) and ``default_priority`` (the global default class)
    resolve a pod without ``spec.priority``; ``group_queue`` is its group's queue, used when
    the pod has no queue label. ``group_by_owner``: a pod that :func:`awaits_owner_group` is
    marked ``awaiting_group``. ``previous``: an earlier info of the pod; when its scheduling
    inputs did not change (:class:`Parsed`), what was derived from them is reused, and only
    the status, ``nodeName`` and the like are read again. The result is the same either way.
    """
    obj = typing.cast(core.Pod, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    spec, status = wire.part(obj.get("spec")), wire.part(obj.get("status"))
    inputs = _fingerprint(meta, spec, status, group_by_owner=group_by_owner)
    parsed = previous.parsed if previous is not None else None
    if parsed is None or inputs is None or parsed.inputs != inputs:
        parsed = _parse(obj, meta, spec, status, group_by_owner=group_by_owner, inputs=inputs)
    node_name = spec.get("nodeName")
    # In PodInfo's field order (see _made).
    return _made(
        {
            "uid": str(meta.get("uid") or ""),
            "namespace": parsed.namespace,
            "name": parsed.name,
            "key": parsed.key,
            "labels": parsed.labels,
            "annotations": parsed.annotations,
            "scheduler_name": parsed.scheduler_name,
            "node_name": ids.NodeName(str(node_name)) if node_name else None,
            "phase": str(status.get("phase") or "Pending"),
            "deleting": bool(meta.get("deletionTimestamp")),
            "priority": _priority(
                parsed.spec_priority,
                class_name=parsed.priority_class_name,
                priority_classes=priority_classes or {},
                default_priority=default_priority,
            ),
            "spec_priority": parsed.spec_priority,
            "priority_class_name": parsed.priority_class_name,
            "preemption_policy": parsed.preemption_policy,
            "creation_timestamp": parsed.creation_timestamp,
            "requests": parsed.requests,
            "node_selector": parsed.node_selector,
            "required_affinity": parsed.required_affinity,
            "preferred_affinity": parsed.preferred_affinity,
            "tolerations": parsed.tolerations,
            "owner_references": parsed.owner_references,
            "pod_group": parsed.pod_group,
            "queue": parsed.label_queue or _queue_or_none(group_queue),
            "reservation": parsed.reservation,
            "scheduling_gates": parsed.scheduling_gates,
            "invalid": parsed.invalid,
            "nonzero_requests": parsed.nonzero_requests,
            "pod_affinity": parsed.constraints.affinity,
            "spread": parsed.constraints.spread,
            "host_ports": parsed.constraints.host_ports,
            "claims": parsed.constraints.claims,
            "resource_claims": parsed.resource_claims,
            "uses": parsed.uses,
            "images": parsed.images,
            "reserve": False,
            "resource_version": str(meta.get("resourceVersion") or ""),
            "start_time": wire.parse_time(status.get("startTime")),
            "finish_time": (
                _finish_time(status) if status.get("phase") in _TERMINAL_PHASES else None
            ),
            "awaiting_group": parsed.awaiting_group,
            "group_error": parsed.group_error,
            "workload_ref": parsed.workload_ref,
            "gpu_share": parsed.gpu_share,
            "gpu_devices": parsed.gpu_devices,
            "parsed": parsed,
        }
    )
