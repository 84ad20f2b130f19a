"""Scenario files: ``apiVersion: sim.berth.io/v1alpha1``, ``kind: Scenario``.

A scenario says what cluster to simulate (node pools, with the DRA devices of each node),
what exists at time zero (``objects``: Queues, PodGroups, Pods, Reservations, PriorityClasses,
and DRA's DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates), what work
arrives (``workloads``, generators of jobs, whose pods may claim devices) and what changes when
(``events``), up to ``until``. The models here are
the file's schema; :func:`load` and :func:`loads` read YAML and report *every* problem at once,
each with the path in the file and its line (``scenario.yaml:14:9:
spec.workloads[2].requests.cpu: ...``), so that nothing half-runs on a bad file.

Manifests in ``objects`` and ``events[].apply`` are validated with Berth's API models (the DRA
kinds with their typed wire records and the scheduler's own parsing: a selector that does not
compile is refused here, as the API server refuses it) and kept as the API would store them
(defaults filled in). References are checked across the file: a
workload, PodGroup, pod, Reservation or queue parent naming a queue that no Queue object
defines (``default`` always exists) is an error.

Used by :mod:`berth.sim.runner`, :mod:`berth.sim.traces` and ``berth sim``.
"""

from __future__ import annotations

import collections.abc
import pathlib
import re
import typing

import pydantic
import pydantic_core

from berth.api import (
    core,
    custom_objects,
    dra,
    durations,
    keys,
    meta,
    podgroups,
    pods,
    quantities,
    queues,
    reservations,
)
from berth.api import errors as api_errors
from berth.api import objects as api_objects
from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.framework import errors as framework_errors
from berth.scheduler.framework import profiles
from berth.scheduler.plugins import registry as plugin_registry
from berth.scheduler.snapshot import deviceclasses, resourceclaims, resourceslices
from berth.sim import errors, locations

__all__ = [
    "API_VERSION",
    "KINDS",
    "Kind",
    "NodeDevices",
    "NodePool",
    "PodClaim",
    "ObjectRef",
    "PriorityClass",
    "Resources",
    "Scenario",
    "ScenarioSpec",
    "Taint",
    "TimedEvent",
    "Workload",
    "from_data",
    "load",
    "loads",
    "node_names",
]

API_VERSION = "sim.berth.io/v1alpha1"
DEFAULT_PODS = 110_000
"""Milli-pods a node allows when its pool does not say: the kubelet's default of 110 pods."""

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _quantity(value: typing.Any) -> int:
    try:
        milli = quantities.parse_milli(value)
    except api_errors.QuantityError as exc:
        raise pydantic_core.PydanticCustomError("quantity", str(exc)) from None
    if milli < 0:
        raise pydantic_core.PydanticCustomError(
            "negative_quantity", "quantity {value} must not be negative", {"value": value}
        )
    return milli


Resources = dict[
    str,
    typing.Annotated[
        int,
        pydantic.PlainValidator(_quantity),
        pydantic.PlainSerializer(quantities.format_milli, return_type=str),
    ],
]
"""Resource name -> milli-units; errors name the resource (``requests.cpu``), not the list.
Wrap in ``ResourceList`` to compute with it."""


def _zero_duration(value: typing.Any) -> typing.Any:
    # YAML reads "at: 0" as an integer; zero is the one duration Go writes without a unit.
    return "0" if value == 0 and not isinstance(value, bool) else value


Duration = typing.Annotated[durations.DurationField, pydantic.BeforeValidator(_zero_duration)]


class SimModel(meta.ApiModel):
    """Base of the scenario schema: camelCase keys, unknown keys are errors."""


class Taint(SimModel):
    """A taint on every node of a pool."""

    key: str = pydantic.Field(min_length=1)
    """Taint key, e.g. ``dedicated``."""
    value: str | None = None
    """Taint value, e.g. ``gpu``."""
    effect: pods.TaintEffect
    """NoSchedule, PreferNoSchedule or NoExecute."""


class NodeDevices(SimModel):
    """DRA devices every node of a pool has: one ResourceSlice per node and driver (its pool
    named after the node), with ``count`` devices ``<namePrefix><index>``."""

    driver: str = pydantic.Field(min_length=1, max_length=63)
    """The DRA driver publishing them, e.g. ``gpu.example.com``."""
    count: int = pydantic.Field(ge=1, le=128)
    """Devices per node."""
    name_prefix: str = pydantic.Field(default="dev-", pattern=r"^[a-z0-9]([-a-z0-9]*)$")
    """Start of each device's name; the index follows."""
    attributes: dict[str, dra.DeviceAttribute] = pydantic.Field(default_factory=dict)
    """Attributes of every device (``{model: {string: a100}}``); each also gets ``index``."""
    capacity: dict[str, dra.DeviceCapacity] = pydantic.Field(default_factory=dict)
    """Capacities of every device (``{memory: {value: 80Gi}}``)."""
    allow_multiple_allocations: bool = False
    """Shared by several claims up to their capacity (consumable capacity)."""


class NodePool(SimModel):
    """``count`` identical nodes named ``<namePrefix><index>``."""

    count: int = pydantic.Field(ge=1, le=100_000)
    """How many nodes the pool has."""
    name_prefix: str = pydantic.Field(default="node-", pattern=r"^[a-z0-9]([-a-z0-9.]*)$")
    """Start of every node name; the index follows, zero-padded so names sort by index."""
    allocatable: Resources
    """What each node offers pods (``pods`` defaults to 110)."""
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    """Labels of every node."""
    taints: list[Taint] = pydantic.Field(default_factory=list)
    """Taints of every node."""
    unschedulable: bool = False
    """Cordoned: no new pods are placed on these nodes."""
    devices: list[NodeDevices] = pydantic.Field(default_factory=list)
    """DRA devices of every node (a ResourceSlice each), by driver."""

    @pydantic.model_validator(mode="after")
    def _drivers_once(self) -> NodePool:
        drivers = [d.driver for d in self.devices]
        if len(set(drivers)) != len(drivers):
            raise ValueError("each driver's devices are listed once per pool")
        return self


class PodClaim(SimModel):
    """One ``spec.resourceClaims`` entry of each pod of a workload: a claim by name (shared by
    every pod naming it) or a template (each pod gets its own claim)."""

    name: str = pydantic.Field(pattern=_DNS_LABEL, max_length=63)
    """The entry's name."""
    resource_claim_name: str | None = None
    """A ResourceClaim of the scenario, in the workload's namespace."""
    resource_claim_template_name: str | None = None
    """A ResourceClaimTemplate of the scenario, in the workload's namespace."""

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> PodClaim:
        if (self.resource_claim_name is None) == (self.resource_claim_template_name is None):
            raise ValueError(
                "exactly one of resourceClaimName and resourceClaimTemplateName must be set"
            )
        return self


class Role(SimModel):
    """A role inside each job of a workload (a PodGroup sub-group): its pods and minimum."""

    name: str = pydantic.Field(pattern=_DNS_LABEL, max_length=40)
    """Name of the sub-group; its pods carry the label ``sim.berth.io/role: <name>``."""
    replicas: int = pydantic.Field(default=1, ge=1, le=100_000)
    """Pods of this role per job."""
    min_member: int = pydantic.Field(default=1, ge=1)
    """Pods of this role that must be placed for the gang to run; at most ``replicas``."""
    requests: Resources | None = None
    """Requests of each of its pods (the workload's when unset)."""
    topology: podgroups.TopologyConstraint | None = None
    """A topology domain this role's pods must or should share."""

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Role:
        if self.min_member > self.replicas:
            raise ValueError(
                f"minMember ({self.min_member}) cannot exceed replicas ({self.replicas})"
            )
        return self


class Workload(SimModel):
    """A generator of jobs: ``count`` arrivals from ``at``, one every ``every``.

    Each arrival is one job ``<name>-<index>`` of ``replicas`` pods that each run for
    ``duration`` once bound. A job gets a PodGroup when ``minMember`` is above 1 or a queue is
    named; otherwise its pods are plain pods.
    """

    name: str = pydantic.Field(pattern=_DNS_LABEL, max_length=40)
    """Name of the generator; jobs are ``<name>-<index>``, pods ``<job>-<replica>``."""
    namespace: str = pydantic.Field(default="default", pattern=_DNS_LABEL, max_length=63)
    """Namespace of the jobs."""
    queue: str | None = None
    """Queue the jobs are submitted to (``default`` exists implicitly)."""
    at: Duration = durations.Duration.of(0)
    """When the first job arrives."""
    every: Duration | None = None
    """Time between arrivals (the mean, with ``arrival: poisson``); needed when count > 1."""
    arrival: typing.Literal["fixed", "poisson"] = "fixed"
    """``fixed`` spacing, or ``poisson``: exponential gaps drawn from the scenario's seed."""
    count: int = pydantic.Field(default=1, ge=1, le=1_000_000)
    """How many jobs arrive."""
    replicas: int = pydantic.Field(default=1, ge=1, le=100_000)
    """Pods per job."""
    min_member: int = pydantic.Field(default=1, ge=1)
    """Pods that must be placed together (a gang); at most ``replicas``."""
    priority: int | None = None
    """The pods' priority value."""
    priority_class_name: str | None = None
    """PriorityClass of the jobs (an object of the scenario)."""
    duration: Duration
    """How long each pod runs once bound, then it succeeds."""
    expected_runtime: Duration | None = None
    """What each pod declares it runs for (annotation ``scheduling.berth.io/expected-runtime``,
    for EASY backfill); none by default. It may differ from ``duration``, as estimates do."""
    requests: Resources = pydantic.Field(default_factory=dict)
    """Requests of each pod."""
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    """Extra labels of each pod."""
    annotations: dict[str, str] = pydantic.Field(default_factory=dict)
    """Extra annotations of each pod, e.g. a share of a GPU as KAI-Scheduler's pods ask it:
    ``gpu-fraction: "0.5"``, ``gpu-memory: "10000"`` (MiB), ``gpu-fraction-num-devices``."""
    node_selector: dict[str, str] = pydantic.Field(default_factory=dict)
    """Labels a node must have."""
    gpu_models: list[str] = pydantic.Field(default_factory=list)
    """GPU models the pods accept (any when empty): a required node affinity on the node label
    ``nvidia.com/gpu.product``, as GPU feature discovery labels nodes."""
    tolerations: list[pods.Toleration] = pydantic.Field(default_factory=list)
    """Taints the pods tolerate."""
    topology: podgroups.TopologyConstraint | None = None
    """A topology domain (a level of the profile's Topology plugin) each job's pods must or
    should share."""
    roles: list[Role] = pydantic.Field(default_factory=list, max_length=podgroups.MAX_SUB_GROUPS)
    """Roles inside each job (PodGroup ``subGroups``); their replicas add up to ``replicas``."""
    resource_claims: list[PodClaim] = pydantic.Field(default_factory=list)
    """DRA claims of each pod (``spec.resourceClaims``)."""
    maximum_execution_time_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Each job's PodGroup ``maximumExecutionTimeSeconds``: past it, the job is requeued or
    failed (``onMaximumExecutionTime``). Unset: its queue's."""
    on_maximum_execution_time: podgroups.ExecutionTimePolicy | None = None
    """Each job's PodGroup ``onMaximumExecutionTime``: Requeue (unset) or Fail."""

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.roles and sum(r.replicas for r in self.roles) != self.replicas:
            raise ValueError("the roles' replicas must add up to replicas")
        if len({r.name for r in self.roles}) != len(self.roles):
            raise ValueError("role names must be unique")
        if self.min_member > self.replicas:
            raise ValueError(
                f"minMember ({self.min_member}) cannot exceed replicas ({self.replicas})"
            )
        if self.count > 1 and self.every is None:
            raise ValueError("every is required when count is above 1")
        if self.every is not None and self.count > 1 and self.every.ms == 0:
            raise ValueError("every must be longer than 0 when count is above 1")
        return self

    @property
    def is_group(self) -> bool:
        """Whether each job is a PodGroup (a gang or a queued job) rather than plain pods."""
        return (
            self.min_member > 1
            or self.queue is not None
            or self.topology is not None
            or bool(self.roles)
            or self.maximum_execution_time_seconds is not None
        )


Kind = typing.Literal[
    "Queue",
    "PodGroup",
    "Pod",
    "Reservation",
    "PriorityClass",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
]
"""A kind a scenario may create, apply or delete."""
KINDS: tuple[str, ...] = typing.get_args(Kind)
"""The kinds a scenario may create, apply or delete, in the order the runner loads them."""
_CLUSTER_SCOPED = frozenset({"Queue", "PriorityClass", "DeviceClass", "ResourceSlice"})
_DRA_KINDS = frozenset({"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"})


class ObjectRef(SimModel):
    """The object a timed ``delete`` removes."""

    kind: Kind
    """Kind of the object."""
    namespace: str | None = None
    """Namespace of a namespaced object (``default`` when left out)."""
    name: str = pydantic.Field(min_length=1)
    """Name of the object."""

    @property
    def scoped_namespace(self) -> str | None:
        """The namespace the object lives in; ``None`` for cluster-scoped kinds."""
        if self.kind in _CLUSTER_SCOPED:
            return None
        return self.namespace or "default"


class TimedEvent(SimModel):
    """At ``at``, ``apply`` a manifest (create or replace) or ``delete`` an object."""

    at: Duration
    """When it happens."""
    # Untyped: the user's manifest as the file holds it, of any scenario kind; load() checks it
    # with that kind's model (naming the bad field with its line) and stores the result here.
    apply: dict[str, typing.Any] | None = None
    """A manifest of one of the scenario's kinds."""
    delete: ObjectRef | None = None
    """The object to delete."""

    @pydantic.model_validator(mode="after")
    def _one_action(self) -> TimedEvent:
        if (self.apply is None) == (self.delete is None):
            raise ValueError("an event needs exactly one of apply or delete")
        return self


class ScenarioSpec(SimModel):
    """What to simulate."""

    seed: int = pydantic.Field(default=1, ge=0)
    """Seed of every random choice (Poisson arrivals); same seed, same result."""
    until: Duration | None = None
    """Virtual time to stop at; without it the run ends when nothing is left to happen."""
    schedule_period: Duration = durations.Duration.of(0)
    """Least virtual time between two scheduling cycles; ``0`` runs a cycle at every instant
    something changed (Berth's operator runs one as soon as it is triggered)."""
    profile: profiles.Profile | None = None
    """Scheduler profile (as ``berth run --config`` takes it); the default profile otherwise."""
    nodes: list[NodePool] = pydantic.Field(min_length=1)
    """Node pools."""
    # Untyped: the user's manifests as the file holds them, of any scenario kind; load() checks
    # each with that kind's model (naming the bad field with its line) and stores the results.
    objects: list[dict[str, typing.Any]] = pydantic.Field(default_factory=list)
    """Manifests created at time zero."""
    workloads: list[Workload] = pydantic.Field(default_factory=list)
    """Job generators."""
    events: list[TimedEvent] = pydantic.Field(default_factory=list)
    """Timed applies and deletes."""


class Scenario(SimModel):
    """A simulation scenario file."""

    api_version: typing.Literal["sim.berth.io/v1alpha1"]
    """Always ``sim.berth.io/v1alpha1``."""
    kind: typing.Literal["Scenario"]
    """Always ``Scenario``."""
    metadata: meta.ObjectMeta = pydantic.Field(default_factory=meta.ObjectMeta)
    """Name and description (annotations) of the scenario."""
    spec: ScenarioSpec
    """What to simulate."""

    @property
    def name(self) -> str:
        """The scenario's name, ``scenario`` when it has none."""
        return self.metadata.name or "scenario"


class PriorityClass(meta.OpenApiModel):
    """A ``scheduling.k8s.io/v1`` PriorityClass, as much of it as scheduling reads."""

    api_version: typing.Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: typing.Literal["PriorityClass"] = "PriorityClass"
    metadata: meta.ObjectMeta
    value: int = pydantic.Field(ge=-2_147_483_648, le=1_000_000_000)
    global_default: bool = False
    preemption_policy: typing.Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"


_MODELS: dict[str, type[meta.ApiModel]] = {
    "Queue": queues.Queue,
    "PodGroup": podgroups.PodGroup,
    "Pod": pods.Pod,
    "Reservation": reservations.Reservation,
    "PriorityClass": PriorityClass,
}
# The DRA kinds: their typed wire records, and what the scheduler's parsing finds wrong.
_WIRE: dict[str, pydantic.TypeAdapter[typing.Any]] = {
    "DeviceClass": pydantic.TypeAdapter(dra.DeviceClass),
    "ResourceSlice": pydantic.TypeAdapter(dra.ResourceSlice),
    "ResourceClaim": pydantic.TypeAdapter(dra.ResourceClaim),
    "ResourceClaimTemplate": pydantic.TypeAdapter(dra.ResourceClaimTemplate),
}


def _dra_problem(kind: str, obj: api_objects.KubeObject) -> str | None:
    """What the scheduler's parsing finds wrong with a DRA object its wire record checked."""
    if kind == "DeviceClass":
        return deviceclasses.device_class_info(obj).problem
    if kind == "ResourceSlice":
        return resourceslices.resource_slice_info(obj).problem
    if kind == "ResourceClaim":
        return resourceclaims.resource_claim_info(obj).problem
    problem = resourceclaims.resource_claim_template_info(obj).spec.problem
    return problem.replace("spec.", "spec.spec.", 1) if problem is not None else None


# Loading ----------------------------------------------------------------------------------


def load(path: pathlib.Path | str) -> Scenario:
    """Read and validate the scenario file at ``path``; problems raise ``ScenarioError``."""
    source = str(path)
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        issue = errors.Issue(path="", message=f"cannot read the scenario: {exc}")
        raise errors.ScenarioError([issue], source=source) from None
    return loads(text, source=source)


def loads(text: str, *, source: str | None = None) -> Scenario:
    """Validate the scenario in ``text``; ``source`` names the file in error messages."""
    try:
        data, locator = locations.load(text)
    except errors.ScenarioError as exc:
        raise errors.ScenarioError(exc.issues, source=source) from None
    return from_data(data, locator=locator, source=source)


def from_data(
    data: typing.Any,
    *,
    locator: locations.Locator | None = None,
    source: str | None = None,
) -> Scenario:
    """Validate already-parsed data (``locator`` places issues in the original text)."""
    where = locator or locations.Locator.empty()
    if not isinstance(data, dict):
        raise errors.ScenarioError(
            [where.issue((), "a scenario must be a mapping with apiVersion, kind and spec")],
            source=source,
        )
    issues: list[errors.Issue] = []
    # Manifests are checked even when the rest of the file is broken, so one run of the
    # command shows every problem (None: one that has an issue, and load() raises).
    checked = [
        _manifest(obj, ("spec", "objects", i), where, issues)
        for i, obj in _raw_items(data, "objects")
    ]
    objects = [obj for obj in checked if obj is not None]
    applied = {
        i: manifest
        for i, event in _raw_items(data, "events")
        if isinstance(event.get("apply"), dict)
        and (manifest := _manifest(event["apply"], ("spec", "events", i, "apply"), where, issues))
        is not None
    }
    try:
        scenario = Scenario.model_validate(data)
    except pydantic.ValidationError as exc:
        issues += _issues(exc, (), where)
        raise errors.ScenarioError(issues, source=source) from None
    events = [
        event.model_copy(update={"apply": applied[i]}) if i in applied else event
        for i, event in enumerate(scenario.spec.events)
    ]
    if not issues:
        _check_references(scenario, objects, applied, where, issues)
        _check_profile(scenario.spec.profile, where, issues)
    if issues:
        raise errors.ScenarioError(issues, source=source)
    spec = scenario.spec.model_copy(update={"objects": objects, "events": events})
    return scenario.model_copy(update={"spec": spec})


# Untyped: the file's data before validation, arbitrary YAML, read to find each manifest.
def _raw_items(data: dict[str, typing.Any], field: str) -> list[tuple[int, dict[str, typing.Any]]]:
    """The mapping items of ``spec.<field>`` in raw data (the model reports anything else)."""
    spec = data.get("spec")
    items = spec.get(field) if isinstance(spec, dict) else None
    if not isinstance(items, list):
        return []
    return [(i, item) for i, item in enumerate(items) if isinstance(item, dict)]


def node_names(pool: NodePool) -> list[str]:
    """The names of a pool's nodes, zero-padded so that name order is index order."""
    width = len(str(pool.count - 1))
    return [f"{pool.name_prefix}{i:0{width}d}" for i in range(pool.count)]


def _manifest(
    # Untyped: a manifest as the file holds it, arbitrary YAML until its kind's model checks it.
    obj: dict[str, typing.Any],
    path: locations.Path,
    where: locations.Locator,
    issues: list[errors.Issue],
) -> api_objects.KubeObject | None:
    """Validate one manifest with its kind's model; return it as the API would store it
    (``None`` when it is not valid: the problems are in ``issues``)."""
    kind = obj.get("kind")
    model = _MODELS.get(kind) if isinstance(kind, str) else None
    wire = _WIRE.get(kind) if isinstance(kind, str) else None
    if model is None and wire is None:
        issues.append(where.issue((*path, "kind"), f"kind must be one of {', '.join(KINDS)}"))
        return None
    try:
        # What the model writes, or the wire record checked: the kind's stored form.
        if model is not None:
            stored = typing.cast(api_objects.KubeObject, model.model_validate(obj).to_api())
        else:
            assert wire is not None and isinstance(kind, str)
            stored = typing.cast(api_objects.KubeObject, dict(wire.validate_python(obj)))
            problem = _dra_problem(kind, stored)
            if problem is not None:
                issues.append(where.issue(path, problem))
                return None
    except pydantic.ValidationError as exc:
        issues.extend(_issues(exc, path, where))
        return None
    metadata = stored.setdefault("metadata", {})
    if not metadata.get("name"):
        issues.append(where.issue((*path, "metadata", "name"), "a name is required"))
    if kind in _CLUSTER_SCOPED:
        if metadata.get("namespace"):
            issues.append(
                where.issue((*path, "metadata", "namespace"), f"a {kind} has no namespace")
            )
    else:
        metadata.setdefault("namespace", "default")
    return stored


def _object_key(obj: api_objects.KubeObject) -> tuple[str, str, str]:
    metadata = obj.get("metadata", {})
    return (obj.get("kind", ""), metadata.get("namespace") or "", metadata.get("name") or "")


def _check_references(
    scenario: Scenario,
    objects: list[api_objects.KubeObject],
    applied: collections.abc.Mapping[int, api_objects.KubeObject],  # event index -> manifest
    where: locations.Locator,
    issues: list[errors.Issue],
) -> None:
    """Cross-field rules: unique names, defined queues, known priority classes."""
    spec = scenario.spec
    # Validated manifests of any scenario kind, with where each came from.
    manifests: list[tuple[locations.Path, api_objects.KubeObject]] = [
        (("spec", "objects", i), obj) for i, obj in enumerate(objects)
    ]
    manifests += [(("spec", "events", i, "apply"), applied[i]) for i in sorted(applied)]
    defined_queues = {keys.DEFAULT_QUEUE} | {
        obj["metadata"]["name"] for _, obj in manifests if obj.get("kind") == "Queue"
    }
    priority_classes = {
        obj["metadata"]["name"] for _, obj in manifests if obj.get("kind") == "PriorityClass"
    }

    def need_queue(path: locations.Path, name: str | None) -> None:
        if name is not None and name not in defined_queues:
            known = ", ".join(sorted(defined_queues))
            issues.append(
                where.issue(path, f"queue {name!r} is not defined by any Queue (defined: {known})")
            )

    def need_priority_class(path: locations.Path, name: str | None) -> None:
        if name is not None and name not in priority_classes:
            issues.append(where.issue(path, f"PriorityClass {name!r} is not in the scenario"))

    seen_nodes: dict[str, int] = {}
    for i, pool in enumerate(spec.nodes):
        for name in node_names(pool):
            if name in seen_nodes and seen_nodes[name] != i:
                issues.append(
                    where.issue(
                        ("spec", "nodes", i, "namePrefix"),
                        f"node {name!r} is also in spec.nodes[{seen_nodes[name]}]",
                    )
                )
                break
            seen_nodes[name] = i

    seen_objects: dict[tuple[str, str, str], int] = {}
    for i, obj in enumerate(objects):
        key = _object_key(obj)
        if key in seen_objects:
            issues.append(
                where.issue(
                    ("spec", "objects", i, "metadata", "name"),
                    f"{key[0]} {key[2]!r} is also spec.objects[{seen_objects[key]}]",
                )
            )
        seen_objects[key] = i

    # Each manifest is its kind's stored form (its model checked it): read as that kind's record.
    for path, obj in manifests:
        kind = obj["kind"]
        if kind == "PodGroup":
            group = typing.cast(custom_objects.PodGroup, obj).get("spec", {})
            need_queue((*path, "spec", "queue"), group.get("queue"))
            need_priority_class(
                (*path, "spec", "priorityClassName"), group.get("priorityClassName")
            )
        elif kind == "Reservation":
            reservation = typing.cast(custom_objects.Reservation, obj).get("spec", {})
            need_queue((*path, "spec", "queue"), reservation.get("queue"))
        elif kind == "Queue":
            queue = typing.cast(custom_objects.Queue, obj).get("spec", {})
            need_queue((*path, "spec", "parent"), queue.get("parent"))
        elif kind == "Pod":
            labels = obj["metadata"].get("labels") or {}
            need_queue(
                (*path, "metadata", "labels", keys.QUEUE_LABEL), labels.get(keys.QUEUE_LABEL)
            )
            pod = typing.cast(core.Pod, obj).get("spec", {})
            need_priority_class((*path, "spec", "priorityClassName"), pod.get("priorityClassName"))

    dra_objects = {
        (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        for _, obj in manifests
        if obj.get("kind") in _DRA_KINDS
    }

    def need_dra(path: locations.Path, kind: str, namespace: str, name: str | None) -> None:
        if name is not None and (kind, namespace, name) not in dra_objects:
            issues.append(where.issue(path, f"{kind} {namespace}/{name} is not in the scenario"))

    seen_workloads: dict[tuple[str, str], int] = {}
    for i, workload in enumerate(spec.workloads):
        path = ("spec", "workloads", i)
        need_queue((*path, "queue"), workload.queue)
        for j, claim in enumerate(workload.resource_claims):
            at = (*path, "resourceClaims", j)
            need_dra(
                (*at, "resourceClaimName"),
                "ResourceClaim",
                workload.namespace,
                claim.resource_claim_name,
            )
            need_dra(
                (*at, "resourceClaimTemplateName"),
                "ResourceClaimTemplate",
                workload.namespace,
                claim.resource_claim_template_name,
            )
        need_priority_class((*path, "priorityClassName"), workload.priority_class_name)
        ident = (workload.namespace, workload.name)
        if ident in seen_workloads:
            issues.append(
                where.issue(
                    (*path, "name"),
                    f"workload {workload.namespace}/{workload.name} is also "
                    f"spec.workloads[{seen_workloads[ident]}]",
                )
            )
        seen_workloads[ident] = i


_PROBLEM = re.compile(r"^\s*(?P<path>[^:\s]+): (?P<message>.*)$")
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _check_profile(
    profile: profiles.Profile | None, where: locations.Locator, issues: list[errors.Issue]
) -> None:
    """Resolve the profile against the in-tree plugins and actions (names, args)."""
    if profile is None:
        return
    actions = {action.name: action for action in actions_registry.default_actions()}
    try:
        profiles.resolve(profile, registry=plugin_registry.in_tree_registry(), actions=actions)
    except framework_errors.ProfileError as exc:
        for line in str(exc).splitlines()[1:]:
            match = _PROBLEM.match(line)
            if match is None:
                issues.append(where.issue(("spec", "profile"), line.strip()))
                continue
            parts: list[str | int] = [
                int(index) if index else name for name, index in _PATH_PART.findall(match["path"])
            ]
            issues.append(where.issue(("spec", "profile", *parts), match["message"]))


_MESSAGES = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}


def _issues(
    exc: pydantic.ValidationError, prefix: locations.Path, where: locations.Locator
) -> list[errors.Issue]:
    """Turn pydantic's errors into issues with file paths and lines."""
    out: list[errors.Issue] = []
    for error in exc.errors(include_url=False):
        path = (*prefix, *_clean_loc(error["loc"]))
        message = _MESSAGES.get(error["type"], error["msg"])
        message = message.removeprefix("Value error, ")
        out.append(where.issue(path, message))
    return out


def _clean_loc(loc: tuple[int | str, ...]) -> locations.Path:
    # Pydantic adds markers for dictionary keys and for the union member that was tried;
    # they are not part of the file's structure.
    return tuple(
        part
        for part in loc
        if isinstance(part, int) or not (part == "[key]" or re.match(r"^[a-z-]+\[.*\]$", part))
    )
