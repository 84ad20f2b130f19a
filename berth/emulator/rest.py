"""The API's semantics over storage: what create, get, list, update, patch and delete mean.

:class:`Api` is the emulator's ``registry/rest`` layer and its in-process Python API: the HTTP
handlers (:mod:`berth.emulator.handlers`) and the simulated kubelets
(:mod:`berth.emulator.kubelets`) both call it. It owns the object metadata rules (uid,
creationTimestamp, generation, generateName, resourceVersion with 409 on a stale one), status
subresources (the main resource ignores ``status``; ``/status`` changes only status), finalizers
and ``deletionTimestamp``, owner-reference garbage collection, namespace termination, and serves
the pod subresources ``binding`` and ``eviction`` that :mod:`berth.emulator.pods` implements.
Per-kind defaults and checks come from the strategies of :mod:`berth.emulator.strategies`,
:mod:`berth.emulator.pods` and :mod:`berth.emulator.crds`.

Everything runs on the server's event loop and is synchronous: a call is one atomic step.
"""

from __future__ import annotations

import base64
import builtins
import copy
import dataclasses
import json
import random
import typing
import uuid

from berth.api import core, objects, policy
from berth.emulator import (
    crds,
    dra,
    errors,
    patches,
    pods,
    resources,
    selectors,
    storage,
    strategies,
)
from berth.util import clocks

__all__ = ["Api", "ListResult", "Write"]

Object = objects.KubeObject
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's: no vowels, no look-alikes
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
NAMESPACES: resources.StorageKey = ("", "namespaces")


@dataclasses.dataclass(frozen=True)
class Write:
    """The outcome of a write: the object as answered, and whether it is gone or pending."""

    object: Object
    created: bool = False
    pending: bool = False  # a delete waiting for finalizers or graceful termination
    warnings: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ListResult:
    items: list[Object]
    resource_version: str
    continue_token: str = ""
    remaining: int | None = None


def _body_without(obj: Object, *fields: str) -> dict[str, object]:
    return {k: v for k, v in obj.items() if k not in ("metadata", *fields)}


def _fields(obj: Object | objects.ObjectMeta) -> dict[str, object]:
    """``obj`` as the JSON map it is. This layer serves kinds it does not know: it moves their
    ``status`` (the ``/status`` subresource) without reading it, since its shape is the kind's,
    and copies or drops metadata fields by name."""
    return typing.cast(dict[str, object], obj)


class Api:
    """The emulated API: objects with Kubernetes semantics, by resource."""

    def __init__(
        self,
        *,
        registry: resources.Registry,
        store: storage.Storage,
        clock: clocks.Clock,
        seed: int | None = None,
    ) -> None:
        self.registry = registry
        self.storage = store
        self.clock = clock
        self.strategies: dict[resources.StorageKey, strategies.Strategy] = {
            **strategies.builtin_strategies(),
            **dra.dra_strategies(),
            pods.PODS: pods.PodStrategy(),
            crds.CRD_KEY: crds.CrdStrategy(),
        }
        self._generic = strategies.Strategy()
        self._random = random.Random(seed)
        self._dependents: dict[str, set[tuple[resources.StorageKey, str, str]]] = {}
        self.graceful_pod_deletion: typing.Callable[[Object], bool] = lambda pod: False
        """Whether deleting this pod waits for its kubelet (set by simulated kubelets)."""
        for name in SYSTEM_NAMESPACES:
            self.create(self.resource("v1", "namespaces"), {"metadata": {"name": name}})
        for name, value in SYSTEM_PRIORITY_CLASSES.items():
            system: policy.PriorityClass = {
                "metadata": {"name": name},
                "value": value,
                "description": "Used for system critical pods that must not be moved.",
            }
            self.create(self.resource("scheduling.k8s.io/v1", "priorityclasses"), system)

    # ----- lookups --------------------------------------------------------------------------

    def resource(self, api_version: str, plural: str) -> resources.Resource:
        """The served resource ``plural`` of ``api_version`` (``"v1"``, ``"apps/v1"``)."""
        group, _, version = api_version.rpartition("/")
        found = self.registry.get(group, version, plural)
        if found is None:
            raise errors.resource_not_found()
        return found

    def strategy(self, resource: resources.Resource) -> strategies.Strategy:
        return self.strategies.get(resource.key, self._generic)

    def timestamp(self, when: float | None = None) -> str:
        moment = clocks.to_datetime(self.clock.now() if when is None else when)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def priority_class(self, name: str | None) -> policy.PriorityClass | None:
        """The PriorityClass ``name``, or the cluster's global default when ``name`` is empty."""
        key = ("scheduling.k8s.io", "priorityclasses")
        # The resource is PriorityClasses: what storage holds under it is one.
        if name:
            return typing.cast(policy.PriorityClass | None, self.storage.get(key, "", name))
        for candidate in self.storage.list(key):
            if candidate.get("globalDefault"):
                return typing.cast(policy.PriorityClass, candidate)
        return None

    def present(self, resource: resources.Resource, obj: Object) -> Object:
        """``obj`` as served by ``resource`` (CRD versions share storage; apiVersion differs)."""
        if obj.get("apiVersion") == resource.api_version:
            return obj
        served: Object = {**obj, "apiVersion": resource.api_version}
        return served

    def _namespace_of(self, resource: resources.Resource, namespace: str | None) -> str:
        if not resource.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request(
                "the server could not find the requested resource: a "
                "namespaced resource needs a namespace"
            )
        return namespace

    def _existing(self, resource: resources.Resource, namespace: str, name: str) -> Object:
        found = self.storage.get(resource.key, namespace, name)
        if found is None:
            raise errors.not_found(name, group=resource.group, plural=resource.plural)
        return found

    # ----- reads ----------------------------------------------------------------------------

    def get(self, resource: resources.Resource, *, namespace: str | None, name: str) -> Object:
        ns = self._namespace_of(resource, namespace)
        return self.present(resource, self._existing(resource, ns, name))

    def list(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None,
        labels: selectors.LabelSelector | None = None,
        fields: selectors.FieldSelector | None = None,
        limit: int = 0,
        continue_token: str = "",
    ) -> ListResult:
        """Objects in key order; ``limit``/``continue`` page through them."""
        rv = str(self.storage.resource_version)
        start: tuple[str, str] | None = None
        if continue_token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start, rv = (decoded["ns"], decoded["name"]), str(decoded["rv"])
            except (ValueError, KeyError, TypeError):
                raise errors.bad_request("continue key is not valid: illegal base64 data") from None
            self.storage.check_not_compacted(int(rv))
        items = [
            o
            for o in self.storage.list(resource.key, namespace or None)
            if (labels is None or labels.matches(o["metadata"].get("labels")))
            and (fields is None or fields.matches(o))
            and (start is None or storage.object_key(o) > start)
        ]
        token, remaining = "", None
        if limit and len(items) > limit:
            last = storage.object_key(items[limit - 1])
            payload = {"rv": int(rv), "ns": last[0], "name": last[1]}
            token = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
            remaining = len(items) - limit
            items = items[:limit]
        return ListResult([self.present(resource, o) for o in items], rv, token, remaining)

    # ----- create ---------------------------------------------------------------------------

    def create(
        self,
        resource: resources.Resource,
        body: Object,
        *,
        namespace: str | None = None,
        context: strategies.WriteContext | None = None,
    ) -> Write:
        """Create ``body`` (201); the name may come from ``generateName``."""
        context = context or strategies.WriteContext()
        obj = self._checked_body(resource, body)
        meta = obj["metadata"]
        ns = self._namespace_of(resource, namespace or meta.get("namespace"))
        if resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request"
                )
            meta["namespace"] = ns
            self._check_namespace_open(ns)
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(
                    "",
                    group=resource.group,
                    kind=resource.kind,
                    causes=[
                        errors.Cause(
                            "metadata.name",
                            "Required value: name or generateName is required",
                            "FieldValueRequired",
                        )
                    ],
                )
            meta["name"] = self._generate_name(resource, ns, str(meta["generateName"]))
        for field in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            _fields(meta).pop(field, None)
        meta["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
        meta["creationTimestamp"] = self.timestamp()
        meta["generation"] = 1
        strategy = self.strategy(resource)
        if resource.has_status and resource.key != ("", "nodes"):
            _fields(obj).pop("status", None)
        strategy.prepare_create(self, resource, obj)
        self._validate(resource, strategy, obj, old=None, context=context)
        if self.storage.get(resource.key, ns, str(meta["name"])) is not None:
            raise errors.already_exists(
                str(meta["name"]), group=resource.group, plural=resource.plural
            )
        if context.dry_run:
            return Write(
                self.present(resource, obj), created=True, warnings=tuple(context.warnings)
            )
        stored = self.store(resource, obj, old=None)
        strategy.after_write(self, resource, stored, None)
        return Write(self.present(resource, stored), created=True, warnings=tuple(context.warnings))

    def _checked_body(self, resource: resources.Resource, body: object) -> Object:
        """A copy of ``body`` (a request's JSON, any value until checked here) as an object of
        ``resource``: a JSON object of its kind and apiVersion, whose metadata is an object."""
        if not isinstance(body, dict):
            raise errors.bad_request(
                f"the body of the request must be a JSON object, not {type(body).__name__}"
            )
        obj = copy.deepcopy(body)
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != resource.kind:
            raise errors.bad_request(
                f"the object provided is unrecognized (kind {kind!r} does "
                f'not match the expected kind "{resource.kind}")'
            )
        if api_version and api_version != resource.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not "
                f"match the expected API version ({resource.api_version})"
            )
        obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
        metadata = obj.get("metadata")
        if metadata is None:
            obj["metadata"] = {}
        elif not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        return typing.cast(Object, obj)  # checked above: the one shape every object shares

    def _generate_name(self, resource: resources.Resource, ns: str, prefix: str) -> str:
        for _ in range(16):
            suffix = "".join(self._random.choice(_GENERATE_ALPHABET) for _ in range(5))
            name = f"{prefix[:58]}{suffix}"
            if self.storage.get(resource.key, ns, name) is None:
                return name
        raise errors.StatusError(
            f"unable to generate a unique name for {prefix!r}", code=504, reason="ServerTimeout"
        )

    def _check_namespace_open(self, ns: str) -> None:
        namespace = self.storage.get(NAMESPACES, "", ns)
        if namespace is None:
            raise errors.not_found(ns, group="", plural="namespaces")
        if namespace["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                f"unable to create new content in namespace {ns} because it is being terminated"
            )

    def _validate(
        self,
        resource: resources.Resource,
        strategy: strategies.Strategy,
        obj: Object,
        *,
        old: Object | None,
        context: strategies.WriteContext,
    ) -> None:
        causes = strategy.validate(self, resource, obj, old=old, context=context)
        meta = obj["metadata"]
        for field in ("labels", "annotations"):
            value = meta.get(field)
            if value is not None and not (
                isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
            ):
                causes.append(
                    errors.Cause(f"metadata.{field}", "Invalid value: must be a map of strings")
                )
        if old is not None and old["metadata"].get("deletionTimestamp"):
            added = set(meta.get("finalizers") or ()) - set(old["metadata"].get("finalizers") or ())
            if added:
                causes.append(
                    errors.Cause(
                        "metadata.finalizers",
                        f"Forbidden: no new finalizers "
                        f"can be added if the object is being deleted, found new "
                        f"finalizers {sorted(added)}",
                        "FieldValueForbidden",
                    )
                )
        if causes:
            raise errors.invalid(
                str(meta.get("name", "")), group=resource.group, kind=resource.kind, causes=causes
            )

    def store(self, resource: resources.Resource, obj: Object, *, old: Object | None) -> Object:
        """Store ``obj`` as it is (no strategy, no validation): every write ends here, and the
        privileged ones (``pods/binding``) start here."""
        stored = self.storage.put(resource.key, obj, old=old)
        self._index_owners(resource.key, stored, old)
        return stored

    def _index_owners(self, key: resources.StorageKey, obj: Object, old: Object | None) -> None:
        ns, name = storage.object_key(obj)
        entry = (key, ns, name)
        before = {
            r.get("uid") for r in (old or {}).get("metadata", {}).get("ownerReferences") or ()
        }
        after = {r.get("uid") for r in obj["metadata"].get("ownerReferences") or ()}
        for uid in before - after:
            self._dependents.get(str(uid), set()).discard(entry)
        for uid in after - before:
            self._dependents.setdefault(str(uid), set()).add(entry)

    # ----- update and patch -----------------------------------------------------------------

    def replace(
        self,
        resource: resources.Resource,
        body: Object,
        *,
        namespace: str | None,
        name: str,
        subresource: str = "",
        context: strategies.WriteContext | None = None,
    ) -> Write:
        """PUT: replace the object (or only its status, for ``/status``)."""
        context = context or strategies.WriteContext()
        ns = self._namespace_of(resource, namespace)
        obj = self._checked_body(resource, body)
        body_name = obj["metadata"].get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        old = self._existing(resource, ns, name)
        rv = obj["metadata"].get("resourceVersion")
        if not rv and resource.custom:
            raise errors.invalid(
                name,
                group=resource.group,
                kind=resource.kind,
                causes=[
                    errors.Cause(
                        "metadata.resourceVersion",
                        "Invalid value: 0: must be specified for an update",
                    )
                ],
            )
        return self._update(resource, obj, old=old, subresource=subresource, context=context)

    def patch(
        self,
        resource: resources.Resource,
        patch: typing.Any,
        *,
        namespace: str | None,
        name: str,
        patch_type: str,
        subresource: str = "",
        context: strategies.WriteContext | None = None,
    ) -> Write:
        """PATCH with a JSON, merge, strategic-merge or apply patch."""
        context = context or strategies.WriteContext()
        ns = self._namespace_of(resource, namespace)
        old = self.storage.get(resource.key, ns, name)
        if old is None:
            if patch_type != patches.APPLY_PATCH:
                raise errors.not_found(name, group=resource.group, plural=resource.plural)
            body = self._checked_body(resource, patch)
            body["metadata"]["name"] = name
            return self.create(resource, body, namespace=ns or None, context=context)
        current = self.present(resource, old)
        try:
            if patch_type == patches.JSON_PATCH:
                patched = patches.apply_json_patch(current, patch)
            elif patch_type in (patches.MERGE_PATCH, patches.APPLY_PATCH):
                patched = patches.apply_merge_patch(current, patch)
            elif patch_type == patches.STRATEGIC_MERGE_PATCH:
                patched = patches.apply_strategic_merge_patch(current, patch)
            else:
                raise errors.unsupported_media_type(patch_type, accepted=self.patch_types(resource))
        except patches.PatchError as exc:
            raise errors.StatusError(
                str(exc),
                code=422,
                reason="Invalid",
                details={"name": name, "kind": resource.plural},
            ) from None
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        patched.setdefault("metadata", {})
        if not isinstance(patched["metadata"], dict):
            raise errors.bad_request("metadata must be an object")
        if patched["metadata"].get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({patched['metadata']['name']}) "
                f"does not match the name on the URL ({name})"
            )
        patched["metadata"]["name"] = name
        obj = self._checked_body(resource, patched)
        return self._update(resource, obj, old=old, subresource=subresource, context=context)

    @staticmethod
    def patch_types(resource: resources.Resource) -> builtins.list[str]:
        kinds = [patches.JSON_PATCH, patches.MERGE_PATCH, patches.APPLY_PATCH]
        if not resource.custom:
            kinds.insert(2, patches.STRATEGIC_MERGE_PATCH)
        return kinds

    def _update(
        self,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object,
        subresource: str,
        context: strategies.WriteContext,
    ) -> Write:
        meta, old_meta = obj["metadata"], old["metadata"]
        name = str(old_meta["name"])
        rv = meta.get("resourceVersion")
        if rv and str(rv) != old_meta["resourceVersion"]:
            raise errors.conflict(
                name, group=resource.group, plural=resource.plural, why=errors.STALE
            )
        meta["resourceVersion"] = old_meta["resourceVersion"]
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "generation",
        ):
            if field in old_meta:
                _fields(meta)[field] = _fields(old_meta)[field]
            else:
                _fields(meta).pop(field, None)
        if subresource == "status":
            status = obj.get("status")
            obj = copy.deepcopy(old)
            if status is None:
                _fields(obj).pop("status", None)
            else:
                _fields(obj)["status"] = status
        elif subresource:
            raise errors.method_not_allowed("PUT/PATCH", what=f"{resource.plural}/{subresource}")
        elif resource.has_status:
            if "status" in old:
                _fields(obj)["status"] = copy.deepcopy(old.get("status"))
            else:
                _fields(obj).pop("status", None)
        strategy = self.strategy(resource)
        strategy.prepare_update(self, resource, obj, old)
        self._validate(resource, strategy, obj, old=old, context=context)
        ignored = ("status",) if resource.has_status else ()
        if _body_without(obj, *ignored) != _body_without(old, *ignored):
            obj["metadata"]["generation"] = int(old_meta.get("generation") or 1) + 1
        if obj == old or context.dry_run:
            return Write(
                self.present(resource, old if obj == old else obj), warnings=tuple(context.warnings)
            )
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            if self._pod_waits_for_kubelet(resource, obj):
                stored = self.store(resource, obj, old=old)
                return Write(self.present(resource, stored), pending=True)
            stored = self.store(resource, obj, old=old)
            last = self._remove(resource, stored)
            return Write(self.present(resource, last), warnings=tuple(context.warnings))
        stored = self.store(resource, obj, old=old)
        strategy.after_write(self, resource, stored, old)
        return Write(self.present(resource, stored), warnings=tuple(context.warnings))

    # ----- delete ---------------------------------------------------------------------------

    def delete(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None,
        name: str,
        options: core.DeleteOptions | None = None,
        context: strategies.WriteContext | None = None,
    ) -> Write:
        """DELETE: remove now, or mark ``deletionTimestamp`` while finalizers or a kubelet wait."""
        context = context or strategies.WriteContext()
        options = options or {}
        ns = self._namespace_of(resource, namespace)
        old = self._existing(resource, ns, name)
        preconditions = options.get("preconditions") or {}
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted, actual = preconditions.get(field), old["metadata"].get(field)
            if wanted and wanted != actual:
                raise errors.conflict(
                    name,
                    group=resource.group,
                    plural=resource.plural,
                    why=(
                        f"Precondition failed: {label} in precondition: {wanted}, "
                        f"{label} in object meta: {actual}"
                    ),
                )
        grace = options.get("gracePeriodSeconds")
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is True:
            policy = "Orphan"
        finalizers = list(old["metadata"].get("finalizers") or ())
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        waits_for_kubelet = grace != 0 and self._pod_waits_for_kubelet(resource, old)
        if context.dry_run:
            return Write(self.present(resource, old), pending=bool(finalizers))
        if resource.key == NAMESPACES:
            return self._delete_namespace(resource, old)
        if finalizers or waits_for_kubelet:
            if old["metadata"].get("deletionTimestamp"):
                if waits_for_kubelet or grace != 0:
                    return Write(self.present(resource, old), pending=True)
                if not finalizers:  # grace 0 on a terminating pod: the kubelet says it is gone
                    return Write(self.present(resource, self._remove(resource, old)))
                return Write(self.present(resource, old), pending=True)
            obj = copy.deepcopy(old)
            obj["metadata"]["deletionTimestamp"] = self.timestamp()
            obj["metadata"]["deletionGracePeriodSeconds"] = (
                int(grace if grace is not None else self._grace(old)) if waits_for_kubelet else 0
            )
            obj["metadata"]["finalizers"] = finalizers
            if not finalizers:
                obj["metadata"].pop("finalizers")
            stored = self.store(resource, obj, old=old)
            self._collect_for_finalizers(resource, stored)
            current = self.storage.get(resource.key, ns, name)
            if current is None:
                return Write(self.present(resource, stored))
            return Write(self.present(resource, current), pending=True)
        last = self._remove(resource, old)
        return Write(self.present(resource, last))

    @staticmethod
    def _grace(obj: Object) -> int:
        pod = typing.cast(core.Pod, obj)  # only pods wait for their kubelet
        return int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))

    def _pod_waits_for_kubelet(self, resource: resources.Resource, obj: Object) -> bool:
        return resource.key == pods.PODS and bool(self.graceful_pod_deletion(obj))

    def _remove(self, resource: resources.Resource, obj: Object) -> Object:
        last = self.storage.remove(resource.key, obj)
        self._index_owners(
            resource.key, {"metadata": {**obj["metadata"], "ownerReferences": []}}, obj
        )
        self.strategy(resource).after_remove(self, resource, last)
        uid = str(obj["metadata"].get("uid"))
        self._delete_dependents(self._dependents.pop(uid, set()), policy="Background")
        namespace = obj["metadata"].get("namespace")
        if namespace:
            self._finish_namespace_if_empty(str(namespace))
        return last

    def _resource_for_key(self, key: resources.StorageKey) -> resources.Resource | None:
        version = self.registry.preferred_version(key[0])
        found = self.registry.get(key[0], version, key[1]) if version else None
        if found is None:
            for candidate in self.registry.all():
                if candidate.key == key:
                    return candidate
        return found

    def _delete_dependents(
        self, dependents: set[tuple[resources.StorageKey, str, str]], *, policy: str
    ) -> None:
        """The cascade: delete each dependent (still stored) with ``policy``."""
        for key, ns, name in sorted(dependents):
            dependent_resource = self._resource_for_key(key)
            if dependent_resource is not None and self.storage.get(key, ns, name) is not None:
                self.delete(
                    dependent_resource,
                    namespace=ns or None,
                    name=name,
                    options={"propagationPolicy": policy},
                )

    def _collect_for_finalizers(self, resource: resources.Resource, obj: Object) -> None:
        """The garbage collector's part of ``orphan`` and ``foregroundDeletion``."""
        finalizers = list(obj["metadata"].get("finalizers") or ())
        uid = str(obj["metadata"].get("uid"))
        if "orphan" in finalizers:
            for key, ns, name in sorted(self._dependents.get(uid, set())):
                dependent = self.storage.get(key, ns, name)
                dependent_resource = self._resource_for_key(key)
                if dependent is None or dependent_resource is None:
                    continue
                references = dependent["metadata"].get("ownerReferences") or ()
                self._rewrite_metadata(
                    dependent_resource,
                    dependent,
                    {"ownerReferences": [r for r in references if r.get("uid") != uid]},
                )
            finalizers.remove("orphan")
        if "foregroundDeletion" in finalizers:
            self._delete_dependents(self._dependents.get(uid, set()), policy="Foreground")
            if not self._dependents.get(uid):
                finalizers.remove("foregroundDeletion")
        if finalizers != list(obj["metadata"].get("finalizers") or ()):
            current = self.storage.get(resource.key, *storage.object_key(obj))
            if current is not None:
                self._rewrite_metadata(resource, current, {"finalizers": finalizers})

    def _rewrite_metadata(
        self, resource: resources.Resource, old: Object, changes: objects.ObjectMeta
    ) -> None:
        """The garbage collector's own write: ``old`` with ``changes`` to its metadata."""
        updated = copy.deepcopy(old)
        updated["metadata"].update(changes)
        self._update(resource, updated, old=old, subresource="", context=strategies.WriteContext())

    def delete_collection(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None,
        labels: selectors.LabelSelector | None,
        fields: selectors.FieldSelector | None,
        options: core.DeleteOptions | None = None,
    ) -> ListResult:
        listed = self.list(resource, namespace=namespace, labels=labels, fields=fields)
        deleted = []
        for obj in listed.items:
            ns, name = storage.object_key(obj)
            if self.storage.get(resource.key, ns, name) is not None:
                deleted.append(
                    self.delete(resource, namespace=ns or None, name=name, options=options).object
                )
        return ListResult(deleted, str(self.storage.resource_version))

    # ----- namespaces -----------------------------------------------------------------------

    def _delete_namespace(self, resource: resources.Resource, old: Object) -> Write:
        name = str(old["metadata"]["name"])
        if not old["metadata"].get("deletionTimestamp"):
            obj = copy.deepcopy(old)
            obj["metadata"]["deletionTimestamp"] = self.timestamp()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            typing.cast(core.Namespace, obj)["status"] = {"phase": "Terminating"}
            self.store(resource, obj, old=old)
            for served in self.registry.all():
                if (
                    not served.namespaced
                    or self.registry.preferred_version(served.group) != served.version
                ):
                    continue
                for item in self.storage.list(served.key, name):
                    if not item["metadata"].get("deletionTimestamp"):
                        self.delete(served, namespace=name, name=item["metadata"]["name"])
        finished = self._finish_namespace_if_empty(name)
        current = self.storage.get(NAMESPACES, "", name)
        if finished or current is None:
            return Write(self.present(resource, finished or old))
        return Write(self.present(resource, current), pending=True)

    def _finish_namespace_if_empty(self, name: str) -> Object | None:
        namespace = self.storage.get(NAMESPACES, "", name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return None
        for served in self.registry.all():
            if served.namespaced and self.storage.list(served.key, name):
                return None
        if namespace["metadata"].get("finalizers"):
            return None
        return self._remove(self.resource("v1", "namespaces"), namespace)

    # ----- pods: binding and eviction -------------------------------------------------------

    def bind(self, *, namespace: str, name: str, binding: object) -> objects.Status:
        """``pods/binding`` (see :func:`berth.emulator.pods.bind`)."""
        return pods.bind(self, namespace=namespace, name=name, binding=binding)

    def evict(self, *, namespace: str, name: str, eviction: object) -> objects.Status:
        """``pods/eviction`` (see :func:`berth.emulator.pods.evict`)."""
        return pods.evict(self, namespace=namespace, name=name, eviction=eviction)
