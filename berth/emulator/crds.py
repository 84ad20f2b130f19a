"""CustomResourceDefinitions: registering custom resources, and admitting custom objects.

:class:`CrdStrategy` checks a posted CRD (its name is ``<plural>.<group>``, a scope, one storage
version, a kind), gives it the status the API server would (``NamesAccepted`` and
``Established``, accepted names, stored versions) and, once stored, registers every served
version in the :class:`~berth.emulator.resources.Registry` so that discovery, OpenAPI and the
routes see it at once. Deleting the CRD deletes its objects and unregisters it.

:class:`CustomStrategy` admits custom objects through their version's schema
(:mod:`berth.emulator.validation`): defaults, pruning, 422 ``Invalid`` with field paths, and the
``fieldValidation`` parameter for unknown fields (Strict refuses, Warn warns, Ignore drops).
"""

from __future__ import annotations

import typing

from berth.api import apiextensions, objects
from berth.emulator import errors, resources, strategies, validation

if typing.TYPE_CHECKING:
    from berth.emulator import rest

__all__ = ["CrdStrategy", "CustomStrategy", "resources_of"]

CRD_KEY: resources.StorageKey = ("apiextensions.k8s.io", "customresourcedefinitions")


def _now_condition(kind: str, reason: str, message: str, when: str) -> objects.Condition:
    return {
        "type": kind,
        "status": "True",
        "lastTransitionTime": when,
        "reason": reason,
        "message": message,
    }


def _crd(obj: strategies.Object) -> apiextensions.CustomResourceDefinition:
    # The CRD strategy is registered for customresourcedefinitions only: obj is a CRD.
    return typing.cast(apiextensions.CustomResourceDefinition, obj)


def _fields(obj: strategies.Object) -> dict[str, object]:
    # A custom object's fields are its CRD's schema's: admission reads and rewrites them as
    # JSON, whatever the kind.
    return typing.cast(dict[str, object], obj)


def resources_of(
    crd: apiextensions.CustomResourceDefinition,
) -> list[tuple[resources.Resource, bool]]:
    """The served versions of ``crd`` as resources, each with "is the storage version"."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    found: list[tuple[resources.Resource, bool]] = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        found.append(
            (
                resources.Resource(
                    group=str(spec.get("group")),
                    version=str(version.get("name")),
                    kind=str(names.get("kind")),
                    plural=str(names.get("plural")),
                    singular=str(names.get("singular") or str(names.get("kind", "")).lower()),
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    short_names=tuple(names.get("shortNames") or ()),
                    categories=tuple(names.get("categories") or ()),
                    subresources=tuple(s for s in ("status", "scale") if s in subresources),
                    schema=schema,
                    printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                    custom=True,
                ),
                bool(version.get("storage")),
            )
        )
    return found


class CrdStrategy(strategies.Strategy):
    """CRDs: checked, given an Established status, and registered once stored."""

    def prepare_create(
        self, api: rest.Api, resource: resources.Resource, obj: strategies.Object
    ) -> None:
        self._set_status(api, _crd(obj))

    def prepare_update(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: strategies.Object,
        old: strategies.Object,
    ) -> None:
        self._set_status(api, _crd(obj))

    def _set_status(self, api: rest.Api, crd: apiextensions.CustomResourceDefinition) -> None:
        spec = crd.get("spec") or {}
        when = api.timestamp()
        stored = [v.get("name", "") for v in spec.get("versions") or () if v.get("storage")]
        names = (spec.get("names") or {}).copy()
        names.setdefault("singular", str(names.get("kind", "")).lower())
        names.setdefault("listKind", f"{names.get('kind', '')}List")
        crd["status"] = {
            "conditions": [
                _now_condition("NamesAccepted", "NoConflicts", "no conflicts found", when),
                _now_condition(
                    "Established",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    when,
                ),
            ],
            "acceptedNames": names,
            "storedVersions": stored,
        }

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: strategies.Object,
        *,
        old: strategies.Object | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes: list[errors.Cause] = []
        crd = _crd(obj)
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural = spec.get("group"), names.get("plural")
        if not group:
            causes.append(errors.required("spec.group"))
        if not plural:
            causes.append(errors.required("spec.names.plural"))
        if not names.get("kind"):
            causes.append(errors.required("spec.names.kind"))
        name = crd["metadata"]["name"]
        if group and plural and name != f"{plural}.{group}":
            causes.append(
                errors.Cause(
                    "metadata.name",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                )
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(
                errors.Cause(
                    "spec.scope",
                    f'Unsupported value: "{spec.get("scope")}": '
                    f'supported values: "Cluster", "Namespaced"',
                    "FieldValueNotSupported",
                )
            )
        versions = spec.get("versions") or []
        if not versions:
            causes.append(
                errors.Cause(
                    "spec.versions",
                    "Invalid value: null: must have exactly one version marked as storage version",
                )
            )
        elif sum(1 for v in versions if v.get("storage")) != 1:
            causes.append(
                errors.Cause(
                    "spec.versions",
                    "Invalid value: "
                    f"{[v.get('name') for v in versions]}: must have exactly one version "
                    "marked as storage version",
                )
            )
        if old is not None:
            old_spec = _crd(old).get("spec") or {}
            if old_spec.get("scope") != spec.get("scope"):
                causes.append(errors.Cause("spec.scope", "Invalid value: field is immutable"))
            if old_spec.get("group") != group:
                causes.append(errors.Cause("spec.group", "Invalid value: field is immutable"))
        return causes

    def after_write(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: strategies.Object,
        old: strategies.Object | None,
    ) -> None:
        crd = _crd(obj)
        spec = crd["spec"]
        if old is not None:
            old_spec = _crd(old).get("spec") or {}
            api.registry.remove_group_plural(
                str(old_spec.get("group")), str((old_spec.get("names") or {}).get("plural"))
            )
        if crd["metadata"].get("deletionTimestamp"):
            return
        for served, storage in resources_of(crd):
            api.registry.add(served, preferred=storage)
        api.strategies[(str(spec["group"]), str(spec["names"]["plural"]))] = CustomStrategy()

    def after_remove(
        self, api: rest.Api, resource: resources.Resource, obj: strategies.Object
    ) -> None:
        spec = _crd(obj).get("spec") or {}
        group, plural = str(spec.get("group")), str((spec.get("names") or {}).get("plural"))
        api.registry.remove_group_plural(group, plural)
        api.storage.drop_resource((group, plural))
        api.strategies.pop((group, plural), None)


class CustomStrategy(strategies.Strategy):
    """Custom objects: the CRD version's structural schema, defaults and CEL rules."""

    def prepare_create(
        self, api: rest.Api, resource: resources.Resource, obj: strategies.Object
    ) -> None:
        if resource.has_status:
            _fields(obj).pop("status", None)

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: strategies.Object,
        *,
        old: strategies.Object | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        if resource.schema is None:
            return causes
        admission = validation.admit(resource.schema, obj, old=old)
        if admission.unknown_fields:
            if context.field_validation == "Strict":
                fields = ", ".join(f'unknown field "{f}"' for f in admission.unknown_fields)
                raise errors.bad_request(
                    f'{resource.kind} in version "{resource.version}" cannot be handled as a '
                    f"{resource.kind}: strict decoding error: {fields}"
                )
            if context.field_validation == "Warn":
                context.warnings.extend(f'unknown field "{f}"' for f in admission.unknown_fields)
        # Defaults and pruning are part of admission: the stored object is the admitted one.
        stored = _fields(obj)
        stored.clear()
        stored.update(admission.object)
        return causes + list(admission.causes)
