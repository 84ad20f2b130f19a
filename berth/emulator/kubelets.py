"""Simulated nodes: Node objects with heartbeats, and kubelets that run the pods bound to them.

Given node pools (:class:`NodePool`: count, allocatable, labels, taints), :class:`Kubelets`
creates one Ready Node per member (and its Lease in ``kube-node-lease``), each with its own pod
subnet (:mod:`berth.emulator.addresses`), renews leases and Ready heartbeats, and plays the
kubelet's part for pods bound to those nodes:

- admission: a pod whose requests exceed what is left on the node fails with ``OutOf<resource>``,
  as a real kubelet refuses an over-committed binding;
- Pending → Running (containers started and ready, an IP of the node's subnet that no other
  running pod holds) after ``start_delay``;
- with annotation ``sim.berth.io/duration`` (``90s``, ``1h30m``) the pod then Succeeds that long
  after it started;
- a deleted (or evicted) pod terminates: the kubelet confirms the deletion and it is gone.

Every delay is simulated time divided by ``speedup``, so demos and tests run fast. Pools are
written on the command line as ``SPEC`` (see :func:`parse_pool`). Everything runs on the
emulator's event loop and talks to :class:`~berth.emulator.rest.Api` in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import re
import typing

from berth.api import coordination, core, durations, fake_devices, keys, objects, quantities
from berth.api import errors as api_errors
from berth.emulator import addresses, errors, patches, resources, rest, storage
from berth.emulator.pods import as_pod
from berth.util import wakeups

__all__ = [
    "DURATION_ANNOTATION",
    "Kubelets",
    "NodePool",
    "POOL_LABEL",
    "SPEC_HELP",
    "as_node",
    "parse_pool",
    "pod_requests",
]

DURATION_ANNOTATION = keys.SIM_DURATION_ANNOTATION
POOL_LABEL = "sim.berth.io/pool"
KUBELET_VERSION = "v1.37.0-berth"
DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}
SPEC_HELP = """\
A node pool: COUNTx RESOURCES [label=KEY=VALUE]... [taint=KEY[=VALUE]:EFFECT]...
[devices=DRIVER:COUNT[,DRIVER:COUNT]...] [name=PREFIX]. RESOURCES is a comma list of
NAME=QUANTITY (pods defaults to 110). Example:
'10x cpu=8,memory=32Gi,nvidia.com/gpu=4 label=pool=gpu taint=dedicated=gpu:NoSchedule'
makes gpu-0 .. gpu-9 (the prefix defaults to the pool's "pool" label, else pool<N>).
devices= gives every node DRA devices of a fake driver: a ResourceSlice per node with COUNT
devices (gpu-0, gpu-1, ... for gpu.example.com) and a DeviceClass named after the driver;
'4x cpu=16 devices=gpu.example.com:8' makes 4 nodes of 8 such GPUs each."""

_SPEC = re.compile(r"^(?P<count>\d+)x$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MAX_DEVICES = 128  # devices a ResourceSlice may list


class PoolSpecError(ValueError):
    """A node pool written in a way :func:`parse_pool` does not understand."""


@dataclasses.dataclass(frozen=True)
class NodePool:
    """Identical nodes: ``count`` of them named ``<prefix>-<i>``."""

    prefix: str
    count: int
    allocatable: typing.Mapping[str, str] = dataclasses.field(
        default_factory=lambda: dict(DEFAULT_ALLOCATABLE)
    )
    labels: typing.Mapping[str, str] = dataclasses.field(default_factory=dict)
    taints: tuple[core.Taint, ...] = ()
    devices: tuple[tuple[str, int], ...] = ()
    """DRA devices of every node: (driver, count), published as a fake driver's slices
    (:mod:`berth.api.fake_devices`)."""

    def names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.count)]


def parse_pool(spec: str, *, index: int = 0) -> NodePool:
    """Parse ``10x cpu=8,memory=32Gi label=pool=gpu taint=k=v:NoSchedule name=gpu``."""
    words = spec.split()
    if not words or (match := _SPEC.match(words[0])) is None:
        raise PoolSpecError(f"{spec!r}: a pool starts with a count such as '10x'")
    allocatable: dict[str, str] = {"pods": "110"}
    labels: dict[str, str] = {}
    taints: list[core.Taint] = []
    devices: dict[str, int] = {}
    prefix = ""
    for word in words[1:]:
        key, _, value = word.partition("=")
        if key == "label":
            name, equals, text = value.partition("=")
            if not name or not equals:
                raise PoolSpecError(f"{word!r}: write label=KEY=VALUE")
            labels[name] = text
        elif key == "taint":
            body, colon, effect = value.rpartition(":")
            if not colon or effect not in _EFFECTS or not body:
                raise PoolSpecError(f"{word!r}: write taint=KEY[=VALUE]:{'|'.join(_EFFECTS)}")
            taint_key, _, taint_value = body.partition("=")
            taint: core.Taint = {"key": taint_key, "effect": effect}
            if taint_value:
                taint["value"] = taint_value
            taints.append(taint)
        elif key == "name":
            prefix = value
        elif key == "devices":
            for item in value.split(","):
                driver, colon, count = item.rpartition(":")
                if not colon or not fake_devices.DRIVER_PATTERN.match(driver):
                    raise PoolSpecError(
                        f"{word!r}: write devices=DRIVER:COUNT with a driver name such as "
                        "gpu.example.com"
                    )
                if not count.isdigit() or not 1 <= int(count) <= _MAX_DEVICES:
                    raise PoolSpecError(
                        f"{item!r}: the device count must be 1 to {_MAX_DEVICES} (a slice "
                        f"holds at most {_MAX_DEVICES} devices)"
                    )
                if driver in devices:
                    raise PoolSpecError(f"{word!r}: driver {driver} is named twice")
                devices[driver] = int(count)
        else:
            for item in word.split(","):
                resource, equals, quantity = item.partition("=")
                if not resource or not equals:
                    raise PoolSpecError(f"{item!r}: write RESOURCE=QUANTITY")
                try:
                    quantities.parse_quantity(quantity)
                except api_errors.QuantityError as exc:
                    raise PoolSpecError(f"{item!r}: {exc}") from None
                allocatable[resource] = quantity
    if len(allocatable) == 1:
        allocatable.update(DEFAULT_ALLOCATABLE)
    prefix = prefix or labels.get("pool") or f"pool{index}"
    return NodePool(
        prefix, int(match["count"]), allocatable, labels, tuple(taints), tuple(devices.items())
    )


def as_node(obj: objects.KubeObject) -> core.Node:
    """A stored object of the nodes resource as the Node it is. Nothing checks a node's fields
    on write (as with the API server, whose node strategy checks little): read them with
    :func:`berth.api.objects.part`."""
    return typing.cast(core.Node, obj)


def _pod_cidr(node: core.Node) -> str:
    return str(objects.part(node.get("spec")).get("podCIDR") or "")


def _subnet(node: core.Node, *, pods: int) -> ipaddress.IPv4Network | None:
    """The pod subnet an existing node declares, if it is one with room for ``pods`` pods."""
    try:
        subnet = ipaddress.IPv4Network(_pod_cidr(node))
    except ValueError:
        return None
    return subnet if subnet.prefixlen <= addresses.subnet_prefix(pods) else None


def pod_requests(pod: core.Pod) -> dict[str, int]:
    """A pod's effective requests in milli-units (containers summed, max with init containers).

    Malformed parts (a list where a map belongs, an unparsable quantity: the API refuses them,
    but a pod may predate that check) raise ``ValueError``: the kubelet fails that pod alone.
    """
    spec = objects.part(pod.get("spec"))
    total: dict[str, int] = {"pods": 1000}
    try:
        for container in spec.get("containers") or ():
            for name, value in _requests(container).items():
                total[name] = total.get(name, 0) + quantities.parse_milli(value)
        for container in spec.get("initContainers") or ():
            for name, value in _requests(container).items():
                total[name] = max(total.get(name, 0), quantities.parse_milli(value))
        for name, value in objects.part(spec.get("overhead")).items():
            total[name] = total.get(name, 0) + quantities.parse_milli(value)
    except (api_errors.QuantityError, TypeError) as exc:
        raise ValueError(f"unreadable resource requests: {exc}") from None
    return total


def _requests(container: core.Container) -> dict[str, str]:
    return objects.part(objects.part(objects.part(container).get("resources")).get("requests"))


@dataclasses.dataclass
class _Node:
    name: str
    allocatable: dict[str, int]
    pod_ips: addresses.PodAddresses
    used: dict[str, int] = dataclasses.field(default_factory=dict)
    pods: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # uid -> requests


class Kubelets:
    """Simulated kubelets for the nodes of some pools (start with :meth:`start`)."""

    def __init__(
        self,
        api: rest.Api,
        *,
        pools: typing.Sequence[NodePool],
        speedup: float = 1.0,
        heartbeat: float = 10.0,
        start_delay: float = 1.0,
    ) -> None:
        if speedup <= 0:
            raise ValueError("speedup must be positive")
        self.api = api
        self.pools = tuple(pools)
        self.speedup = speedup
        self.heartbeat = heartbeat
        """Simulated seconds between lease renewals (node Ready heartbeats every fourth)."""
        self.start_delay = start_delay
        """Simulated seconds from binding to Running (image pull and container start)."""
        self.nodes: dict[str, _Node] = {}
        self._timers: dict[str, list[asyncio.TimerHandle]] = {}  # pod uid -> pending steps
        self._started: set[str] = set()
        self._terminating: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._watcher: storage.Watcher | None = None

    # ----- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        nodes = self.api.resource("v1", "nodes")
        leases = self.api.resource("coordination.k8s.io/v1", "leases")
        existing = [as_node(n) for n in self.api.storage.list(nodes.key)]
        carver = addresses.SubnetCarver(taken=[_pod_cidr(n) for n in existing])
        for pool in self.pools:
            allocatable = {k: quantities.parse_milli(v) for k, v in pool.allocatable.items()}
            capacity = allocatable.get("pods", 0) // 1000
            for name in pool.names():
                node = self.api.storage.get(nodes.key, "", name)
                subnet = _subnet(as_node(node), pods=capacity) if node is not None else None
                if subnet is None:
                    subnet = carver.carve(pods=capacity)
                if node is None:
                    self.api.create(nodes, self._node_object(pool, name, pod_cidr=str(subnet)))
                if self.api.storage.get(leases.key, "kube-node-lease", name) is None:
                    self.api.create(leases, self._lease_object(name), namespace="kube-node-lease")
                self._publish_devices(pool, name)
                self.nodes[name] = _Node(name, allocatable, addresses.PodAddresses(subnet))
        self.api.graceful_pod_deletion = self._waits_for_us
        pods = self.api.resource("v1", "pods")
        self._watcher = self.api.storage.subscribe(key=pods.key, namespace=None)
        for pod in self.api.storage.list(pods.key):
            self._observe(as_pod(pod))
        self._tasks = [
            asyncio.create_task(self._follow_pods(), name="kubelets: pods"),
            asyncio.create_task(self._beat(), name="kubelets: heartbeats"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for handles in self._timers.values():
            for handle in handles:
                handle.cancel()
        self._timers.clear()
        if self._watcher is not None:
            self.api.storage.unsubscribe(self._watcher)
            self._watcher = None
        self.api.graceful_pod_deletion = lambda pod: False

    def _publish_devices(self, pool: NodePool, node: str) -> None:
        """Play the pool's fake DRA drivers: the node's slice, and the driver's class."""
        if not pool.devices:
            return
        classes = self.api.resource("resource.k8s.io/v1", "deviceclasses")
        slices = self.api.resource("resource.k8s.io/v1", "resourceslices")
        for driver, count in pool.devices:
            if self.api.storage.get(classes.key, "", driver) is None:
                self.api.create(classes, fake_devices.device_class(driver))
            made = fake_devices.node_slice(driver=driver, node=node, count=count)
            if self.api.storage.get(slices.key, "", made["metadata"]["name"]) is None:
                self.api.create(slices, made)

    def _waits_for_us(self, obj: objects.KubeObject) -> bool:
        pod = as_pod(obj)
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        running = status.get("phase") not in ("Succeeded", "Failed")
        return bool(spec.get("nodeName") in self.nodes and running and self._tasks)

    # ----- node objects ---------------------------------------------------------------------

    def _node_object(self, pool: NodePool, name: str, *, pod_cidr: str) -> core.Node:
        now = self.api.timestamp()
        index = len(self.nodes)
        address = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            POOL_LABEL: pool.prefix,
            **pool.labels,
        }
        conditions: list[core.NodeCondition] = [
            {
                "type": kind,
                "status": "False",
                "reason": f"KubeletHas{reason}",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for kind, reason in (
                ("MemoryPressure", "SufficientMemory"),
                ("DiskPressure", "NoDiskPressure"),
                ("PIDPressure", "SufficientPID"),
            )
        ]
        conditions.append(
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status (simulated)",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        )
        spec: core.NodeSpec = {"podCIDR": pod_cidr}
        if pool.taints:
            spec["taints"] = [t.copy() for t in pool.taints]
        return {
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {
                "capacity": dict(pool.allocatable),
                "allocatable": dict(pool.allocatable),
                "conditions": conditions,
                "addresses": [
                    {"type": "InternalIP", "address": address},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": "",
                    "osImage": "Berth simulated node",
                    "kernelVersion": "6.1.0",
                    "containerRuntimeVersion": "berth://simulated",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "machineID": name,
                    "systemUUID": name,
                    "bootID": name,
                },
            },
        }

    def _lease_object(self, name: str) -> coordination.Lease:
        return {
            "metadata": {"name": name},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": 40,
                "renewTime": self._micro_time(),
            },
        }

    def _micro_time(self) -> str:
        moment = self.api.clock.now()
        return self.api.timestamp(moment).replace("Z", f".{int(moment % 1 * 1e6):06d}Z")

    async def _beat(self) -> None:
        leases = self.api.resource("coordination.k8s.io/v1", "leases")
        nodes = self.api.resource("v1", "nodes")
        beats = 0
        while True:
            await wakeups.sleep_or_stop(self.heartbeat / self.speedup)  # stop() cancels us
            beats += 1
            for name in list(self.nodes):
                if self.api.storage.get(nodes.key, "", name) is None:
                    self.nodes.pop(name)  # someone deleted the node: its kubelet is gone
                    continue
                if self.api.storage.get(leases.key, "kube-node-lease", name) is not None:
                    self.api.patch(
                        leases,
                        {"spec": {"renewTime": self._micro_time()}},
                        namespace="kube-node-lease",
                        name=name,
                        patch_type=patches.MERGE_PATCH,
                    )
                if beats % 4 == 0:
                    self._heartbeat_node(nodes, name)

    def _heartbeat_node(self, nodes: resources.Resource, name: str) -> None:
        node = self.api.storage.get(nodes.key, "", name)
        if node is None:
            return
        now = self.api.timestamp()
        conditions: list[core.NodeCondition] = [
            {**c, "lastHeartbeatTime": now}
            for c in objects.part(as_node(node).get("status")).get("conditions") or ()
        ]
        self.api.patch(
            nodes,
            {"status": {"conditions": conditions}},
            namespace=None,
            name=name,
            patch_type=patches.MERGE_PATCH,
            subresource="status",
        )

    # ----- pods -----------------------------------------------------------------------------

    async def _follow_pods(self) -> None:
        assert self._watcher is not None
        while True:
            change = await self._watcher.queue.get()
            if change is None:
                return
            if change.type == "DELETED":
                self._forget(as_pod(change.object))
            else:
                self._observe(as_pod(change.object))

    def _later(self, uid: str, delay: float, step: typing.Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()

        def run() -> None:
            # The pod may have changed or vanished meanwhile: the API refuses, the kubelet goes on.
            with contextlib.suppress(errors.StatusError):
                step()

        handle = loop.call_later(max(0.0, delay / self.speedup), run)
        self._timers.setdefault(uid, []).append(handle)

    def _observe(self, pod: core.Pod) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        node = self.nodes.get(str(spec.get("nodeName") or ""))
        if node is None:
            return
        uid = str(meta.get("uid"))
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            if uid not in self._terminating:
                self._terminating.add(uid)
                self._cancel(uid)
                self._later(uid, 0.0, lambda: self._confirm_deletion(pod))
            return
        if phase != "Pending" or uid in self._started:
            return
        self._started.add(uid)
        try:
            requests = pod_requests(pod)
        except ValueError as exc:
            # Fail this pod as a kubelet refuses what it cannot admit; the node runs on.
            failure: core.PodStatus = {
                "phase": "Failed",
                "reason": "UnexpectedAdmissionError",
                "message": f"Pod was rejected: {exc}",
            }
            self._later(uid, 0.0, lambda: self._patch_status(pod, failure))
            return
        short = [
            r for r, v in requests.items() if node.used.get(r, 0) + v > node.allocatable.get(r, 0)
        ]
        if short:
            self._later(uid, 0.0, lambda: self._reject(pod, node, short[0], requests))
            return
        node.pods[uid] = requests
        for name, value in requests.items():
            node.used[name] = node.used.get(name, 0) + value
        node.pod_ips.assign(uid)
        self._later(uid, self.start_delay, lambda: self._run(pod, node))

    def _release(self, uid: str) -> None:
        for node in self.nodes.values():
            requests = node.pods.pop(uid, None)
            if requests is not None:
                for name, value in requests.items():
                    node.used[name] = node.used.get(name, 0) - value
                node.pod_ips.release(uid)

    def _cancel(self, uid: str) -> None:
        for handle in self._timers.pop(uid, []):
            handle.cancel()

    def _forget(self, pod: core.Pod) -> None:
        uid = str(pod["metadata"].get("uid"))
        self._cancel(uid)
        self._started.discard(uid)
        self._terminating.discard(uid)
        self._release(uid)

    def _patch_status(self, pod: core.Pod, status: core.PodStatus) -> None:
        pods = self.api.resource("v1", "pods")
        meta = pod["metadata"]
        current = self.api.storage.get(pods.key, meta["namespace"], meta["name"])
        if current is None or current["metadata"].get("uid") != meta.get("uid"):
            return
        self.api.patch(
            pods,
            {"status": status},
            namespace=meta["namespace"],
            name=meta["name"],
            patch_type=patches.STRATEGIC_MERGE_PATCH,
            subresource="status",
        )

    def _reject(self, pod: core.Pod, node: _Node, resource: str, requests: dict[str, int]) -> None:
        used, capacity = node.used.get(resource, 0), node.allocatable.get(resource, 0)
        reason = f"OutOf{resource}" if resource != "pods" else "OutOfpods"
        self._patch_status(
            pod,
            {
                "phase": "Failed",
                "reason": reason,
                "message": f"Pod was rejected: Node didn't have enough resource: {resource}, "
                f"requested: {requests[resource]}m, used: {used}m, capacity: {capacity}m",
            },
        )

    def _containers(
        self, pod: core.Pod, state: core.ContainerState, *, ready: bool
    ) -> list[core.ContainerStatus]:
        return [
            {
                "name": c.get("name", ""),  # the pod strategy requires both
                "image": c.get("image", ""),
                "imageID": f"sim://{c.get('image')}",
                "containerID": f"berth://{pod['metadata'].get('uid')}-{c.get('name')}",
                "ready": ready,
                "started": ready,
                "restartCount": 0,
                "state": state,
            }
            for c in (pod.get("spec") or {}).get("containers") or ()
        ]

    def _conditions(self, *, ready: bool, reason: str = "") -> list[core.PodCondition]:
        now = self.api.timestamp()
        status = "True" if ready else "False"
        conditions: list[core.PodCondition] = [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": status, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": status, "lastTransitionTime": now},
        ]
        if reason:
            for condition in conditions[2:]:
                condition["reason"] = reason
        return conditions

    def _run(self, pod: core.Pod, node: _Node) -> None:
        now = self.api.timestamp()
        # The Node object may be gone (the API then refuses, and the pod never runs).
        node_object = as_node(
            self.api.get(self.api.resource("v1", "nodes"), namespace=None, name=node.name)
        )
        self._patch_status(
            pod,
            {
                "phase": "Running",
                "startTime": now,
                "hostIP": node_object["status"]["addresses"][0]["address"],
                "podIP": node.pod_ips.assign(str(pod["metadata"]["uid"])),
                "conditions": self._conditions(ready=True),
                "containerStatuses": self._containers(
                    pod, {"running": {"startedAt": now}}, ready=True
                ),
            },
        )
        annotation = (pod["metadata"].get("annotations") or {}).get(DURATION_ANNOTATION)
        if annotation is None:
            return
        try:
            seconds = durations.parse_ms(annotation) / 1000
        except api_errors.ApiError:
            return  # a malformed duration: the pod runs forever, as if it had none
        self._later(str(pod["metadata"]["uid"]), seconds, lambda: self._succeed(pod, started=now))

    def _succeed(self, pod: core.Pod, *, started: str) -> None:
        now = self.api.timestamp()
        terminated: core.ContainerState = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": now,
            }
        }
        self._patch_status(
            pod,
            {
                "phase": "Succeeded",
                "conditions": self._conditions(ready=False, reason="PodCompleted"),
                "containerStatuses": self._containers(pod, terminated, ready=False),
            },
        )
        self._release(str(pod["metadata"]["uid"]))

    def _confirm_deletion(self, pod: core.Pod) -> None:
        meta = pod["metadata"]
        pods = self.api.resource("v1", "pods")
        self._release(str(meta.get("uid")))
        current = self.api.storage.get(pods.key, meta["namespace"], meta["name"])
        if current is not None and current["metadata"].get("uid") == meta.get("uid"):
            self.api.delete(
                pods,
                namespace=meta["namespace"],
                name=meta["name"],
                options={"gracePeriodSeconds": 0, "preconditions": {"uid": meta.get("uid")}},
            )
