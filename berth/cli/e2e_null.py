"""The null scheduler: binds each of its pods to the next node, round-robin, with no checks.

``berth bench e2e --real`` runs it beside kube-scheduler and Berth, as its own process, to
measure the ceiling: the rate at which the API server, etcd and KWOK on this machine let pods be
created, bound and started, whatever a scheduler decides. It lists the nodes once, watches the
unbound pods naming it (``spec.schedulerName``), and binds each as it appears to the next node
in name order, with at most ``--concurrency`` bindings in flight and no client rate limit (the
same client settings as Berth's binder: ``bind_concurrency`` 64, no rate limit). It checks
nothing: not capacity, not constraints, not gangs. A binding that fails is retried a few times,
then reported on stderr.

Pods with ResourceClaims get what a DRA scheduler writes, so that the ceiling is one of DRA
scheduling: it lists the nodes' ResourceSlices once and watches ResourceClaims; once a pod's
claims exist (kube-controller-manager makes them from templates and names them in the pod's
``status.resourceClaimStatuses``), it takes the next node with devices, round-robin, writes
each claim's finalizer, then its ``status.allocation`` (the node's next devices in turn, free
or not: it checks nothing here either) with the pod in ``reservedFor``, then the binding.

Run as ``python -m berth.cli.e2e_null --server URL --ca CA --cert CERT --key KEY --scheduler
NAME`` (without ``--ca``: plain HTTP); it prints one line when it watches, then runs until it
is terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import collections.abc
import contextlib
import itertools
import json
import signal
import ssl
import sys
import typing

import aiohttp

from berth.util import wakeups

if typing.TYPE_CHECKING:  # for types only: this process starts without pydantic's import
    from berth.api import core, dra
    from berth.api import objects as api_objects

__all__ = ["main", "run"]

_ATTEMPTS = 5
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
_CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
_MERGE = {"Content-Type": "application/merge-patch+json"}

Key = tuple[str, str]  # namespace, name
_Watched = typing.TypeVar("_Watched", "core.Pod", "dra.ResourceClaim")  # what _inform hands on
Device = tuple[str, str, str]  # driver, pool, device


async def _nodes(session: aiohttp.ClientSession) -> list[str]:
    async with session.get("/api/v1/nodes") as response:
        listed = await response.json()
    return sorted(item["metadata"]["name"] for item in listed.get("items") or ())


async def _devices(session: aiohttp.ClientSession) -> dict[str, list[Device]]:
    """Each node's devices, from the ResourceSlices published when it starts (none when the
    API server serves no ``resource.k8s.io/v1``)."""
    async with session.get(_SLICES) as response:
        if response.status != 200:
            return {}
        listed = await response.json()
    found: dict[str, list[Device]] = {}
    for item in listed.get("items") or ():
        spec = item.get("spec") or {}
        node, pool = spec.get("nodeName"), (spec.get("pool") or {}).get("name")
        if node and pool:
            found.setdefault(node, []).extend(
                (str(spec["driver"]), str(pool), str(d["name"])) for d in spec.get("devices") or ()
            )
    return found


def _key(obj: api_objects.KubeObject) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace")), str(meta.get("name"))


class _Null:
    """The pods and claims seen, and the writes that bind them."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        nodes: list[str],
        devices: dict[str, list[Device]],
    ) -> None:
        self.session = session
        self.turn = itertools.cycle(nodes)
        self.devices = devices
        self.device_turn = itertools.cycle(sorted(devices))
        self.used: collections.Counter[str] = collections.Counter()
        self.pending: asyncio.Queue[tuple[Key, str, list[str]]] = asyncio.Queue()
        self.queued: set[Key] = set()
        self.claims: dict[Key, dra.ResourceClaim] = {}
        self.waiting: dict[Key, core.Pod] = {}  # pods whose claims are not all seen yet

    def _claim_names(self, pod: core.Pod) -> list[str] | None:
        """The names of the pod's claims, or None while one is not made or not seen yet."""
        namespace = str((pod.get("metadata") or {}).get("namespace"))
        made = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        }
        names = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
            name = entry.get("resourceClaimName") or made.get(entry.get("name"))
            if not name or (namespace, name) not in self.claims:
                return None
            names.append(str(name))
        return names

    def pod(self, kind: str, obj: core.Pod) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self.waiting.pop(key, None)
            return
        if key in self.queued or (obj.get("spec") or {}).get("nodeName"):
            return
        names = self._claim_names(obj)
        if names is None:
            self.waiting[key] = obj
            return
        self.waiting.pop(key, None)
        self.queued.add(key)
        uid = str((obj.get("metadata") or {}).get("uid"))
        self.pending.put_nowait((key, uid, names))

    def claim(self, kind: str, obj: dra.ResourceClaim) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self.claims.pop(key, None)
            return
        self.claims[key] = obj
        for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
            waiting = self.waiting.get((key[0], str(owner.get("name"))))
            if owner.get("kind") == "Pod" and waiting is not None:
                self.pod("MODIFIED", waiting)

    async def _send(
        self,
        method: str,
        path: str,
        body: api_objects.KubeObject | dra.ResourceClaim,
        *,
        done: tuple[int, ...],
        merge: bool = False,
    ) -> bool:
        """Send, retried a few times; False (reported on stderr) when it never succeeded."""
        reason = ""
        for attempt in range(_ATTEMPTS):
            try:
                async with self.session.request(
                    method, path, json=body, headers=_MERGE if merge else None
                ) as response:
                    if response.status in done:
                        return True
                    reason = f"{response.status} {await response.text()}"
            except aiohttp.ClientError as exc:
                reason = str(exc)
            await wakeups.sleep_or_stop(0.05 * (attempt + 1))  # a retry's backoff
        print(f"null scheduler: {method} {path}: {reason}", file=sys.stderr)
        return False

    async def _allocate(self, namespace: str, name: str, *, pod: str, uid: str, node: str) -> bool:
        """Allocate claim ``name`` on ``node``'s next devices, round-robin, free or not, and
        reserve it for the pod: the finalizer, then the status, as a DRA scheduler writes."""
        claim = self.claims[(namespace, name)]
        devices = self.devices[node]
        results: list[dra.AllocatedDeviceResult] = []
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
            exactly = request.get("exactly")
            for _ in range(int((exactly.get("count") if exactly else None) or 1)):
                driver, pool, device = devices[self.used[node] % len(devices)]
                self.used[node] += 1
                results.append(
                    {"request": request["name"], "driver": driver, "pool": pool, "device": device}
                )
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
        finalizer: dra.ResourceClaim = {"metadata": {"finalizers": [_CLAIM_FINALIZER]}}
        if not await self._send("PATCH", path, finalizer, done=(200,), merge=True):
            return False
        term: dra.NodeSelectorTerm = {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]
        }
        status: dra.ResourceClaim = {
            "status": {
                "allocation": {
                    "devices": {"results": results},
                    "nodeSelector": {"nodeSelectorTerms": [term]},
                },
                "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}],
            }
        }
        return await self._send("PATCH", f"{path}/status", status, done=(200,), merge=True)

    async def bind(self) -> None:
        while True:
            (namespace, name), uid, claims = await self.pending.get()
            node = next(self.device_turn if claims and self.devices else self.turn)
            allocated = True
            for claim in claims:
                allocated = allocated and await self._allocate(
                    namespace, claim, pod=name, uid=uid, node=node
                )
            if not allocated:
                continue
            body: core.Binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            # 201 bound; 409 bound already; 404 deleted: nothing more to do.
            path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
            await self._send("POST", path, body, done=(201, 409, 404))


async def _inform(
    session: aiohttp.ClientSession,
    path: str,
    params: dict[str, str],
    handle: collections.abc.Callable[[str, _Watched], None],
) -> collections.abc.Callable[[], collections.abc.Awaitable[None]]:
    """List ``path`` into ``handle``; the watch that follows, resuming and relisting as an
    informer does, to run."""

    async def relist() -> str:
        async with session.get(path, params=params) as response:
            listed = await response.json()
        for item in listed.get("items") or ():
            handle("ADDED", item)
        return str(listed["metadata"]["resourceVersion"])

    version = await relist()

    async def watch() -> None:
        nonlocal version
        while True:
            query = {
                **params,
                "watch": "1",
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
            }
            async with session.get(path, params=query, timeout=aiohttp.ClientTimeout()) as response:
                async for line in response.content:
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        version = await relist()
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        # A watch event's object is of the kind watched.
                        handle(str(event["type"]), typing.cast("_Watched", obj))

    return watch


async def run(
    server: str, context: ssl.SSLContext | None, *, scheduler: str, concurrency: int
) -> None:
    """Bind ``scheduler``'s pods until cancelled (see the module docstring); ``context``
    authenticates to an HTTPS ``server`` (None: plain HTTP, as the emulator serves)."""
    connector = aiohttp.TCPConnector(limit=concurrency + 2, ssl=context if context else True)
    async with aiohttp.ClientSession(base_url=server, connector=connector) as session:
        nodes = await _nodes(session)
        if not nodes:
            raise SystemExit("null scheduler: the cluster has no nodes")
        null = _Null(session, nodes, await _devices(session))
        watches = []
        if null.devices:
            watches.append(await _inform(session, _CLAIMS, {}, null.claim))
        selector = {"fieldSelector": f"spec.schedulerName={scheduler},spec.nodeName="}
        watches.append(await _inform(session, "/api/v1/pods", selector, null.pod))
        print(
            f"null scheduler: watching pods of {scheduler} on {len(nodes)} nodes "
            f"({len(null.devices)} with devices)",
            flush=True,
        )
        await asyncio.gather(*(w() for w in watches), *(null.bind() for _ in range(concurrency)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m berth.cli.e2e_null", description=__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--ca", help="the server's CA (HTTPS)")
    parser.add_argument("--cert", help="client certificate (HTTPS)")
    parser.add_argument("--key", help="its key")
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    context: ssl.SSLContext | None = None
    if args.ca:
        context = ssl.create_default_context(cafile=args.ca)
        if args.cert:
            context.load_cert_chain(args.cert, args.key)

    async def serve() -> None:
        task = asyncio.create_task(
            run(args.server, context, scheduler=args.scheduler, concurrency=args.concurrency)
        )
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
