"""Per-resource behaviour on writes: defaults, validation and side effects of the built-in kinds.

The API server gives each resource a *strategy* (``PrepareForCreate``, ``Validate``,
``PrepareForUpdate``, ...). :class:`Strategy` is the generic one; the subclasses here hold what
real clients notice about pods (scheduler name, priority from the PriorityClass, initial phase,
a spec that is immutable but for the fields Kubernetes allows), namespaces (``Active`` phase),
and PriorityClasses. CRDs and custom resources have theirs in :mod:`berth.emulator.crds`.
:mod:`berth.emulator.rest` calls them; they see the API through the same object.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from berth.emulator import errors, resources

if typing.TYPE_CHECKING:
    from berth.emulator import rest

__all__ = ["Strategy", "WriteContext", "builtin_strategies", "validate_name"]

Object = dict[str, typing.Any]


@dataclasses.dataclass
class WriteContext:
    """How one write was asked for, and the warnings it collects for the response."""

    field_validation: str = "Warn"  # Strict | Warn | Ignore (the ``fieldValidation`` parameter)
    dry_run: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)


_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_name(name: str, *, label: bool = False) -> list[errors.Cause]:
    """``metadata.name`` as a DNS-1123 subdomain (or label, for namespaces)."""
    if label:
        if len(name) > 63 or not _LABEL.match(name):
            return [
                errors.Cause(
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 '
                    f"label must consist of lower case alphanumeric characters or '-', and must "
                    f"start and end with an alphanumeric character",
                )
            ]
        return []
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return [
            errors.Cause(
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 '
                f"subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                f"must start and end with an alphanumeric character",
            )
        ]
    return []


class Strategy:
    """The generic strategy: names must be DNS subdomains; nothing else is checked."""

    def prepare_create(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        """Set defaults on a new object (a private copy: mutate freely)."""

    def prepare_update(
        self, api: rest.Api, resource: resources.Resource, obj: Object, old: Object
    ) -> None:
        """Carry over or default what an update may not change."""

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: WriteContext,
    ) -> list[errors.Cause]:
        """What is wrong with ``obj`` (empty when it may be stored)."""
        if old is None:
            return validate_name(str(obj["metadata"]["name"]))
        return []

    def after_write(
        self, api: rest.Api, resource: resources.Resource, obj: Object, old: Object | None
    ) -> None:
        """React to a stored write (register a CRD, ...)."""

    def after_remove(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        """React to an object having gone from storage."""


class NamespaceStrategy(Strategy):
    """Namespaces start ``Active``; names are DNS labels."""

    def prepare_create(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        obj["status"] = {"phase": "Active"}
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: WriteContext,
    ) -> list[errors.Cause]:
        return validate_name(str(obj["metadata"]["name"]), label=True) if old is None else []

    def after_remove(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        api.forget_namespace(str(obj["metadata"]["name"]))


class PriorityClassStrategy(Strategy):
    def prepare_create(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            causes.append(errors.Cause("value", "Required value", "FieldValueRequired"))
        elif value > 1_000_000_000 and not str(obj["metadata"]["name"]).startswith("system-"):
            causes.append(
                errors.Cause("value", f"Invalid value: {value}: must be no greater than 1000000000")
            )
        if old is not None and old.get("value") != value:
            causes.append(
                errors.Cause(
                    "value", "Forbidden: may not be changed in an update.", "FieldValueForbidden"
                )
            )
        return causes


# Pod spec fields Kubernetes lets an update change (everything else is immutable).
_POD_MUTABLE = ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations")
_POD_MUTABLE_WHILE_GATED = ("nodeSelector", "affinity", "schedulingGates")


def _pod_spec_core(spec: Object, *, gated: bool) -> Object:
    core = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    core.pop("schedulingGates", None)
    if gated:
        for field in _POD_MUTABLE_WHILE_GATED:
            core.pop(field, None)
    for field in ("containers", "initContainers"):
        if isinstance(core.get(field), list):
            core[field] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                for c in core[field]
            ]
    return core


def _required_terms(spec: Object) -> list[Object]:
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return [t if isinstance(t, dict) else {} for t in terms or ()]


def _narrowed_only(spec: Object, old_spec: Object) -> list[errors.Cause]:
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
            any(r not in (new.get(field) or ()) for r in old.get(field) or ())
            for old, new in zip(old_terms, terms, strict=True)
            for field in ("matchExpressions", "matchFields")
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


class PodStrategy(Strategy):
    """Pods: kube-apiserver's defaults, priority admission and spec immutability."""

    def prepare_create(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        spec = obj.setdefault("spec", {})
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
                f'pods "{obj["metadata"].get("name") or obj["metadata"].get("generateName")}" is '
                f"forbidden: no PriorityClass with name {spec['priorityClassName']} was found",
                name=str(obj["metadata"].get("name", "")),
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
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
        if spec.get("nodeName"):
            obj["status"]["conditions"] = []

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        spec = obj.get("spec") or {}
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append(errors.Cause("spec.containers", "Required value", "FieldValueRequired"))
        else:
            for i, container in enumerate(containers):
                if not isinstance(container, dict) or not container.get("name"):
                    causes.append(
                        errors.Cause(
                            f"spec.containers[{i}].name", "Required value", "FieldValueRequired"
                        )
                    )
                elif not container.get("image"):
                    causes.append(
                        errors.Cause(
                            f"spec.containers[{i}].image", "Required value", "FieldValueRequired"
                        )
                    )
        if old is not None:
            old_spec = old.get("spec") or {}
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


def _qos_class(spec: Object) -> str:
    requests_seen = limits_seen = False
    guaranteed = True
    for container in spec.get("containers") or ():
        if not isinstance(container, dict):
            continue
        res = container.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def builtin_strategies() -> dict[resources.StorageKey, Strategy]:
    """Strategies of the built-in resources that need more than the generic one."""
    return {
        ("", "pods"): PodStrategy(),
        ("", "namespaces"): NamespaceStrategy(),
        ("scheduling.k8s.io", "priorityclasses"): PriorityClassStrategy(),
    }
