"""``PodGroupInfo``: one gang as the scheduler sees it, with its members counted.

Owns the parsing of a PodGroup (a ``berth.api.podgroups.PodGroup`` or its wire dict), the
implicit group of one a pod with a queue but no group forms, and the member counts a snapshot
adds (pending, gated, placed, succeeded, failed). A group's priority is its PriorityClass's
value; a group naming none takes its highest member's priority (so a group of one is ordered
like its pod). Built by :class:`berth.scheduler.snapshot.cache.ClusterCache`; read by the Gang
and Priority plugins and the actions.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import custom_objects, errors, keys, objects, resources, spec_defaults
from berth.api import podgroups as api_podgroups
from berth.scheduler.snapshot import ids, podconstraints, pods, queues, wire

__all__ = [
    "PodGroupInfo",
    "SubGroupInfo",
    "TopologyRequest",
    "implicit_group",
    "pod_group_info",
    "quorum_since",
    "with_members",
]


@dataclasses.dataclass(frozen=True)
class TopologyRequest:
    """Pods that must (``required``) or should share one domain of a topology ``level``."""

    level: str  # a level name the Topology plugin's args declare (checked there)
    required: bool
    field: str  # where it is written: ``spec.topology.required``


@dataclasses.dataclass(frozen=True)
class SubGroupInfo:
    """A role inside a gang: the group's pods its selector matches, and its minimum."""

    index: int
    name: str
    min_member: int
    selector: podconstraints.LabelSelector
    topology: TopologyRequest | None
    field: str  # ``spec.subGroups[1]``

    def matches(self, pod: pods.PodInfo, /) -> bool:
        """Whether ``pod`` (a member of the group) belongs to this role."""
        return self.selector.matches(pod.labels)


@dataclasses.dataclass(frozen=True)
class PodGroupInfo:
    """A PodGroup (or a pod's implicit group of one), with member counts from the snapshot."""

    key: ids.PodGroupKey
    namespace: str
    name: str
    uid: str
    min_member: int
    min_resources: resources.ResourceList
    queue: ids.QueueName
    priority_class_name: str
    priority: int  # resolved when members are counted (see the module docstring)
    schedule_timeout_seconds: int | None
    creation_timestamp: float
    phase: str
    implicit: bool = False  # a pod's group of one, not a PodGroup object
    invalid: str | None = None  # why the group can never be scheduled as written
    members: tuple[ids.PodKey, ...] = ()  # every known member, any phase, sorted
    fail_on_timeout: bool = False  # onScheduleTimeout: Fail (else Requeue)
    pending: int = 0  # waiting for a node, ungated, not being deleted
    gated: int = 0  # waiting, but held by scheduling gates
    placed: int = 0  # on a node (bound or assumed) and not finished
    succeeded: int = 0
    failed: int = 0
    topology: TopologyRequest | None = None  # spec.topology
    sub_groups: tuple[SubGroupInfo, ...] = ()  # spec.subGroups, in order
    preemption_delay: float | None = None  # spec.preemptionDelay (s); None: its queue's
    max_execution_seconds: int | None = None  # spec.maximumExecutionTimeSeconds; None: queue's
    fail_past_execution_time: bool = False  # onMaximumExecutionTime: Fail (else Requeue)
    # Set once it failed past that limit (the timelimit action's annotation): what happened
    execution_failure: str | None = None

    @property
    def title(self) -> str:
        """How people name it: ``pod NS/NAME`` for a pod's group of one, else ``pod group
        NS/NAME`` (never the internal ``NS/pod:NAME`` key)."""
        if self.implicit:
            return f"pod {self.namespace}/{self.name}"  # its name is the pod's
        return f"pod group {self.key}"

    @property
    def created(self) -> int:
        """Members that exist and count towards quorum (failed ones do not)."""
        return self.pending + self.gated + self.placed + self.succeeded

    @property
    def ready(self) -> bool:
        """``minMember`` members are placed (or already done)."""
        return self.placed + self.succeeded >= self.min_member


def _priority_of_class(
    name: str, /, *, priority_classes: collections.abc.Mapping[str, int], default_priority: int
) -> int:
    return priority_classes.get(name, default_priority) if name else default_priority


def pod_group_info(
    raw: typing.Any,
    /,
    *,
    priority_classes: collections.abc.Mapping[str, int] | None = None,
    default_priority: int = 0,
) -> PodGroupInfo:
    """Parse a PodGroup (model or wire dict); members are added by :func:`with_members`."""
    obj = typing.cast(custom_objects.PodGroup, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    spec, status = wire.part(obj.get("spec")), wire.part(obj.get("status"))
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    min_resources = resources.ResourceList()
    # Out of range: said as the API server says it (the field, the CRDs' message).
    invalid = wire.range_problem(wire.part(spec.get("minResources")), field="spec.minResources")
    try:
        if invalid is None:
            min_resources = resources.ResourceList(
                {str(k): wire.milli(v) for k, v in wire.part(spec.get("minResources")).items()}
            )
    except errors.QuantityError as exc:
        invalid = f"invalid minResources: {exc}"
    min_member = spec.get("minMember", spec_defaults.POD_GROUP_MIN_MEMBER)
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
        too_few = f"spec.minMember: {api_podgroups.MIN_MEMBER} (got {min_member!r})"
        invalid, min_member = invalid or too_few, 1
    topology, problem = _topology(spec.get("topology"), field="spec.topology")
    sub_groups, sub_problem = _sub_groups(spec.get("subGroups"))
    delay, delay_problem = queues.preemption_delay(spec)
    max_execution, execution_problem = queues.max_execution_seconds(spec)
    invalid = invalid or problem or sub_problem or delay_problem or execution_problem
    marked = wire.part(meta.get("annotations")).get(keys.INVALID_ANNOTATION)
    if marked:
        # A mirror of another scheduler's PodGroup that cannot be honoured (berth.workloads.
        # interop): the text says what is wrong with the original.
        invalid = str(marked)
    timeout = spec.get("scheduleTimeoutSeconds")
    class_name = str(spec.get("priorityClassName") or "")
    return PodGroupInfo(
        key=ids.PodGroupKey(ids.key_of(namespace, name=name)),
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        min_member=min_member,
        min_resources=min_resources,
        queue=ids.QueueName(str(spec.get("queue") or spec_defaults.POD_GROUP_QUEUE)),
        priority_class_name=class_name,
        priority=_priority_of_class(
            class_name, priority_classes=priority_classes or {}, default_priority=default_priority
        ),
        schedule_timeout_seconds=timeout if isinstance(timeout, int) and timeout > 0 else None,
        creation_timestamp=wire.parse_time(meta.get("creationTimestamp")) or 0.0,
        phase=str(status.get("phase") or "Pending"),
        invalid=invalid,
        fail_on_timeout=spec.get("onScheduleTimeout", spec_defaults.POD_GROUP_ON_SCHEDULE_TIMEOUT)
        == "Fail",
        topology=topology,
        sub_groups=sub_groups,
        preemption_delay=delay,
        max_execution_seconds=max_execution,
        fail_past_execution_time=spec.get("onMaximumExecutionTime") == "Fail",
        execution_failure=_execution_failure(meta),
    )


def _execution_failure(meta: objects.ObjectMeta, /) -> str | None:
    """What the annotation Berth puts on a group that failed past its maximum execution time
    says (``None``: no such failure). Its presence is the fact; the text is only shown."""
    found = wire.part(meta.get("annotations")).get(keys.EXECUTION_TIME_EXCEEDED_ANNOTATION)
    return None if found is None else str(found) or "ran past its maximumExecutionTimeSeconds"


def _topology(raw: typing.Any, /, *, field: str) -> tuple[TopologyRequest | None, str | None]:
    """A topology constraint (or None) and what is wrong with it, naming the field."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        return None, f"{field}: not an object"
    required, preferred = raw.get("required"), raw.get("preferred")
    if required is not None and preferred is not None:
        return None, f"{field}: set at most one of required and preferred"
    level = required if required is not None else preferred
    if level is None:
        return None, None
    which = "required" if required is not None else "preferred"
    if not isinstance(level, str) or not level:
        return None, f"{field}.{which}: not a level name"
    return TopologyRequest(
        level=level, required=required is not None, field=f"{field}.{which}"
    ), None


def _sub_groups(raw: typing.Any, /) -> tuple[tuple[SubGroupInfo, ...], str | None]:
    """``spec.subGroups`` parsed, and the first problem found, naming its field."""
    if raw is None:
        return (), None
    if not isinstance(raw, list):
        return (), "spec.subGroups: not a list"
    out: list[SubGroupInfo] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        field = f"spec.subGroups[{i}]"
        if not isinstance(item, dict):
            return (), f"{field}: not an object"
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return (), f"{field}.name: must be a non-empty string"
        if name in seen:
            return (), f"spec.subGroups: {api_podgroups.SUB_GROUP_NAMES} ({name} is listed twice)"
        seen.add(name)
        min_member = item.get("minMember", spec_defaults.SUB_GROUP_MIN_MEMBER)
        if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
            return (), f"{field}.minMember: must be at least 1, got {min_member!r}"
        selector, problems = podconstraints.parse_selector_field(
            item.get("selector"), field=f"{field}.selector"
        )
        if problems:
            return (), problems[0]
        if selector is None:
            return (), f"{field}.selector: required"
        topology, problem = _topology(item.get("topology"), field=f"{field}.topology")
        if problem is not None:
            return (), problem
        out.append(
            SubGroupInfo(
                index=i,
                name=name,
                min_member=min_member,
                selector=selector,
                topology=topology,
                field=field,
            )
        )
    return tuple(out), None


def quorum_since(
    group: PodGroupInfo, /, *, members: collections.abc.Iterable[pods.PodInfo]
) -> float | None:
    """When the group's ``minMember``-th live pod was created (or the group, if later): when
    it began waiting for room rather than for its pods (a gang's schedule timeout and its
    preemption window count from then). ``None`` while fewer exist."""
    created = sorted(p.creation_timestamp for p in members if p.phase != "Failed")
    if len(created) < group.min_member:
        return None
    return max(created[group.min_member - 1], group.creation_timestamp)


_IMPLICIT = PodGroupInfo(
    key=ids.PodGroupKey(""),
    namespace="",
    name="",
    uid="",
    min_member=1,
    min_resources=resources.ResourceList(),
    queue=ids.QueueName(keys.DEFAULT_QUEUE),
    priority_class_name="",
    priority=0,
    schedule_timeout_seconds=None,
    creation_timestamp=0.0,
    phase="Pending",
    implicit=True,
)
"""What every pod's group of one shares; :func:`implicit_group` fills in the pod's part."""


def _replaced(group: PodGroupInfo, /, **changes: typing.Any) -> PodGroupInfo:
    """``dataclasses.replace(group, **changes)`` without the frozen dataclass's ``__init__``,
    which sets each of its 27 fields through ``object.__setattr__``: the cache builds a group's
    view again on every watch event of one of its pods (a plain pod's group of one included).
    Equal to what ``dataclasses.replace`` makes (tested); the class has no ``__post_init__``
    and keeps nothing in its ``__dict__`` but its fields."""
    made = object.__new__(PodGroupInfo)
    made.__dict__.update(group.__dict__)
    made.__dict__.update(changes)
    return made


def implicit_group(pod: pods.PodInfo, /) -> PodGroupInfo:
    """The group of one formed by ``pod`` (it has a queue label but no group)."""
    return _replaced(
        _IMPLICIT,
        key=pods.implicit_group_key(pod.namespace, name=pod.name),
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        min_resources=resources.ResourceList(),
        queue=pod.queue or ids.QueueName(keys.DEFAULT_QUEUE),
        priority=pod.priority,
        creation_timestamp=pod.creation_timestamp,
    )


def with_members(
    group: PodGroupInfo,
    /,
    *,
    members: collections.abc.Iterable[pods.PodInfo],
    priority_classes: collections.abc.Mapping[str, int] | None = None,
    default_priority: int = 0,
) -> PodGroupInfo:
    """``group`` with its members listed and counted, and its priority resolved."""
    keys_: list[ids.PodKey] = []
    pending = gated = placed = succeeded = failed = 0
    top: int | None = None
    for pod in members:
        keys_.append(pod.key)
        if pod.phase == "Succeeded":
            succeeded += 1
        elif pod.phase == "Failed":
            failed += 1
        elif pod.node_name is not None:
            placed += 1
        elif pod.deleting:
            continue
        elif pod.gated:
            gated += 1
        else:
            pending += 1
        if not pod.terminal:
            top = pod.priority if top is None else max(top, pod.priority)
    if group.priority_class_name:
        priority = _priority_of_class(
            group.priority_class_name,
            priority_classes=priority_classes or {},
            default_priority=default_priority,
        )
    else:
        priority = default_priority if top is None else top
    return _replaced(
        group,
        priority=priority,
        members=tuple(sorted(keys_)),
        pending=pending,
        gated=gated,
        placed=placed,
        succeeded=succeeded,
        failed=failed,
    )
