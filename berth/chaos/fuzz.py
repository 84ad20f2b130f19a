"""The hostile-tenant fuzzer: one tenant writes garbage, every other tenant must not notice.

Against any kubeconfig with Berth running (the emulator, a real cluster): a *well-behaved*
tenant has a Queue limited to ``limit_cpu`` cpus and more one-cpu pods than fit in it; a
*hostile* tenant, in its own namespace, sends objects hypothesis generates — pods, PodGroups,
Queues and Reservations with quantities past int64 or malformed, lists where maps belong,
durations of centuries, counts of 2^63, negative numbers, strings where numbers belong —
alternately through the Python client and the real ``kubectl``. Afterwards the invariants the
issue lists are checked from the API server's own records:

- no answer to a hostile object is a 5xx (bad input is the client's error, never the server's);
- every pod bound at most once (successful ``pods/binding`` per pod, from the audit log when
  one is given);
- the well-behaved queue is at its limit, not over it, and none of its pods failed;
- Berth still schedules: a canary pod created last is bound.

:func:`run` returns a :class:`Report` (objects tried, answers by status class, violations);
``berth chaos fuzz`` prints it as JSON.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import multiprocessing
import os
import pathlib
import subprocess
import time
import typing

from berth.api import core, keys, objects
from berth.chaos import audits
from berth.kube.transport import clients, errors, rest
from berth.util import extras, wakeups

try:
    import hypothesis
    import hypothesis.strategies as st
except ModuleNotFoundError as exc:
    raise extras.missing("chaos", exc) from exc

__all__ = ["HostileObject", "Report", "ReportJson", "hostile_objects", "run"]


class HostileObject(typing.TypedDict):
    """What the hostile tenant sends: a real kind (so that the API server routes it), its
    metadata (names, Berth's labels), and a ``spec`` of garbage by design (wrong types, huge
    numbers, unknown keys): no record of the kind could hold it, so its values are ``object``,
    and what the API server and Berth make of them is the point."""

    apiVersion: str
    kind: str
    metadata: typing.NotRequired[objects.ObjectMeta]  # the name is set by the caller
    spec: dict[str, object]


_GROUP_VERSION = keys.API_VERSION

_HUGE = st.sampled_from(
    ["10Pi", "99999999999999999999", "1e19", "9223372036854775807", "10E", "1Ei", "-1", "-10Gi"]
)
_GARBAGE = st.one_of(
    st.lists(st.sampled_from(["cpu", "memory", 1]), max_size=3),
    st.dictionaries(st.sampled_from(["a", "cpu"]), st.integers(), max_size=2),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
)
_QUANTITY = st.one_of(_HUGE, _GARBAGE, st.sampled_from(["1", "500m", "1Gi"]))
_RESOURCES = st.one_of(
    st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]), _QUANTITY),
    _GARBAGE,
)
_COUNT = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), 0]),
    _GARBAGE,
)
_DURATION = st.one_of(
    st.sampled_from(["99999999999h", "2562048h", "1e9h", "-1h", "0", "1h", "h", "1.5.5h"]),
    _GARBAGE,
)


def _named(kind: str, index: int) -> str:
    return f"fuzz-{kind.lower()}-{index:05d}"


@st.composite
def hostile_objects(draw: st.DrawFn, *, scheduler: str = "berth-scheduler") -> HostileObject:
    """One hostile object of a random kind (its name is set by the caller)."""
    kind = draw(st.sampled_from(["Pod", "PodGroup", "Queue", "Reservation"]))
    if kind == "Pod":
        container: dict[str, object] = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
        container["resources"] = draw(
            st.one_of(
                st.fixed_dictionaries({"requests": _RESOURCES}),
                st.fixed_dictionaries({"requests": _RESOURCES, "limits": _RESOURCES}),
                _GARBAGE,
            )
        )
        labels = draw(
            st.dictionaries(
                st.sampled_from([keys.QUEUE_LABEL, keys.POD_GROUP_LABEL, keys.RESERVATION_LABEL]),
                st.sampled_from(["fuzz", "default", "fuzz-queue", "x" * 63]),
                max_size=2,
            )
        )
        annotations = draw(
            st.dictionaries(
                st.sampled_from([f"{keys.GROUP}/reserve-pod", "sim.berth.io/duration", "other"]),
                st.sampled_from(["true", "1e9h", "99999999999h", "x"]),
                max_size=2,
            )
        )
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": labels, "annotations": annotations},
            "spec": {"schedulerName": scheduler, "containers": [container]},
        }
    spec: dict[str, object]
    if kind == "PodGroup":
        spec = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "minMember": _COUNT,
                    "minResources": _RESOURCES,
                    "queue": st.sampled_from(["fuzz", "", "no-such-queue"]),
                    "scheduleTimeoutSeconds": _COUNT,
                },
            )
        )
        return {"apiVersion": _GROUP_VERSION, "kind": "PodGroup", "spec": spec}
    if kind == "Queue":
        spec = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "limit": _RESOURCES,
                    "guaranteed": _RESOURCES,
                    "weight": _COUNT,
                    "priority": _COUNT,
                    # Queues are cluster-scoped: an admin's, not a tenant's; a hostile one
                    # still must not break the well-behaved tenant's queue or the default.
                    "parent": st.sampled_from(["fuzz-queue", ""]),
                },
            )
        )
        return {"apiVersion": _GROUP_VERSION, "kind": "Queue", "spec": spec}
    template = {
        "spec": {"containers": [{"name": "r", "resources": {"requests": draw(_RESOURCES)}}]}
    }
    spec = {"template": template, "owners": [{"object": {"name": "nobody"}}]}
    spec |= draw(st.fixed_dictionaries({}, optional={"ttl": _DURATION, "expires": _GARBAGE}))
    return {"apiVersion": _GROUP_VERSION, "kind": "Reservation", "spec": spec}


class ReportJson(typing.TypedDict):
    """The JSON object ``berth chaos fuzz`` prints."""

    objects_tried: int
    through_kubectl: int
    answers: dict[str, int]  # the API server's answer (code or reason) -> how often
    violations: list[str]


@dataclasses.dataclass
class Report:
    """What a run tried and found."""

    tried: int = 0
    through_kubectl: int = 0
    answers: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    violations: list[str] = dataclasses.field(default_factory=list)

    def as_dict(self) -> ReportJson:
        return {
            "objects_tried": self.tried,
            "through_kubectl": self.through_kubectl,
            "answers": dict(sorted(self.answers.items())),
            "violations": self.violations,
        }


def generate(count: int, *, seed: int) -> list[HostileObject]:
    """``count`` hostile objects, reproducibly from ``seed``."""
    found: list[HostileObject] = []

    @hypothesis.settings(
        max_examples=count,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.seed(seed)
    @hypothesis.given(hostile_objects())
    def collect(obj: HostileObject) -> None:
        if len(found) < count:
            found.append(obj)

    collect()
    return found


async def _generate_apart(count: int, *, seed: int) -> list[HostileObject]:
    """:func:`generate` in a fresh process: hypothesis fails a draw during which the global
    ``random`` changed, and an operator running in this process (Kopf's thread, leader election's
    jitter) may draw from it at any moment."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(generate, count, seed=seed))


def _path(kind: str, namespace: str) -> str:
    if kind == "Pod":
        return f"/api/v1/namespaces/{namespace}/pods"
    plural = {"PodGroup": "podgroups", "Queue": "queues", "Reservation": "reservations"}[kind]
    if kind == "Queue":
        return f"/apis/{_GROUP_VERSION}/{plural}"
    return f"/apis/{_GROUP_VERSION}/namespaces/{namespace}/{plural}"


def _kubectl(kubeconfig: pathlib.Path, manifest: str, namespace: str, kubectl: str) -> str:
    """``kubectl create -f -`` of the JSON ``manifest``; the status class of the answer
    ("2xx", "4xx", "5xx")."""
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    done = subprocess.run(
        [kubectl, "create", "--validate=false", "-n", namespace, "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    if done.returncode == 0:
        return "2xx"
    text = done.stderr
    if "InternalError" in text or "Internal error" in text or "(500)" in text:
        return "5xx"
    return "4xx"


async def _wait_bound(api: clients.AsyncApiClient, path: str, *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = await rest.request(api, method="GET", path=path)
        if (pod.get("spec") or {}).get("nodeName"):
            return True
        await wakeups.sleep_or_stop(0.1)
    return False


def _one_cpu_pod(name: str, *, queue: str, scheduler: str) -> core.Pod:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {keys.QUEUE_LABEL: queue}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                }
            ],
        },
    }


async def run(
    *,
    kubeconfig: pathlib.Path,
    examples: int,
    seed: int = 0,
    kubectl: str | None = None,
    audit_log: pathlib.Path | None = None,
    limit_cpu: int = 4,
    settle: float = 10.0,
    canary_timeout: float = 120.0,
    namespace: str = "fuzz",
    tenant_namespace: str = "tenant",
    scheduler: str = "berth-scheduler",
) -> Report:
    """Run the fuzzer (see the module docstring). ``kubectl`` sends every third object.

    ``canary_timeout`` bounds the wait for the canary's binding: generous, because on a loaded
    two-core machine with faults injected a healthy scheduler can take tens of seconds."""
    report = Report()
    queue = f"{tenant_namespace}-limited"
    # Only this run's bindings count: pod names are reused across runs on a long-lived cluster.
    _, audited_from = audits.read(audit_log) if audit_log is not None else ([], 0)
    async with clients.connect_async(kubeconfig=str(kubeconfig)) as connection:
        api = connection.api
        for name in (namespace, tenant_namespace):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            with contextlib.suppress(errors.Conflict):
                await rest.request(api, method="POST", path="/api/v1/namespaces", body=body)
        queue_body = {
            "apiVersion": _GROUP_VERSION,
            "kind": "Queue",
            "metadata": {"name": queue},
            "spec": {"limit": {"cpu": str(limit_cpu)}},
        }
        await rest.request(
            api, method="POST", path=f"/apis/{_GROUP_VERSION}/queues", body=queue_body
        )
        tenant_pods = [f"steady-{i}" for i in range(limit_cpu + 2)]
        for name in tenant_pods:
            await rest.request(
                api,
                method="POST",
                path=f"/api/v1/namespaces/{tenant_namespace}/pods",
                body=_one_cpu_pod(name, queue=queue, scheduler=scheduler),
            )
        for index, obj in enumerate(await _generate_apart(examples, seed=seed)):
            obj.setdefault("metadata", {})["name"] = _named(obj["kind"], index)
            report.tried += 1
            if kubectl is not None and index % 3 == 2:
                report.through_kubectl += 1
                manifest = json.dumps(obj)
                answer = await asyncio.to_thread(_kubectl, kubeconfig, manifest, namespace, kubectl)
            else:
                try:
                    path = _path(obj["kind"], namespace)
                    await rest.request(api, method="POST", path=path, body=obj)
                    answer = "2xx"
                except errors.APIError as exc:
                    answer = f"{exc.status // 100}xx"
            report.answers[answer] += 1
            if answer == "5xx":
                report.violations.append(f"{obj['kind']} {index} answered 5xx: {json.dumps(obj)}")
        await wakeups.sleep_or_stop(settle)  # what the fuzzed objects set off has run
        canary = _one_cpu_pod("canary", queue="default", scheduler=scheduler)
        path = f"/api/v1/namespaces/{tenant_namespace}/pods"
        await rest.request(api, method="POST", path=path, body=canary)
        if not await _wait_bound(api, f"{path}/canary", timeout=canary_timeout):
            report.violations.append("the canary pod was not bound: Berth stopped scheduling")
        listed = await rest.request(api, method="GET", path=path)
        steady = [p for p in listed["items"] if p["metadata"]["name"] in tenant_pods]
        bound = [p for p in steady if p["spec"].get("nodeName")]
        if len(bound) > limit_cpu:
            report.violations.append(f"queue {queue} is over its limit: {len(bound)} > {limit_cpu}")
        if len(bound) < limit_cpu:
            report.violations.append(f"queue {queue} got {len(bound)} of its {limit_cpu} cpus")
        failed = [
            p["metadata"]["name"] for p in steady if p.get("status", {}).get("phase") == "Failed"
        ]
        if failed:
            report.violations.append(f"well-behaved pods failed: {failed}")
    if audit_log is not None:
        entries, _ = audits.read(audit_log, offset=audited_from)
        binds = collections.Counter(
            e.uri.split("?")[0]
            for e in entries
            if e.uri.split("?")[0].endswith("/binding") and e.succeeded
        )
        twice = [uri for uri, n in binds.items() if n > 1]
        if twice:
            report.violations.append(f"pods bound more than once: {twice}")
    return report
