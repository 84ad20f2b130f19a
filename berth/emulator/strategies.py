"""Per-resource behaviour on writes: defaults, validation and side effects of the built-in kinds.

The API server gives each resource a *strategy* (``PrepareForCreate``, ``Validate``,
``PrepareForUpdate``, ...). :class:`Strategy` is the generic one; the subclasses here hold what
real clients notice about namespaces (``Active`` phase, DNS-label names) and PriorityClasses
(an immutable value). Pods have theirs in :mod:`berth.emulator.pods`, CRDs and custom resources
in :mod:`berth.emulator.crds`. :mod:`berth.emulator.rest` calls them; they see the API through
the same object.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from berth.api import core, objects, policy
from berth.emulator import errors, resources

if typing.TYPE_CHECKING:
    from berth.emulator import rest

__all__ = ["Strategy", "WriteContext", "builtin_strategies", "validate_name"]

Object = objects.KubeObject


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
        namespace = typing.cast(core.Namespace, obj)  # this strategy serves namespaces only
        namespace["status"] = {"phase": "Active"}
        namespace.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        labels = namespace["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = namespace["metadata"]["name"]

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


class PriorityClassStrategy(Strategy):
    """PriorityClasses: a value is required, at most a billion (system classes excepted), and
    never changes."""

    def prepare_create(self, api: rest.Api, resource: resources.Resource, obj: Object) -> None:
        # This strategy serves PriorityClasses only.
        typing.cast(policy.PriorityClass, obj).setdefault(
            "preemptionPolicy", "PreemptLowerPriority"
        )

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
            causes.append(errors.required("value"))
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


def builtin_strategies() -> dict[resources.StorageKey, Strategy]:
    """The strategies defined here, by resource (pods and CRDs bring their own modules)."""
    return {
        ("", "namespaces"): NamespaceStrategy(),
        ("scheduling.k8s.io", "priorityclasses"): PriorityClassStrategy(),
    }
