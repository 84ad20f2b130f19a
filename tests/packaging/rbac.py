"""Recording who asked the emulator for what, in RBAC terms, and checking it against a chart.

- :class:`RecordingEmulator` is the API server emulator with one more middleware: it remembers
  every request it serves — who sent it (the bearer token, mapped to a user name as an
  authenticator would), the method, what the path addresses (:func:`berth.emulator.routes.parse`)
  and whether it is a watch. The emulator itself authorizes nothing; the recording is what a
  real API server's authorizer would have been asked.
- :func:`calls` turns those requests into RBAC requests: ``(apiGroup, resource[/subresource],
  verb, namespace)`` with Kubernetes' verb mapping (GET one → get, GET a collection → list,
  GET ``?watch`` → watch, POST → create, PUT → update, PATCH → patch, DELETE one → delete,
  DELETE a collection → deletecollection). Requests for no resource (``/api``, ``/apis/...``,
  ``/version``) are kept apart as :class:`NonResource`: Kubernetes grants them to every
  authenticated user through the ``system:discovery`` ClusterRole (:data:`DISCOVERY`).
- :func:`grants` reads the Roles and ClusterRoles a rendered chart binds to a user, and
  :func:`allows` decides, as Kubernetes' RBAC authorizer does for rules without wildcards or
  resource names, whether a grant covers a call: a ClusterRole bound by a ClusterRoleBinding
  everywhere, a Role only in its own namespace.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from aiohttp import web

from berth.emulator import resources, routes, server

__all__ = [
    "DISCOVERY",
    "Call",
    "Grant",
    "NonResource",
    "RecordingEmulator",
    "Served",
    "allows",
    "calls",
    "discovery",
    "grants",
    "kubeconfig",
    "service_account_user",
    "served",
]

Obj = dict[str, typing.Any]

DISCOVERY = (
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
)
"""The non-resource URLs of the ``system:discovery`` and ``system:public-info-viewer``
ClusterRoles, which Kubernetes binds to every authenticated user (``system:authenticated``)."""

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def service_account_user(name: str, *, namespace: str) -> str:
    """The user name a ServiceAccount's token authenticates as."""
    return f"system:serviceaccount:{namespace}:{name}"


@dataclasses.dataclass(frozen=True)
class Served:
    """One request the emulator served."""

    user: str  # "" when the token is unknown
    method: str
    path: str
    route: routes.Route | None  # None: not a resource path (/api, /version, ...)
    watch: bool  # ?watch=true, or the legacy /watch/ prefix


class RecordingEmulator(server.Emulator):
    """The emulator, remembering every request in :attr:`served` (see the module docstring).

    ``users`` maps bearer tokens to user names; a request with another token (or none) is
    recorded with the user ``""``.
    """

    def __init__(self, *, users: collections.abc.Mapping[str, str], **options: typing.Any) -> None:
        super().__init__(**options)
        self._users = dict(users)
        self.served: list[Served] = []

    def application(self) -> web.Application:
        app = super().application()
        # Outermost, so that a request an armed fault fails is recorded too: RBAC is asked
        # before anything else answers.
        app.middlewares.insert(0, self._record)
        return app

    @web.middleware
    async def _record(
        self,
        request: web.Request,
        handler: collections.abc.Callable[
            [web.Request], collections.abc.Awaitable[web.StreamResponse]
        ],
    ) -> web.StreamResponse:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        user = self._users.get(token, "") if scheme.lower() == "bearer" else ""
        self.served.append(
            served(
                request.path,
                method=request.method,
                query=request.query,
                user=user,
                registry=self.registry,
            )
        )
        return await handler(request)


def served(
    path: str,
    *,
    method: str,
    query: collections.abc.Mapping[str, str],
    user: str,
    registry: resources.Registry,
) -> Served:
    """What a request addresses (``registry`` settles which resources are namespaced)."""
    route = routes.parse(path, registry=registry)
    watch = query.get("watch", "").lower() in ("true", "1")
    return Served(
        user=user,
        method=method.upper(),
        path=path,
        route=route if route is not None and route.plural else None,
        watch=watch or (route is not None and route.watch_prefix),
    )


def kubeconfig(url: str, *, token: str, namespace: str = "default") -> Obj:
    """A kubeconfig for ``url`` authenticating with ``token`` (the emulator's, another user)."""
    config = server.kubeconfig(url, namespace=namespace)
    for entry in config["users"]:
        entry["user"] = {"token": token}
    return config


# Requests -> RBAC requests ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True)
class Call:
    """What the RBAC authorizer is asked for one resource request."""

    api_group: str
    resource: str  # "pods", "pods/binding"
    verb: str
    namespace: str | None  # None: a cluster-scoped object, or a collection across namespaces

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace is not None else ""
        return f"{self.verb} {self.resource}.{self.api_group or 'core'}{where}"


@dataclasses.dataclass(frozen=True, order=True)
class NonResource:
    """A request for no resource (discovery, version): RBAC's ``nonResourceURLs``."""

    path: str
    verb: str


def calls(
    served: collections.abc.Iterable[Served], *, user: str
) -> tuple[set[Call], set[NonResource]]:
    """The RBAC requests among ``served`` that ``user`` made (see the module docstring)."""
    resource_calls: set[Call] = set()
    other: set[NonResource] = set()
    for request in served:
        if request.user != user:
            continue
        route = request.route
        if route is None:
            other.add(NonResource(request.path, request.method.lower()))
            continue
        resource = f"{route.plural}/{route.subresource}" if route.subresource else route.plural
        resource_calls.add(
            Call(route.group, resource, _verb(request, named=bool(route.name)), route.namespace)
        )
    return resource_calls, other


def _verb(request: Served, *, named: bool) -> str:
    if request.method == "GET":
        if request.watch:
            return "watch"
        return "get" if named else "list"
    if request.method == "DELETE":
        return "delete" if named else "deletecollection"
    return _VERBS.get(request.method, request.method.lower())


def discovery(request: NonResource) -> bool:
    """Whether ``system:discovery`` lets every authenticated user make ``request``."""
    if request.verb != "get":  # the discovery roles grant nothing else
        return False
    return any(
        request.path.startswith(allowed[:-1]) if allowed.endswith("/*") else request.path == allowed
        for allowed in DISCOVERY
    )


# The chart's rules --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True)
class Grant:
    """One (apiGroup, resource, verb) a role grants a user, and where."""

    role: str  # "ClusterRole/berth", "Role/berth-system/berth-leader-election"
    api_group: str
    resource: str
    verb: str
    namespace: str | None  # None: everywhere (a ClusterRole through a ClusterRoleBinding)

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace is not None else ""
        return f"{self.role}: {self.verb} {self.resource}.{self.api_group or 'core'}{where}"


def grants(objects: collections.abc.Iterable[Obj], *, user: str) -> list[Grant]:
    """Every grant the Roles and ClusterRoles among ``objects`` make to ``user`` through the
    bindings among ``objects``.

    Rules must hold exactly ``apiGroups``, ``resources`` and ``verbs`` (no ``resourceNames``,
    no ``nonResourceURLs``): anything else fails here rather than be half-understood.
    """
    by_kind: dict[str, list[Obj]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    roles = {
        ("ClusterRole", None, o["metadata"]["name"]): o for o in by_kind.get("ClusterRole", [])
    }
    for role in by_kind.get("Role", []):
        roles[("Role", role["metadata"]["namespace"], role["metadata"]["name"])] = role
    found: list[Grant] = []
    bindings = [*by_kind.get("ClusterRoleBinding", []), *by_kind.get("RoleBinding", [])]
    for binding in bindings:
        if not any(_names(subject, user) for subject in binding.get("subjects") or ()):
            continue
        namespace = (
            binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        )
        ref = binding["roleRef"]
        role_namespace = namespace if ref["kind"] == "Role" else None
        bound = roles.get((ref["kind"], role_namespace, ref["name"]))
        if bound is None:
            raise AssertionError(f"{binding['kind']} {binding['metadata']['name']}: no {ref}")
        label = "/".join(p for p in (ref["kind"], role_namespace, ref["name"]) if p)
        for rule in bound.get("rules") or ():
            if set(rule) != {"apiGroups", "resources", "verbs"}:
                raise AssertionError(f"{label}: a rule this check does not model: {rule}")
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        found.append(Grant(label, group, resource, verb, namespace))
    return sorted(set(found))


def _names(subject: Obj, user: str) -> bool:
    if subject.get("kind") == "ServiceAccount":
        found = service_account_user(
            subject.get("name", ""), namespace=subject.get("namespace", "")
        )
        return found == user
    return subject.get("kind") == "User" and subject.get("name") == user


def allows(grant: Grant, *, call: Call) -> bool:
    """Whether ``grant`` authorizes ``call`` (a Role's grant only in its namespace)."""
    return (grant.api_group, grant.resource, grant.verb) == (
        call.api_group,
        call.resource,
        call.verb,
    ) and (grant.namespace is None or grant.namespace == call.namespace)
