"""Pods: the API server's pod strategy, and the ``binding`` and ``eviction`` subresources.

:class:`PodStrategy` is what real clients notice about pods on write: kube-apiserver's defaults
(scheduler name, restart policy, ...), priority admission (the PriorityClass's value; an
unknown class is 403), the initial phase and QoS class, ``PodScheduled=False/SchedulingGated``
on a pod created with scheduling gates, and a spec that is immutable but for the
fields Kubernetes allows (a gated pod's scheduling directives may only be narrowed, KEP-3838).

:func:`bind` and :func:`evict` are the pod subresources a scheduler uses: a binding sets
``spec.nodeName`` once (409 if the pod is bound, gated or being deleted) and marks it
PodScheduled; an eviction deletes the pod unless a PodDisruptionBudget forbids it (429).
:class:`~berth.emulator.rest.Api` registers the strategy and serves both as ``Api.bind`` and
``Api.evict``, which the handlers and in-process callers use.
"""

from __future__ import annotations

import copy
import typing

from berth.api import core, objects, policy, quantities
from berth.api import errors as api_errors
from berth.emulator import errors, resources, selectors, strategies

if typing.TYPE_CHECKING:
    from berth.emulator import rest

__all__ = ["PODS", "SCHEDULING_GATED", "PodStrategy", "as_pod", "bind", "evict"]

PODS: resources.StorageKey = ("", "pods")
SCHEDULING_GATED: core.PodCondition = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}
"""The condition kube-apiserver gives a pod created with scheduling gates."""
_BUDGETS: resources.StorageKey = ("policy", "poddisruptionbudgets")


# Pod spec fields Kubernetes lets an update change (everything else is immutable).
_POD_MUTABLE = ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations")
_POD_MUTABLE_WHILE_GATED = ("nodeSelector", "affinity", "schedulingGates")


def as_pod(obj: objects.KubeObject) -> core.Pod:
    """A stored object of the pods resource as the Pod it is (the pod strategy has checked and
    defaulted every pod written)."""
    return typing.cast(core.Pod, obj)


def _pod_spec_core(spec: core.PodSpec, *, gated: bool) -> dict[str, object]:
    """The spec's fields an update may not change, to compare old with new."""
    fixed = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    fixed.pop("schedulingGates", None)
    if gated:
        for field in _POD_MUTABLE_WHILE_GATED:
            fixed.pop(field, None)
    for field in ("containers", "initContainers"):
        containers = fixed.get(field)
        if isinstance(containers, list):
            fixed[field] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                for c in containers
            ]
    return fixed


def _required_terms(spec: core.PodSpec) -> list[core.NodeSelectorTerm]:
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return [t if isinstance(t, dict) else {} for t in terms or ()]


def _narrowed_only(spec: core.PodSpec, old_spec: core.PodSpec) -> list[errors.Cause]:
    """KEP-3838: a gated pod's scheduling directives may only be narrowed — ``nodeSelector``
    entries added, requirements added to existing required node-affinity terms (or terms set
    where there were none); pod (anti-)affinity not changed at all."""
    causes: list[errors.Cause] = []
    selector, old_selector = spec.get("nodeSelector") or {}, old_spec.get("nodeSelector") or {}
    if any(selector.get(k) != v for k, v in old_selector.items()):
        causes.append(
            errors.Cause(
                "spec.nodeSelector",
                "Invalid value: only additions are allowed (no mutations or deletions)",
            )
        )
    old_terms, terms = _required_terms(old_spec), _required_terms(spec)
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if old_terms and (
        len(terms) != len(old_terms)
        or any(
            any(
                r not in (new.get("matchExpressions") or ())
                for r in old.get("matchExpressions") or ()
            )
            or any(r not in (new.get("matchFields") or ()) for r in old.get("matchFields") or ())
            for old, new in zip(old_terms, terms, strict=True)
        )
    ):
        causes.append(
            errors.Cause(
                path,
                "Invalid value: only additions to NodeSelectorRequirements are allowed "
                "(no mutations or deletions)",
            )
        )
    affinity, old_affinity = spec.get("affinity") or {}, old_spec.get("affinity") or {}
    for field in ("podAffinity", "podAntiAffinity"):
        if affinity.get(field) != old_affinity.get(field):
            causes.append(errors.Cause(f"spec.affinity.{field}", "Forbidden: field is immutable"))
    return causes


class PodStrategy(strategies.Strategy):
    """Pods: kube-apiserver's defaults, priority admission and spec immutability."""

    def prepare_create(
        self, api: rest.Api, resource: resources.Resource, obj: objects.KubeObject
    ) -> None:
        pod = as_pod(obj)
        spec = pod.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", "default")
        for container in spec.get("containers") or ():
            if isinstance(container, dict):
                container.setdefault("imagePullPolicy", "IfNotPresent")
                container.setdefault("terminationMessagePath", "/dev/termination-log")
                container.setdefault("resources", {})
        priority_class = api.priority_class(spec.get("priorityClassName"))
        if spec.get("priorityClassName") and priority_class is None:
            raise errors.forbidden(
                f'pods "{pod["metadata"].get("name") or pod["metadata"].get("generateName")}" is '
                f"forbidden: no PriorityClass with name {spec['priorityClassName']} was found",
                name=str(pod["metadata"].get("name", "")),
                plural="pods",
            )
        if priority_class is not None:
            spec["priorityClassName"] = priority_class["metadata"]["name"]
            spec["priority"] = priority_class.get("value", 0)
            spec.setdefault(
                "preemptionPolicy", priority_class.get("preemptionPolicy", "PreemptLowerPriority")
            )
        else:
            spec.setdefault("priority", 0)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
        if spec.get("nodeName"):
            pod["status"]["conditions"] = []
        elif spec.get("schedulingGates"):
            # As kube-apiserver's pod strategy says so at creation (no scheduler will).
            pod["status"]["conditions"] = [SCHEDULING_GATED.copy()]

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: objects.KubeObject,
        *,
        old: objects.KubeObject | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        spec = as_pod(obj).get("spec") or {}
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append(errors.required("spec.containers"))
        else:
            for i, container in enumerate(containers):
                if not isinstance(container, dict) or not container.get("name"):
                    causes.append(errors.required(f"spec.containers[{i}].name"))
                elif not container.get("image"):
                    causes.append(errors.required(f"spec.containers[{i}].image"))
        for field, listed in (
            ("containers", spec.get("containers")),
            ("initContainers", spec.get("initContainers")),
        ):
            for i, container in enumerate(listed or ()):
                if isinstance(container, dict):
                    causes.extend(_resource_causes(container, path=f"spec.{field}[{i}]"))
        if old is not None:
            old_spec = as_pod(old).get("spec") or {}
            gated = bool(old_spec.get("schedulingGates"))
            if _pod_spec_core(spec, gated=gated) != _pod_spec_core(old_spec, gated=gated):
                causes.append(
                    errors.Cause(
                        "spec",
                        "Forbidden: pod updates may not change fields "
                        "other than `spec.containers[*].image`, `spec.initContainers[*]."
                        "image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                        "additions to existing tolerations), `spec."
                        "terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                        "previously negative)",
                        "FieldValueForbidden",
                    )
                )
            if gated:
                causes.extend(_narrowed_only(spec, old_spec))
            new_gates = {g.get("name") for g in spec.get("schedulingGates") or ()}
            old_gates = {g.get("name") for g in old_spec.get("schedulingGates") or ()}
            if not new_gates <= old_gates:
                causes.append(
                    errors.Cause(
                        "spec.schedulingGates",
                        "Forbidden: only deletion is allowed, but found new scheduling gate",
                        "FieldValueForbidden",
                    )
                )
        return causes


def _resource_causes(container: core.Container, *, path: str) -> list[errors.Cause]:
    """``resources.requests``/``limits`` must be maps of quantities (the API server's typed
    decoding refuses anything else; a list here once stopped every simulated kubelet)."""
    resources_ = container.get("resources")
    if resources_ is None:
        return []
    if not isinstance(resources_, dict):
        return [errors.Cause(f"{path}.resources", "Invalid value: must be an object")]
    causes: list[errors.Cause] = []
    for kind in ("requests", "limits"):
        listed = resources_.get(kind)
        if listed is None:
            continue
        where = f"{path}.resources.{kind}"
        if not isinstance(listed, dict):
            causes.append(errors.Cause(where, "Invalid value: must be a map of quantities"))
            continue
        for name, value in listed.items():
            try:
                quantities.parse_quantity(value)
            except api_errors.QuantityError as exc:
                causes.append(errors.Cause(f"{where}[{name}]", f"Invalid value: {exc}"))
    return causes


def _quantities(
    container: core.Container, kind: typing.Literal["requests", "limits"]
) -> dict[str, str]:
    """The container's ``resources.requests`` or ``limits``; malformed shapes are validate()'s
    to refuse (422), so here they count as absent."""
    res = container.get("resources")
    listed = res.get(kind) if isinstance(res, dict) else None
    return listed if isinstance(listed, dict) else {}


def _qos_class(spec: core.PodSpec) -> str:
    requests_seen = limits_seen = False
    guaranteed = True
    for container in spec.get("containers") or ():
        if not isinstance(container, dict):
            continue
        requests, limits = _quantities(container, "requests"), _quantities(container, "limits")
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# ----- subresources ---------------------------------------------------------------------------


def bind(api: rest.Api, *, namespace: str, name: str, binding: object) -> objects.Status:
    """``pods/binding``: set ``spec.nodeName`` once (409 if the pod is already bound).
    ``binding`` is the request's JSON (a Binding once checked here)."""
    if not isinstance(binding, dict):
        raise errors.bad_request("a Binding must be a JSON object")
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not node:
        raise errors.invalid(
            name, group="", kind="Binding", causes=[errors.required("target.name")]
        )
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(
            name,
            group="",
            kind="Binding",
            causes=[
                errors.Cause(
                    "target.kind",
                    f'Invalid value: "{target.get("kind")}": must be empty or "Node"',
                )
            ],
        )
    pods = api.resource("v1", "pods")
    pod = as_pod(api.get(pods, namespace=namespace, name=name))
    meta = binding.get("metadata") or {}
    why = ""
    if meta.get("uid") and meta["uid"] != pod["metadata"].get("uid"):
        why = (
            f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
            f"{pod['metadata'].get('uid')}"
        )
    elif pod["metadata"].get("deletionTimestamp"):
        why = f"pod {name} is being deleted, cannot be assigned to a host"
    elif (pod.get("spec") or {}).get("nodeName"):
        why = f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
    elif (pod.get("spec") or {}).get("schedulingGates"):
        why = f"pod {name} has non-empty .spec.schedulingGates"
    if why:
        raise errors.conflict(name, group="", plural="pods/binding", why=why)
    obj = copy.deepcopy(pod)
    obj["spec"]["nodeName"] = str(node)
    if meta.get("annotations"):
        obj["metadata"].setdefault("annotations", {}).update(meta["annotations"])
    _set_condition(obj, "PodScheduled", "True", now=api.timestamp())
    # A binding is a privileged write: spec.nodeName is otherwise immutable.
    api.store(pods, obj, old=pod)
    return errors.success(code=201)


def _set_condition(pod: core.Pod, kind: str, status: str, *, now: str) -> None:
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    entry: core.PodCondition = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    for i, condition in enumerate(conditions):
        if condition.get("type") == kind:
            if condition.get("status") == status:
                entry.pop("lastTransitionTime")
                if "lastTransitionTime" in condition:
                    entry["lastTransitionTime"] = condition["lastTransitionTime"]
            conditions[i] = entry
            return
    conditions.append(entry)


def evict(api: rest.Api, *, namespace: str, name: str, eviction: object) -> objects.Status:
    """``pods/eviction``: delete the pod unless a PodDisruptionBudget forbids it (429).
    ``eviction`` is the request's JSON (an Eviction once checked here)."""
    if not isinstance(eviction, dict):
        raise errors.bad_request("an Eviction must be a JSON object")
    pods = api.resource("v1", "pods")
    pod = as_pod(api.get(pods, namespace=namespace, name=name))
    if pod["metadata"].get("deletionTimestamp"):
        return errors.success(code=201)
    if _healthy(pod):
        # The resource is PodDisruptionBudgets: what storage holds under it is one.
        budgets = typing.cast(
            list[policy.PodDisruptionBudget], api.storage.list(_BUDGETS, namespace)
        )
        for budget in budgets:
            selector = (budget.get("spec") or {}).get("selector")
            if not selectors.matches_label_selector_object(selector, pod["metadata"].get("labels")):
                continue
            allowed, needed, healthy = _disruptions_allowed(api, budget, namespace)
            if allowed <= 0:
                raise errors.too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    causes=[
                        errors.Cause(
                            "",
                            f"The disruption budget {budget['metadata']['name']} "
                            f"needs {needed} healthy pods and has {healthy} currently",
                            "DisruptionBudget",
                        )
                    ],
                )
    # The Eviction's DeleteOptions: Api.delete reads their fields.
    options = typing.cast(core.DeleteOptions, eviction.get("deleteOptions") or {})
    api.delete(pods, namespace=namespace, name=name, options=options)
    return errors.success(code=201)


def _disruptions_allowed(
    api: rest.Api, budget: policy.PodDisruptionBudget, namespace: str
) -> tuple[int, int, int]:
    """``(allowed, needed, healthy)``: how many more of the budget's pods may go, and why."""
    spec = budget.get("spec") or {}
    matching = [
        as_pod(p)
        for p in api.storage.list(PODS, namespace)
        if selectors.matches_label_selector_object(
            spec.get("selector"), p["metadata"].get("labels")
        )
    ]
    expected = len(matching)
    healthy = sum(1 for p in matching if _healthy(p))
    if spec.get("minAvailable") is not None:
        needed = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        needed = expected - _scaled(spec["maxUnavailable"], expected)
    else:
        needed = expected
    return healthy - needed, needed, healthy


def _healthy(pod: core.Pod) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return True


def _scaled(value: int | str, total: int) -> int:
    """An int-or-percent of ``total``; percentages round up, as the disruption controller's."""
    if isinstance(value, str) and value.endswith("%"):
        return -(-total * int(value[:-1]) // 100)
    return int(value)
