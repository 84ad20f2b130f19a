"""Server-side printing: ``meta.k8s.io/v1`` Table objects for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints whatever
columns the server sends. CRDs get their ``additionalPrinterColumns`` (JSONPath via
:mod:`berth.emulator.jsonpaths`, ``date`` columns rendered as ages like the API server's
``HumanDuration``); pods, nodes, Jobs and a few other built-ins get kube-apiserver's columns;
everything else gets NAME and AGE. Rows carry the object as ``PartialObjectMetadata`` unless
``includeObject=Object`` (or ``None``) is asked for.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import typing

from berth.api import apiextensions, objects
from berth.emulator import jsonpaths, resources

__all__ = ["Column", "columns_for", "human_duration", "partial_object_metadata", "render"]

Object = objects.KubeObject


@dataclasses.dataclass(frozen=True)
class Column:
    """One printer column: its definition and how to compute a cell."""

    name: str
    type: str  # string, integer, number, boolean, date
    cell: typing.Callable[[Object, float], objects.TableCell]
    description: str = ""
    format: str = ""
    priority: int = 0  # 1 means "only with -o wide"

    def definition(self) -> objects.TableColumnDefinition:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def human_duration(seconds: float) -> str:
    """The API server's ``duration.HumanDuration``: ``45s``, ``3m20s``, ``5h10m``, ``12d``."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(timestamp: typing.Any, now: float) -> str | None:
    if not isinstance(timestamp, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return human_duration(now - when.timestamp())


def _meta(obj: Object) -> objects.ObjectMeta:
    return obj.get("metadata") or {}


def _get(obj: typing.Any, *path: str) -> typing.Any:
    for part in path:
        if not isinstance(obj, typing.Mapping):
            return None
        obj = obj.get(part)
    return obj


_NAME = Column(
    "Name",
    "string",
    lambda obj, now: _meta(obj).get("name", ""),
    format="name",
    description="Name must be unique within a namespace.",
)
_AGE = Column(
    "Age",
    "string",
    lambda obj, now: _age(_meta(obj).get("creationTimestamp"), now),
    description="CreationTimestamp is a timestamp representing the server time when this object "
    "was created.",
)


# ----- pods -----------------------------------------------------------------------------------


def _pod_ready(obj: Object, now: float) -> str:
    containers = _get(obj, "spec", "containers") or []
    statuses = _get(obj, "status", "containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{len(containers)}"


def _pod_status(obj: Object, now: float) -> str:
    meta = _meta(obj)
    if meta.get("deletionTimestamp"):
        return "Terminating"
    status = _get(obj, "status") or {}
    if _get(obj, "spec", "schedulingGates"):
        return "SchedulingGated"
    for container in status.get("containerStatuses") or ():
        waiting = _get(container, "state", "waiting", "reason")
        if waiting:
            return str(waiting)
        terminated = _get(container, "state", "terminated", "reason")
        if terminated and status.get("phase") not in ("Succeeded", "Failed"):
            return str(terminated)
    if status.get("reason"):
        return str(status["reason"])
    phase = str(status.get("phase") or "Pending")
    return {"Succeeded": "Completed", "Failed": "Error"}.get(phase, phase)


def _pod_restarts(obj: Object, now: float) -> int:
    statuses = _get(obj, "status", "containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


_POD_COLUMNS = (
    _NAME,
    Column("Ready", "string", _pod_ready, description="The aggregate readiness state."),
    Column("Status", "string", _pod_status, description="The aggregate status of the containers."),
    Column("Restarts", "string", _pod_restarts, description="The number of container restarts."),
    _AGE,
    Column("IP", "string", lambda o, n: _get(o, "status", "podIP") or "<none>", priority=1),
    Column("Node", "string", lambda o, n: _get(o, "spec", "nodeName") or "<none>", priority=1),
    Column(
        "Nominated Node",
        "string",
        lambda o, n: _get(o, "status", "nominatedNodeName") or "<none>",
        priority=1,
    ),
    Column(
        "Readiness Gates",
        "string",
        lambda o, n: (
            str(len(_get(o, "spec", "readinessGates") or [])) + "/0"
            if _get(o, "spec", "readinessGates")
            else "<none>"
        ),
        priority=1,
    ),
)


# ----- nodes ----------------------------------------------------------------------------------


def _node_status(obj: Object, now: float) -> str:
    ready = "Unknown"
    for condition in _get(obj, "status", "conditions") or ():
        if condition.get("type") == "Ready":
            ready = "Ready" if condition.get("status") == "True" else "NotReady"
    if _get(obj, "spec", "unschedulable"):
        return f"{ready},SchedulingDisabled"
    return ready


def _node_roles(obj: Object, now: float) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = _meta(obj).get("labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _address(kind: str) -> typing.Callable[[Object, float], str]:
    def cell(obj: Object, now: float) -> str:
        for address in _get(obj, "status", "addresses") or ():
            if address.get("type") == kind:
                return str(address.get("address"))
        return "<none>"

    return cell


def _node_info(field: str) -> typing.Callable[[Object, float], str]:
    return lambda obj, now: str(_get(obj, "status", "nodeInfo", field) or "<unknown>")


_NODE_COLUMNS = (
    _NAME,
    Column("Status", "string", _node_status, description="The status of the node"),
    Column("Roles", "string", _node_roles, description="The roles of the node"),
    _AGE,
    Column("Version", "string", _node_info("kubeletVersion"), description="Kubelet Version"),
    Column("Internal-IP", "string", _address("InternalIP"), priority=1),
    Column("External-IP", "string", _address("ExternalIP"), priority=1),
    Column("OS-Image", "string", _node_info("osImage"), priority=1),
    Column("Kernel-Version", "string", _node_info("kernelVersion"), priority=1),
    Column("Container-Runtime", "string", _node_info("containerRuntimeVersion"), priority=1),
)


def _spec_or_na(field: str) -> typing.Callable[[Object, float], str]:
    def cell(obj: Object, now: float) -> str:
        value = _get(obj, "spec", field)
        return "N/A" if value is None else str(value)

    return cell


def _deployment_ready(obj: Object, now: float) -> str:
    ready = _get(obj, "status", "readyReplicas") or 0
    return f"{ready}/{_get(obj, 'spec', 'replicas') or 0}"


# ----- jobs -----------------------------------------------------------------------------------


def _has_condition(obj: Object, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in _get(obj, "status", "conditions") or ()
        if isinstance(c, typing.Mapping)
    )


def _job_status(obj: Object, now: float) -> str:
    for kind, shown in (("Complete", "Complete"), ("Failed", "Failed")):
        if _has_condition(obj, kind):
            return shown
    if _meta(obj).get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget"):
        if _has_condition(obj, kind):
            return kind
    return "Running"


def _job_completions(obj: Object, now: float) -> str:
    succeeded = int(_get(obj, "status", "succeeded") or 0)
    completions = _get(obj, "spec", "completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = int(_get(obj, "spec", "parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _timestamp(value: typing.Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _job_duration(obj: Object, now: float) -> str:
    started = _timestamp(_get(obj, "status", "startTime"))
    if started is None:
        return ""
    completed = _timestamp(_get(obj, "status", "completionTime"))
    return human_duration((completed if completed is not None else now) - started)


def _template_containers(obj: Object, field: str) -> str:
    """``field`` (name, image) of each container of a Job's pod template, comma-separated."""
    containers = _get(obj, "spec", "template", "spec", "containers") or []
    return ",".join(str(c.get(field, "")) for c in containers if isinstance(c, typing.Mapping))


def _label_selector(selector: typing.Any) -> str:
    """``metav1.FormatLabelSelector``: ``k=v,k2 in (a,b)``, keys sorted; ``<none>`` if empty."""
    if not isinstance(selector, typing.Mapping):
        return "<none>"
    parts: list[tuple[str, str]] = [
        (str(k), f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or ():
        key, operator = str(expression.get("key")), expression.get("operator")
        values = ",".join(sorted(str(v) for v in expression.get("values") or ()))
        text = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(str(operator), "<error>")
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts)) or "<none>"


_JOB_COLUMNS = (
    _NAME,
    Column("Status", "string", _job_status, description="Status of the job."),
    Column(
        "Completions",
        "string",
        _job_completions,
        description="The number of pods which reached phase Succeeded.",
    ),
    Column("Duration", "string", _job_duration, description="Time required to complete the job."),
    _AGE,
    Column(
        "Containers",
        "string",
        lambda o, n: _template_containers(o, "name"),
        priority=1,
        description="Names of each container in the template.",
    ),
    Column(
        "Images",
        "string",
        lambda o, n: _template_containers(o, "image"),
        priority=1,
        description="Images referenced by each container in the template.",
    ),
    Column(
        "Selector",
        "string",
        lambda o, n: _label_selector(_get(o, "spec", "selector")),
        priority=1,
        description="A label query over pods that should match the pod count.",
    ),
)


_BUILTIN_COLUMNS: dict[resources.StorageKey, tuple[Column, ...]] = {
    ("batch", "jobs"): _JOB_COLUMNS,
    ("", "pods"): _POD_COLUMNS,
    ("", "nodes"): _NODE_COLUMNS,
    ("", "namespaces"): (
        _NAME,
        Column("Status", "string", lambda o, n: _get(o, "status", "phase") or "Active"),
        _AGE,
    ),
    ("", "configmaps"): (
        _NAME,
        Column(
            "Data",
            "integer",
            lambda o, n: len(_get(o, "data") or {}) + len(_get(o, "binaryData") or {}),
        ),
        _AGE,
    ),
    ("", "secrets"): (
        _NAME,
        Column("Type", "string", lambda o, n: _get(o, "type") or "Opaque"),
        Column("Data", "integer", lambda o, n: len(_get(o, "data") or {})),
        _AGE,
    ),
    ("", "events"): (
        Column(
            "Last Seen",
            "string",
            lambda o, n: _age(o.get("lastTimestamp") or o.get("eventTime"), n),
        ),
        Column("Type", "string", lambda o, n: _get(o, "type") or ""),
        Column("Reason", "string", lambda o, n: _get(o, "reason") or ""),
        Column(
            "Object",
            "string",
            lambda o, n: (
                f"{str(_get(o, 'involvedObject', 'kind') or '').lower()}/"
                f"{_get(o, 'involvedObject', 'name') or ''}"
            ),
        ),
        Column("Message", "string", lambda o, n: _get(o, "message") or ""),
        dataclasses.replace(_NAME, priority=1),
    ),
    ("apps", "deployments"): (
        _NAME,
        Column("Ready", "string", _deployment_ready),
        Column("Up-to-date", "integer", lambda o, n: _get(o, "status", "updatedReplicas") or 0),
        Column("Available", "integer", lambda o, n: _get(o, "status", "availableReplicas") or 0),
        _AGE,
    ),
    ("coordination.k8s.io", "leases"): (
        _NAME,
        Column("Holder", "string", lambda o, n: _get(o, "spec", "holderIdentity") or ""),
        _AGE,
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        _NAME,
        Column("Value", "integer", lambda o, n: _get(o, "value") or 0),
        Column("Global-Default", "boolean", lambda o, n: bool(_get(o, "globalDefault"))),
        _AGE,
        Column(
            "PreemptionPolicy",
            "string",
            lambda o, n: _get(o, "preemptionPolicy") or "PreemptLowerPriority",
        ),
    ),
    ("policy", "poddisruptionbudgets"): (
        _NAME,
        Column("Min Available", "string", _spec_or_na("minAvailable")),
        Column("Max Unavailable", "string", _spec_or_na("maxUnavailable")),
        Column(
            "Allowed Disruptions",
            "integer",
            lambda o, n: _get(o, "status", "disruptionsAllowed") or 0,
        ),
        _AGE,
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        _NAME,
        Column("Created At", "date", lambda o, n: _meta(o).get("creationTimestamp")),
    ),
}


# ----- CRD printer columns --------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _compiled(path: str) -> tuple[typing.Any, ...]:
    try:
        return jsonpaths.compile_path(path)
    except jsonpaths.JsonPathError:
        return ()


def _json_cell(kind: str, value: object, now: float) -> objects.TableCell:
    if kind == "date":
        return _age(value, now)
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _custom_column(spec: apiextensions.CustomResourceColumnDefinition) -> Column:
    path, kind = str(spec.get("jsonPath", "")), str(spec.get("type", "string"))

    def cell(obj: Object, now: float) -> objects.TableCell:
        steps = _compiled(path)
        found = jsonpaths.find(obj, steps) if steps else []
        return _json_cell(kind, found[0], now) if found else None

    return Column(
        str(spec.get("name", "")),
        "string" if kind == "date" else kind,
        cell,
        description=str(spec.get("description", "")),
        format=str(spec.get("format", "")),
        priority=int(spec.get("priority", 0) or 0),
    )


def columns_for(resource: resources.Resource) -> tuple[Column, ...]:
    """The printer columns of ``resource``."""
    if resource.custom:
        age: apiextensions.CustomResourceColumnDefinition = {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
        }
        specs = resource.printer_columns or (age,)
        return (_NAME, *(_custom_column(s) for s in specs))
    return _BUILTIN_COLUMNS.get(resource.key, (_NAME, _AGE))


def partial_object_metadata(obj: Object) -> Object:
    """``obj`` reduced to its metadata, as ``meta.k8s.io/v1`` PartialObjectMetadata."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": _meta(obj)}


def _row_object(obj: Object, include: str) -> Object | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return partial_object_metadata(obj)


def render(
    resource: resources.Resource,
    items: typing.Sequence[Object],
    *,
    now: float,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    headers: bool = True,
) -> objects.Table:
    """A ``Table`` of ``items`` with ``resource``'s columns."""
    columns = columns_for(resource)
    metadata: objects.ListMeta = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    table: objects.Table = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [c.definition() for c in columns] if headers else None,
        "rows": [
            {
                "cells": [c.cell(obj, now) for c in columns],
                "object": _row_object(obj, include_object),
            }
            for obj in items
        ],
    }
    return table
