"""HTTP handlers: requests in, JSON (or Table, or a watch stream) out.

:class:`Handlers` turns an aiohttp request into a call on :class:`~berth.emulator.rest.Api`:
it parses the path (:mod:`berth.emulator.routes`), the query (selectors, ``watch``, ``limit``,
``dryRun``, ``fieldValidation``, delete options), the body (size limit, content type, JSON or
YAML) and the ``Accept`` header (:mod:`berth.emulator.renderings`: plain JSON, ``as=Table``,
``as=PartialObjectMetadata``), and writes the answer with the status code the API server
uses (201 on create, 202 for a pending delete). Every refusal is a
:class:`~berth.emulator.errors.StatusError`; the server's middleware
(:mod:`berth.emulator.server`) turns it into a Status response.
"""

from __future__ import annotations

import dataclasses
import json
import typing

import yaml
from aiohttp import web

from berth.api import core
from berth.emulator import (
    discovery,
    errors,
    openapi,
    openapiv2,
    patches,
    protobuf,
    renderings,
    resources,
    rest,
    routes,
    selectors,
    strategies,
    watches,
    webhooks,
)

__all__ = ["Handlers", "MAX_BODY"]

MAX_BODY = 3 * 1024 * 1024  # the API server's limit on a request body (3 MiB)
_TRUE = ("1", "t", "T", "true", "TRUE", "True")  # Go's strconv.ParseBool
_FALSE = ("0", "f", "F", "false", "FALSE", "False")
_OBJECT_TYPES = ("application/json", "application/yaml", protobuf.MEDIA_TYPE, "")


def _media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def _boolean(query: typing.Mapping[str, str], name: str) -> bool:
    value = query.get(name)
    if value is None or value == "":
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'invalid value for "{name}": {value!r} is not a boolean')


def _integer(query: typing.Mapping[str, str], name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(
            f'invalid value for "{name}": {value!r} is not an integer'
        ) from None


def json_response(
    body: typing.Any, *, status: int = 200, warnings: typing.Sequence[str] = ()
) -> web.Response:
    headers = {"Warning": ", ".join(f'299 - "{w}"' for w in warnings)} if warnings else None
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


class Handlers:
    """The emulator's request handlers over one :class:`~berth.emulator.rest.Api`."""

    def __init__(self, *, api: rest.Api, bookmark_interval: float = 60.0) -> None:
        self.api = api
        self.bookmark_interval = bookmark_interval
        self.webhooks = webhooks.MutatingWebhooks(api)
        self.validating_webhooks = webhooks.ValidatingWebhooks(api)

    @property
    def registry(self) -> resources.Registry:
        return self.api.registry

    # ----- discovery ------------------------------------------------------------------------

    async def version(self, request: web.Request) -> web.Response:
        return json_response(discovery.version())

    async def core_versions(self, request: web.Request) -> web.Response:
        return json_response(discovery.api_versions(address=request.host))

    async def groups(self, request: web.Request) -> web.Response:
        return json_response(discovery.api_group_list(self.registry))

    async def openapi_root(self, request: web.Request) -> web.Response:
        return json_response(openapi.root(self.registry))

    async def openapi_v2(self, request: web.Request) -> web.Response:
        doc = openapiv2.document(self.registry)
        accept = request.headers.get("Accept", "")
        if any(media_type in accept for media_type in openapiv2.PROTOBUF_MEDIA_TYPES):
            return web.Response(
                body=openapiv2.encode(doc), content_type=openapiv2.PROTOBUF_CONTENT_TYPE
            )
        return json_response(doc)

    async def openapi_document(self, request: web.Request) -> web.Response:
        parts = request.match_info["tail"].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "api":
            doc = openapi.document(self.registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = openapi.document(self.registry, parts[1], parts[2])
        else:
            doc = None
        if doc is None:
            raise errors.resource_not_found()
        return json_response(doc)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # ----- resources ------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """The catch-all for ``/api/...`` and ``/apis/...``."""
        route = routes.parse(request.path, registry=self.registry)
        if route is None:
            return await self._group_document(request)
        if not route.plural:
            if request.method != "GET":
                raise errors.method_not_allowed(request.method, what=request.path)
            found = discovery.resource_list(self.registry, route.group, route.version)
            if found is None:
                raise errors.resource_not_found()
            return json_response(found)
        resource = self.registry.get(route.group, route.version, route.plural)
        if resource is None:
            raise errors.resource_not_found()
        if route.subresource and route.subresource not in resource.subresources:
            raise errors.resource_not_found()
        if route.namespace is not None and not resource.namespaced:
            raise errors.resource_not_found()
        method = request.method
        if method == "GET":
            return await self._get(request, route, resource)
        if method == "POST":
            return await self._post(request, route, resource)
        if method == "PUT":
            return await self._put(request, route, resource)
        if method == "PATCH":
            return await self._patch(request, route, resource)
        if method == "DELETE":
            return await self._delete(request, route, resource)
        raise errors.method_not_allowed(method, what=request.path)

    async def _group_document(self, request: web.Request) -> web.Response:
        parts = [p for p in request.path.split("/") if p]
        if parts == ["api"]:
            return await self.core_versions(request)
        if parts == ["apis"]:
            return await self.groups(request)
        if len(parts) == 2 and parts[0] == "apis":
            group = discovery.api_group(self.registry, parts[1])
            if group is not None:
                return json_response(group)
        raise errors.resource_not_found()

    def _namespace(self, route: routes.Route, resource: resources.Resource) -> str | None:
        return route.namespace if resource.namespaced else None

    def _context(self, request: web.Request) -> strategies.WriteContext:
        validation = request.query.get("fieldValidation") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(
                f"fieldValidation parameter unsupported: {validation!r}; "
                f"expected Ignore, Warn or Strict"
            )
        dry_run = request.query.getall("dryRun", [])
        for value in dry_run:
            if value != "All":
                raise errors.bad_request(f'Invalid value: "{value}": supported values: "All"')
        return strategies.WriteContext(field_validation=validation, dry_run=bool(dry_run))

    def _rendering(self, request: web.Request) -> renderings.Rendering:
        """How the client asked for objects; 406 when it accepts no JSON form at all."""
        accept = request.headers.get("Accept", "")
        rendering = renderings.from_accept(accept)
        if rendering is None:
            raise errors.not_acceptable(accept)
        include = request.query.get("includeObject") or "Metadata"
        return dataclasses.replace(rendering, include_object=include)

    async def _get(
        self, request: web.Request, route: routes.Route, resource: resources.Resource
    ) -> web.StreamResponse:
        if route.subresource not in ("", "status"):
            raise errors.method_not_allowed("GET", what=f"{resource.plural}/{route.subresource}")
        namespace = self._namespace(route, resource)
        query = request.query
        if route.name and not route.watch_prefix:
            obj = self.api.get(resource, namespace=namespace, name=route.name)
            return json_response(
                renderings.one(
                    self._rendering(request),
                    resource=resource,
                    obj=obj,
                    now=self.api.clock.now(),
                    resource_version=obj["metadata"].get("resourceVersion", ""),
                )
            )
        if "get" not in resource.verbs:
            raise errors.method_not_allowed("GET", what=resource.plural)
        labels = selectors.parse_label_selector(query.get("labelSelector"))
        fields = selectors.parse_field_selector(query.get("fieldSelector"), key=resource.key)
        if route.name:  # /watch/.../name: a watch of one object
            fields = selectors.FieldSelector((*fields.clauses, ("metadata.name", True, route.name)))
        rendering = self._rendering(request)
        if rendering.include_object not in ("None", "Metadata", "Object"):
            raise errors.bad_request(
                f"includeObject: unsupported value {rendering.include_object!r}"
            )
        if route.watch_prefix or _boolean(query, "watch"):
            timeout = _integer(query, "timeoutSeconds")
            send_initial = _boolean(query, "sendInitialEvents")
            if send_initial and query.get("resourceVersionMatch") not in ("NotOlderThan", None):
                raise errors.bad_request(
                    "sendInitialEvents requires resourceVersionMatch=NotOlderThan"
                )
            watch = watches.WatchRequest(
                resource=resource,
                namespace=namespace,
                labels=labels,
                fields=fields,
                resource_version=query.get("resourceVersion", ""),
                send_initial_events=send_initial,
                allow_bookmarks=_boolean(query, "allowWatchBookmarks"),
                timeout=float(timeout) if timeout else watches.DEFAULT_TIMEOUT,
                rendering=rendering,
            )
            return await watches.serve(
                request, watch, api=self.api, bookmark_interval=self.bookmark_interval
            )
        limit = _integer(query, "limit") or 0
        if limit < 0:
            raise errors.bad_request(
                f"limit: Invalid value: {limit}: must be greater than or equal to 0"
            )
        listed = self.api.list(
            resource,
            namespace=namespace,
            labels=labels,
            fields=fields,
            limit=limit,
            continue_token=query.get("continue", ""),
        )
        return json_response(
            renderings.listing(
                rendering,
                resource=resource,
                items=listed.items,
                now=self.api.clock.now(),
                resource_version=listed.resource_version,
                continue_token=listed.continue_token,
                remaining=listed.remaining,
            )
        )

    async def _body(self, request: web.Request, *, accepted: typing.Sequence[str]) -> typing.Any:
        media = _media_type(request.headers.get("Content-Type", ""))
        if media not in accepted:
            raise errors.unsupported_media_type(media, accepted=[a for a in accepted if a])
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise errors.too_large(MAX_BODY)
        chunks: list[bytes] = []
        size = 0
        while chunk := await request.content.read(65536):
            size += len(chunk)
            if size > MAX_BODY:
                raise errors.too_large(MAX_BODY)
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            if request.method == "DELETE":
                return None
            raise errors.bad_request("the request body is empty")
        if media == protobuf.MEDIA_TYPE:
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise errors.unsupported_media_type(
                    media, accepted=("application/json", "application/yaml")
                ) from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise errors.bad_request("the request body is not valid UTF-8") from None
        if media in ("application/yaml", patches.APPLY_PATCH):
            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"error converting YAML to JSON: {exc}") from None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise errors.bad_request(
                f"couldn't get version/kind; json parse error: {exc}"
            ) from None

    async def _post(
        self, request: web.Request, route: routes.Route, resource: resources.Resource
    ) -> web.Response:
        body = await self._body(request, accepted=_OBJECT_TYPES)
        if route.subresource == "binding" or (resource.key == ("", "bindings") and not route.name):
            name = route.name or str(((body or {}).get("metadata") or {}).get("name", ""))
            result = self.api.bind(namespace=str(route.namespace), name=name, binding=body)
            return json_response(result, status=201)
        if route.subresource == "eviction":
            result = self.api.evict(namespace=str(route.namespace), name=route.name, eviction=body)
            return json_response(result, status=201)
        if route.name or route.subresource:
            raise errors.method_not_allowed("POST", what=request.path)
        context = self._context(request)
        namespace = self._namespace(route, resource)
        body = await self.webhooks.mutate(
            resource, body, namespace=namespace, dry_run=context.dry_run
        )
        await self.validating_webhooks.validate(
            resource, body, namespace=namespace, dry_run=context.dry_run
        )
        written = self.api.create(resource, body, namespace=namespace, context=context)
        return json_response(written.object, status=201, warnings=written.warnings)

    async def _put(
        self, request: web.Request, route: routes.Route, resource: resources.Resource
    ) -> web.Response:
        if not route.name or route.subresource not in ("", "status", "finalize"):
            raise errors.method_not_allowed("PUT", what=request.path)
        body = await self._body(request, accepted=_OBJECT_TYPES)
        context = self._context(request)
        subresource = "" if route.subresource == "finalize" else route.subresource
        written = self.api.replace(
            resource,
            body,
            namespace=self._namespace(route, resource),
            name=route.name,
            subresource=subresource,
            context=context,
        )
        return json_response(written.object, warnings=written.warnings)

    async def _patch(
        self, request: web.Request, route: routes.Route, resource: resources.Resource
    ) -> web.Response:
        if not route.name or route.subresource not in ("", "status"):
            raise errors.method_not_allowed("PATCH", what=request.path)
        accepted = self.api.patch_types(resource)
        body = await self._body(request, accepted=accepted)
        patch_type = _media_type(request.headers.get("Content-Type", ""))
        if patch_type == patches.APPLY_PATCH and not request.query.get("fieldManager"):
            raise errors.bad_request(
                "PATCH, application/apply-patch+yaml requires fieldManager parameter"
            )
        context = self._context(request)
        written = self.api.patch(
            resource,
            body,
            namespace=self._namespace(route, resource),
            name=route.name,
            patch_type=patch_type,
            subresource=route.subresource,
            context=context,
        )
        return json_response(
            written.object, status=201 if written.created else 200, warnings=written.warnings
        )

    async def _delete(
        self, request: web.Request, route: routes.Route, resource: resources.Resource
    ) -> web.Response:
        if route.subresource:
            raise errors.method_not_allowed("DELETE", what=request.path)
        body = await self._body(request, accepted=("application/json", "application/yaml", ""))
        # A DeleteOptions body: Api.delete reads its fields (the policy is checked below).
        options = typing.cast(core.DeleteOptions, dict(body)) if isinstance(body, dict) else {}
        grace = _integer(request.query, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if request.query.get("propagationPolicy"):
            options["propagationPolicy"] = request.query["propagationPolicy"]
        if options.get("propagationPolicy") not in (None, "Orphan", "Background", "Foreground"):
            raise errors.bad_request(
                f'propagationPolicy: Unsupported value: "{options["propagationPolicy"]}"'
            )
        context = self._context(request)
        if options.get("dryRun"):
            context.dry_run = True
        namespace = self._namespace(route, resource)
        if not route.name:
            labels = selectors.parse_label_selector(request.query.get("labelSelector"))
            fields = selectors.parse_field_selector(
                request.query.get("fieldSelector"), key=resource.key
            )
            listed = self.api.delete_collection(
                resource, namespace=namespace, labels=labels, fields=fields, options=options
            )
            return json_response(
                renderings.listing(
                    renderings.Rendering(),
                    resource=resource,
                    items=listed.items,
                    now=self.api.clock.now(),
                    resource_version=listed.resource_version,
                )
            )
        written = self.api.delete(
            resource, namespace=namespace, name=route.name, options=options, context=context
        )
        return json_response(written.object, status=202 if written.pending else 200)
