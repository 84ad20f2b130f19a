"""``berth bench pod-events``: the scheduler's CPU for each watch event of a pod.

Every pod Berth schedules reaches its cache at least three times: created (pending), bound
(``spec.nodeName`` and ``PodScheduled``), running (KWOK's or the kubelet's status: phase,
``startTime``, conditions, container statuses). Each event is a whole pod as the API server
sends it; :meth:`~berth.scheduler.snapshot.cache.ClusterCache.add_pod` turns it into a
``PodInfo``. This replays that lifecycle for ``pods`` pods shaped as the API server returns
scheduler_perf's basic pod (its defaults filled in: tolerations, ``managedFields``, ...),
through a cache configured as ``berth run`` configures it, each event decoded from JSON just
before it is added, as the informer does; only ``add_pod`` is timed, in process CPU time.

Prints ``pods``, ``events``, ``us_per_event`` and the mean CPU microseconds of each kind of
event (``us_created``, ``us_bound``, ``us_running``), and ``rss_mb`` (peak resident memory,
the pods standing in the cache at the end).
"""

from __future__ import annotations

import copy
import json
import resource
import time
import typing

from berth.api import keys
from berth.scheduler.snapshot import cache

__all__ = ["PodEventsResult", "lifecycle", "run"]

# Untyped: a Pod as the API server's watch sends it, every field the bench makes the cache
# parse (managedFields, dnsPolicy, qosClass...), most of which berth.api's Pod record does not
# declare because Berth never reads them.
Obj = dict[str, typing.Any]
_CREATED = "2026-11-28T10:00:00Z"


def _created(index: int) -> Obj:
    """Pod ``index`` as the API server answers its creation (defaults and managedFields)."""
    name = f"pod-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"00000000-0000-0000-0000-{index:012d}",
            "resourceVersion": str(1000 + 3 * index),
            "generation": 1,
            "creationTimestamp": _CREATED,
            "labels": {"app": "basic"},
            "managedFields": [
                {
                    "manager": "bench",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": _CREATED,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {'k:{"name":"pause"}': {".": {}}}},
                    },
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "automountServiceAccountToken": False,
            "securityContext": {},
            "schedulerName": keys.DEFAULT_SCHEDULER_NAME,
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{reason}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for reason in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def lifecycle(index: int, /) -> tuple[Obj, Obj, Obj]:
    """The three versions of pod ``index`` its watch delivers: created, bound, running."""
    created = _created(index)
    bound = copy.deepcopy(created)
    bound["metadata"]["resourceVersion"] = str(1001 + 3 * index)
    bound["spec"]["nodeName"] = f"node-{index % 50}"
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": _CREATED}
    bound["status"]["conditions"] = [scheduled]
    running = copy.deepcopy(bound)
    running["metadata"]["resourceVersion"] = str(1002 + 3 * index)
    running["status"].update(
        phase="Running",
        startTime=_CREATED,
        hostIP="10.0.0.1",
        podIP=f"10.1.{index // 250 % 250}.{index % 250}",
        conditions=[
            scheduled,
            *(
                {"type": kind, "status": "True", "lastTransitionTime": _CREATED}
                for kind in ("Initialized", "Ready", "ContainersReady")
            ),
        ],
        containerStatuses=[
            {
                "name": "pause",
                "ready": True,
                "restartCount": 0,
                "image": "registry.k8s.io/pause:3.10",
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": _CREATED}},
            }
        ],
    )
    return created, bound, running


class PodEventsResult(typing.TypedDict):
    """The JSON object ``berth bench pod-events`` prints (CPU microseconds per event)."""

    pods: int
    events: int
    us_per_event: float
    us_created: float
    us_bound: float
    us_running: float
    rss_mb: float


def run(*, pods: int) -> PodEventsResult:
    """Replay ``pods`` lifecycles through a cache and report the CPU per event."""
    texts = [json.dumps(version) for index in range(pods) for version in lifecycle(index)]
    warm = cache.ClusterCache(plain_pods_queue=keys.DEFAULT_QUEUE)
    for version in lifecycle(pods):
        warm.add_pod(version)  # the first pod's lazy imports are not an event's cost
    # As berth run: its own scheduler name, plain pods in the default queue.
    live = cache.ClusterCache(plain_pods_queue=keys.DEFAULT_QUEUE)
    spent = [0.0, 0.0, 0.0]
    clock = time.process_time
    for number, text in enumerate(texts):
        obj = json.loads(text)  # decoded just before, as the informer hands it over
        started = clock()
        live.add_pod(obj)
        spent[number % 3] += clock() - started
    created, bound, running = (seconds / pods * 1e6 for seconds in spent)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "pods": pods,
        "events": len(texts),
        "us_per_event": round(sum(spent) / len(texts) * 1e6, 1),
        "us_created": round(created, 1),
        "us_bound": round(bound, 1),
        "us_running": round(running, 1),
        "rss_mb": round(peak / 1024, 1),
    }
