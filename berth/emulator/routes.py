"""URL paths of the Kubernetes API, parsed into what they address.

``/api/v1/namespaces/ns/pods/p/binding`` becomes a :class:`Route` (group ``""``, version
``v1``, namespace ``ns``, plural ``pods``, name ``p``, subresource ``binding``) with a
``template`` (``/api/v1/namespaces/{namespace}/pods/{name}/binding``) that request counters and
logs use. The ambiguity of ``/api/v1/namespaces/x/status`` (the namespace's status, or a
resource called ``status`` in namespace ``x``) is settled as the API server's router does:
a namespaced resource of that name wins. The deprecated ``/watch/`` prefix is understood.
"""

from __future__ import annotations

import dataclasses

from berth.emulator import resources

__all__ = ["Route", "parse"]


@dataclasses.dataclass(frozen=True)
class Route:
    """What a request path addresses (``plural`` empty for group/version documents)."""

    group: str
    version: str
    plural: str = ""
    namespace: str | None = None
    name: str = ""
    subresource: str = ""
    watch_prefix: bool = False  # the legacy /watch/ path form

    @property
    def template(self) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.watch_prefix:
            prefix += "/watch"
        if self.namespace is not None:
            prefix += "/namespaces/{namespace}"
        if self.plural:
            prefix += f"/{self.plural}"
        if self.name:
            prefix += "/{name}"
        if self.subresource:
            prefix += f"/{self.subresource}"
        return prefix


def parse(path: str, *, registry: resources.Registry) -> Route | None:
    """The route of a resource path, or None if it is not one (``/api``, ``/version``, ...)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch = bool(rest) and rest[0] == "watch"
    if watch:
        rest = rest[1:]
    if not rest:
        return Route(group, version)
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespaced = registry.get(group, version, rest[2])
        if namespaced is not None and namespaced.namespaced:
            return Route(group, version, rest[2], rest[1], _at(rest, 3), _at(rest, 4), watch)
        if len(rest) > 3 or registry.get(group, version, "namespaces") is None:
            return Route(group, version, rest[2], rest[1], _at(rest, 3), _at(rest, 4), watch)
    if len(rest) > 3:
        return Route(group, version, rest[0], None, rest[1], "/".join(rest[2:]), watch)
    return Route(group, version, rest[0], None, _at(rest, 1), _at(rest, 2), watch)


def _at(parts: list[str], index: int) -> str:
    return parts[index] if index < len(parts) else ""
