"""``QueueInfo``: one queue as the scheduler sees it.

Owns the parsing of a Queue (a ``berth.api.queues.Queue`` or its wire dict) and the implicit
``default`` queue every cluster has. ``limit`` keeps explicit zeros (a resource capped at 0 is
not the same as a resource not capped). Built by
:class:`berth.scheduler.snapshot.cache.ClusterCache`; read by the Proportion plugin and the
actions.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import typing

from berth.api import (
    autoscaling,
    custom_objects,
    durations,
    errors,
    keys,
    resources,
    rules,
    spec_defaults,
)
from berth.scheduler.snapshot import ids, selectors, wire

__all__ = [
    "CLOSED",
    "FIFO",
    "NAMESPACE_FAIR",
    "OPEN",
    "PRIORITY_FIFO",
    "NamespaceSelector",
    "ProvisioningPolicy",
    "QueueInfo",
    "default_queue",
    "namespace_selector",
    "max_execution_seconds",
    "preemption_delay",
    "provisioning_policy",
    "queue_info",
]

OPEN = "Open"
CLOSED = "Closed"
PRIORITY_FIFO = "PriorityFIFO"
FIFO = "FIFO"
NAMESPACE_FAIR = "NamespaceFair"
_JOB_ORDERS = (PRIORITY_FIFO, FIFO, NAMESPACE_FAIR)


_LABEL_OPERATORS = frozenset(
    {selectors.IN, selectors.NOT_IN, selectors.EXISTS, selectors.DOES_NOT_EXIST}
)


@dataclasses.dataclass(frozen=True)
class NamespaceSelector:
    """Which namespaces may use a queue (a label selector over their Namespace's labels)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[selectors.Requirement, ...] = ()

    def admits(self, labels: collections.abc.Mapping[str, str], /) -> bool:
        """Whether a namespace with ``labels`` may use the queue."""
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            req.operator in _LABEL_OPERATORS
            and selectors.requirement_matches(req, value=labels.get(req.key))
            for req in self.match_expressions
        )

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for req in self.match_expressions:
            values = f" ({', '.join(req.values)})" if req.values else ""
            parts.append(f"{req.key} {req.operator}{values}")
        return ", ".join(parts) or "everything"


def namespace_selector(raw: typing.Any, /) -> NamespaceSelector | None:
    """A queue's ``spec.namespaceSelector``; ``None`` when absent (every namespace)."""
    if not isinstance(raw, collections.abc.Mapping):
        return None
    labels = raw.get("matchLabels")
    pairs = (
        tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        if isinstance(labels, collections.abc.Mapping)
        else ()
    )
    return NamespaceSelector(pairs, selectors.parse_requirements(raw.get("matchExpressions")))


@dataclasses.dataclass(frozen=True)
class ProvisioningPolicy:
    """A queue's ``spec.autoscaling.provisioningRequest``: the class (and its parameters) of
    the ProvisioningRequest its gangs ask for their nodes with."""

    class_name: str
    parameters: tuple[tuple[str, str], ...] = ()


_CLASS_NAME = re.compile(autoscaling.CLASS_NAME_PATTERN)


def provisioning_policy(
    spec: custom_objects.QueueSpec, /
) -> tuple[ProvisioningPolicy | None, str | None]:
    """A queue's ``spec.autoscaling.provisioningRequest`` (None: unset), and what is wrong
    with it, naming the field (the queue then takes nothing, saying so)."""
    raw = wire.part(wire.part(spec.get("autoscaling")).get("provisioningRequest"))
    if not raw:
        return None, None
    field = "spec.autoscaling.provisioningRequest"
    name = raw.get("provisioningClassName")
    if not isinstance(name, str) or len(name) > 253 or not _CLASS_NAME.match(name):
        return None, f"{field}.provisioningClassName: {autoscaling.CLASS_NAME_MESSAGE}: {name!r}"
    parameters = wire.part(raw.get("parameters"))
    if len(parameters) > autoscaling.MAX_PARAMETERS or any(
        len(str(v)) > autoscaling.MAX_PARAMETER_LENGTH for v in parameters.values()
    ):
        return None, (
            f"{field}.parameters: at most {autoscaling.MAX_PARAMETERS}, each at most "
            f"{autoscaling.MAX_PARAMETER_LENGTH} characters"
        )
    return (
        ProvisioningPolicy(
            class_name=name,
            parameters=tuple(sorted((str(k), str(v)) for k, v in parameters.items())),
        ),
        None,
    )


@dataclasses.dataclass(frozen=True)
class QueueInfo:
    """A queue: its place in the tree, quota and share."""

    name: ids.QueueName
    uid: str
    parent: ids.QueueName | None
    guaranteed: resources.ResourceList
    limit: collections.abc.Mapping[str, int] | None = dataclasses.field(hash=False)  # None: none
    weight: int = spec_defaults.QUEUE_WEIGHT
    priority: int = spec_defaults.QUEUE_PRIORITY
    reclaimable: bool = spec_defaults.QUEUE_RECLAIMABLE
    state: str = spec_defaults.QUEUE_STATE
    creation_timestamp: float = 0.0
    implicit: bool = False  # the ``default`` queue nobody created
    invalid: str | None = None  # a malformed quota: the queue admits nothing
    min_runtime_seconds: int | None = None  # protection from fair-share reclaim; None: profile's
    expected_runtime_seconds: int | None = None  # for pods declaring none (EASY backfill)
    job_order: str = spec_defaults.QUEUE_JOB_ORDER  # one of PriorityFIFO, FIFO, NamespaceFair
    preempt_across_queues: bool = (
        spec_defaults.QUEUE_PREEMPT_ACROSS_QUEUES
    )  # its jobs may preempt other queues above their share
    namespaces: NamespaceSelector | None = None  # who may use it; None: every namespace
    preemption_delay: float | None = None  # seconds its work waits for nodes before evicting
    max_execution_seconds: int | None = None  # maximumExecutionTimeSeconds; None: a parent's
    provisioning: ProvisioningPolicy | None = None  # its gangs ask with a ProvisioningRequest
    reservation_buffers: bool = False  # its Reservations ask with a CapacityBuffer

    @property
    def open(self) -> bool:
        """Whether the queue admits new work."""
        return self.state == OPEN


def _quantities(raw: collections.abc.Mapping[str, str], /, *, field: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, text in raw.items():
        try:
            value = wire.milli(text)
        except errors.QuantityError as exc:
            raise errors.QuantityError(f"spec.{field}.{name}: {exc}") from None
        if value < 0:
            raise errors.QuantityError(f"spec.{field}.{name}: negative quantity {text!r}")
        out[str(name)] = value
    return out


def queue_info(raw: typing.Any, /) -> QueueInfo:
    """Parse a Queue (model or wire dict)."""
    obj = typing.cast(custom_objects.Queue, wire.as_raw(raw))
    meta, spec = wire.part(obj.get("metadata")), wire.part(obj.get("spec"))
    invalid: str | None = None
    guaranteed: dict[str, int] = {}
    limit: dict[str, int] | None = None
    try:
        guaranteed = _quantities(wire.part(spec.get("guaranteed")), field="guaranteed")
        if isinstance(spec.get("limit"), collections.abc.Mapping):
            limit = _quantities(wire.part(spec.get("limit")), field="limit")
    except errors.QuantityError as exc:
        # Out of range: said as the API server says it (the field, the CRDs' message).
        found = wire.range_problem(wire.part(spec.get("guaranteed")), field="spec.guaranteed")
        found = found or wire.range_problem(wire.part(spec.get("limit")), field="spec.limit")
        invalid, guaranteed, limit = f"invalid quota: {found or exc}", {}, {}
    delay, problem = preemption_delay(spec)
    invalid = invalid or problem
    provisioning, problem = provisioning_policy(spec)
    invalid = invalid or problem
    max_execution, problem = max_execution_seconds(spec)
    invalid = invalid or problem
    weight = spec.get("weight", spec_defaults.QUEUE_WEIGHT)
    priority = spec.get("priority", spec_defaults.QUEUE_PRIORITY)
    parent = spec.get("parent")
    min_runtime = spec.get("reclaimMinRuntimeSeconds")
    job_order = spec.get("jobOrder")
    return QueueInfo(
        name=ids.QueueName(str(meta.get("name") or "")),
        uid=str(meta.get("uid") or ""),
        parent=ids.QueueName(str(parent)) if parent else None,
        guaranteed=resources.ResourceList(guaranteed),
        limit=limit,
        weight=weight if isinstance(weight, int) and weight >= 1 else 1,
        priority=priority if isinstance(priority, int) else 0,
        reclaimable=spec.get("reclaimable", spec_defaults.QUEUE_RECLAIMABLE) is not False,
        state=str(spec.get("state") or spec_defaults.QUEUE_STATE),
        creation_timestamp=wire.parse_time(meta.get("creationTimestamp")) or 0.0,
        invalid=invalid,
        min_runtime_seconds=(
            min_runtime
            if isinstance(min_runtime, int)
            and not isinstance(min_runtime, bool)
            and min_runtime >= 0
            else None
        ),
        expected_runtime_seconds=_positive_int(spec.get("defaultExpectedRuntimeSeconds")),
        job_order=job_order if job_order in _JOB_ORDERS else spec_defaults.QUEUE_JOB_ORDER,
        preempt_across_queues=spec.get(
            "preemptAcrossQueues", spec_defaults.QUEUE_PREEMPT_ACROSS_QUEUES
        )
        is True,
        namespaces=namespace_selector(spec.get("namespaceSelector")),
        preemption_delay=delay,
        max_execution_seconds=max_execution,
        provisioning=provisioning,
        reservation_buffers=wire.part(spec.get("autoscaling")).get("reservationBuffers") is True,
    )


def preemption_delay(
    spec: custom_objects.QueueSpec | custom_objects.PodGroupSpec, /
) -> tuple[float | None, str | None]:
    """A Queue's or PodGroup's ``spec.preemptionDelay`` in seconds (None: unset), and what
    is wrong with it, naming the field (the object then waits, saying so)."""
    raw = spec.get("preemptionDelay")
    if raw is None:
        return None, None
    try:
        return durations.parse_duration(raw).seconds, None
    except errors.DurationError as exc:
        # As the API server says it (the CRDs' rule), then what exactly is wrong.
        return None, f"spec.preemptionDelay: preemptionDelay {rules.DURATION_FORM} ({exc})"


def max_execution_seconds(
    spec: custom_objects.QueueSpec | custom_objects.PodGroupSpec, /
) -> tuple[int | None, str | None]:
    """A Queue's or PodGroup's ``spec.maximumExecutionTimeSeconds`` (None: unset), and what
    is wrong with it, naming the field, in the API server's words (the object is then
    invalid: it waits, saying so, rather than run without the limit its owner asked for)."""
    raw = spec.get("maximumExecutionTimeSeconds")
    if raw is None:
        return None, None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        return None, (
            f"spec.maximumExecutionTimeSeconds: Invalid value: {raw!r}: should be greater "
            "than or equal to 1"
        )
    return raw, None


def default_queue() -> QueueInfo:
    """The implicit ``default`` queue: no quota, no limit, weight 1, open."""
    return QueueInfo(
        name=ids.QueueName(keys.DEFAULT_QUEUE),
        uid="",
        parent=None,
        guaranteed=resources.ResourceList(),
        limit=None,
        implicit=True,
    )


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
