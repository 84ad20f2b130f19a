"""The simulation report: a recorder's facts as the JSON document ``berth sim`` prints.

Shape (times are seconds of virtual time, resources in the API's quantity strings)::

    apiVersion, kind: Report, scenario, seed, end
    cluster:      nodes, capacity, allocated [{t, resources}], heldIdle [{t, resources}]
    workloads:    [{namespace, name, workload, queue, minMember, submitted, started, finished,
                    wait, pods {pod: node|null}, evictions, evictedAt [t], restarts, reason}]
    queues:       {name: {weight, guaranteed, limit, fairShare, fairShareSeries [{t, resources}],
                          schedulerFairShare [{t, resources}] | null, allocated [{t, resources}],
                          guaranteedSeries [{t, resources}], changes [{t, weight, guaranteed}],
                          evictions, workLost {resource: unit-seconds}}}
    reservations: [{namespace, name, phase, nodeName, availableAt, reason, message, owners,
                    currentOwners}]
    podGroups:    [{namespace, name, phase, reason, message, scheduled, running, succeeded,
                    failed, queuePosition, queuePending}]
    queueStatuses: {name: {state, stateReason, allocated, requested, fairShare, pending,
                           running, pendingPods, runningPods}}
    summary:      utilization {resource: fraction}, wait {queue: {p50, p90, jobs, started,
                  pendingAtEnd}}, waitBySize [{resource, upTo, jobs, started, p50, p90, max}],
                  jainIndex, contendedSeconds, partialGangs, jobs, evictions,
                  workLost {resource: unit-seconds}, emptyNodes {mean, atEnd}, cycles,
                  decisions

``heldIdle`` is the free capacity the starvation guard kept idle after each cycle: nodes
draining for starving gangs and for Reservations booked for later (``startAt``), less what
backfill took. A reservation's ``availableAt`` is when it was placed (null: never).

How the summary is computed (the README of ``examples/sim`` repeats it):

- ``utilization``: time-averaged bound requests over capacity, from 0 to ``end``.
- ``wait``: submitted to started (``minMember`` pods bound), nearest-rank p50/p90 per queue;
  jobs still waiting at the end count with the time they waited so far (a lower bound), so a
  starved queue shows up instead of vanishing from the numbers.
- ``waitBySize``: the same waits by job size (and their ``max``): a job's size is what its
  pods ask for together of its dominant resource (the largest share of the cluster's
  capacity), rounded up to a power of two of the resource's unit (``upTo``: a 32-GPU gang is
  in the row ``nvidia.com/gpu`` up to ``32``, with the 17- to 31-GPU jobs), one row per
  resource and size, smallest first.
- ``fairShare``: the queue's weighted entitlement when every queue wants everything
  (:mod:`berth.sim.fairness`); ``fairShareSeries`` when queues change during the run.
  ``schedulerFairShare`` is the fair share the scheduler's queue plugin (Proportion) computed
  after each cycle, which also follows demand; ``null`` when no plugin published one.
  ``guaranteedSeries`` is the queue's guarantee over time; ``changes`` lists the moments after
  the start when its weight or guarantee changed (a timed ``apply``), with the new values.
- ``jainIndex``: at every moment when at least two queues have demand (running or pending
  pods), each such queue's allocation is divided by its demand-capped weighted fair share (the
  work-conserving max-min split), both as dominant shares of the cluster (the largest fraction
  of any resource pods ask for); Jain's index of those ratios is averaged over time. 1.0
  means every queue got its fair share throughout; ``null`` means no two queues ever competed
  (``contendedSeconds`` is 0).
- ``evictions`` (per queue and in total): pods the scheduler evicted; ``workLost``: what
  they, and the members of their gangs taken down with them, had run since they were bound,
  thrown away (no checkpoints), in resource-seconds (cpu: core-seconds; memory: byte-seconds).
- ``emptyNodes``: nodes holding no pod, time-averaged (``mean``) and at ``end``: what an
  autoscaler's consolidation could remove without moving anything (a placement that packs
  leaves more of them; docs/autoscaling.md).
- ``podGroups`` and ``queueStatuses``: the PodGroups and Queues left at the end with the
  status the live operator would have written (the shared owners of :mod:`berth.status`),
  the ``Scheduled`` condition's reason (its code) and message; a finished job's group is
  gone, as its job is deleted when it ends.
- ``partialGangs``: moments (after a cycle's decisions were applied) at which a gang had some
  but fewer than ``minMember`` pods bound. It must be 0.
"""

from __future__ import annotations

import collections.abc
import math
import typing

from berth.api import custom_objects, meta, objects, quantities, resources
from berth.sim import events, fairness, records

__all__ = [
    "KIND",
    "ClusterSection",
    "EmptyNodes",
    "JobCounts",
    "PodGroupRecord",
    "QueueChange",
    "QueueRecord",
    "QueueStatusRecord",
    "QueueWait",
    "Report",
    "ReservationRecord",
    "Sample",
    "Summary",
    "WorkloadRecord",
    "build",
    "dominant_share",
    "percentile",
    "share_basis",
]

KIND = "Report"


# The document -----------------------------------------------------------------------------
# TypedDicts, not dataclasses: the report is JSON, printed with json.dumps and read back from
# files by plots and tables; its keys are the JSON's camelCase names.


class Sample(typing.TypedDict):
    """A value of a time series: ``resources`` (API quantity strings) from ``t`` seconds on."""

    t: float
    resources: dict[str, str]


class ClusterSection(typing.TypedDict):
    nodes: int
    capacity: dict[str, str]
    allocated: list[Sample]
    heldIdle: list[Sample]


class WorkloadRecord(typing.TypedDict):
    namespace: str
    name: str
    workload: str | None  # the generator it came from; None for manifests
    queue: str | None  # None for plain pods
    minMember: int
    submitted: float
    started: float | None
    finished: float | None
    wait: float
    pods: dict[str, str | None]  # pod name -> its last node
    evictions: int
    evictedAt: list[float]
    evictedFor: list[str]
    restarts: int
    reason: str | None


class QueueChange(typing.TypedDict):
    t: float
    weight: int
    guaranteed: dict[str, str]


class QueueRecord(typing.TypedDict):
    weight: int | None
    guaranteed: dict[str, str]
    limit: dict[str, str] | None
    fairShare: dict[str, str]
    fairShareSeries: list[Sample]
    schedulerFairShare: list[Sample] | None
    allocated: list[Sample]
    guaranteedSeries: list[Sample]
    changes: list[QueueChange]
    evictions: int
    workLost: dict[str, float]


class ReservationRecord(typing.TypedDict):
    namespace: str | None
    name: str | None
    phase: str
    nodeName: str | None
    availableAt: float | None
    reason: str | None
    message: str | None
    # The Reservation's spec.owners and status.currentOwners, copied as the API holds them.
    owners: list[custom_objects.ReservationOwner]
    currentOwners: list[custom_objects.CurrentOwner]


class PodGroupRecord(typing.TypedDict):
    namespace: str | None
    name: str | None
    phase: str
    reason: str | None
    message: str | None
    scheduled: int
    running: int
    succeeded: int
    failed: int
    queuePosition: int | None
    queuePending: int | None


class QueueStatusRecord(typing.TypedDict):
    """A Queue's ``status`` fields, as the cluster holds them (None: not written)."""

    state: str | None
    stateReason: str | None
    allocated: dict[str, str] | None
    requested: dict[str, str] | None
    fairShare: dict[str, str] | None
    pending: int | None
    running: int | None
    pendingPods: int | None
    runningPods: int | None


class QueueWait(typing.TypedDict):
    p50: float | None
    p90: float | None
    jobs: int
    started: int
    pendingAtEnd: int


class SizeWait(typing.TypedDict):
    """The waits of the jobs of one size: those whose dominant resource is ``resource`` and
    who ask more than half of ``upTo`` of it, and at most ``upTo`` (powers of two)."""

    resource: str | None  # None: jobs that ask for nothing the nodes have
    upTo: str | None
    jobs: int
    started: int
    p50: float | None
    p90: float | None
    max: float | None


class JobCounts(typing.TypedDict):
    submitted: int
    started: int
    finished: int


class EmptyNodes(typing.TypedDict):
    mean: float
    atEnd: int


class Summary(typing.TypedDict):
    utilization: dict[str, float]
    utilizationWhileWaiting: dict[str, float | None]
    wait: dict[str, QueueWait]
    waitBySize: list[SizeWait]
    jainIndex: float | None
    contendedSeconds: float
    partialGangs: int
    jobs: JobCounts
    evictions: int
    workLost: dict[str, float]
    emptyNodes: EmptyNodes
    cycles: int
    decisions: int


class Report(typing.TypedDict):
    apiVersion: str
    kind: str
    scenario: str
    seed: int
    end: float
    cluster: ClusterSection
    workloads: list[WorkloadRecord]
    queues: dict[str, QueueRecord]
    reservations: list[ReservationRecord]
    podGroups: list[PodGroupRecord]
    queueStatuses: dict[str, QueueStatusRecord]
    summary: Summary


"""The document ``berth sim -o json`` prints (see the module docstring)."""


def build(
    recorder: records.Recorder,
    *,
    scenario: str,
    seed: int,
    reservations: collections.abc.Sequence[custom_objects.Reservation] = (),
    pod_groups: collections.abc.Sequence[custom_objects.PodGroup] = (),
    queues: collections.abc.Sequence[custom_objects.Queue] = (),
) -> Report:
    """The report of a finished simulation (``reservations``, ``pod_groups`` and ``queues``
    as the cluster holds them at the end)."""
    end = recorder.end
    entitlements = _entitlement_series(recorder)
    return {
        "apiVersion": "sim.berth.io/v1alpha1",
        "kind": KIND,
        "scenario": scenario,
        "seed": seed,
        "end": events.seconds(end),
        "cluster": {
            "nodes": recorder.nodes,
            "capacity": recorder.capacity.to_api(),
            "allocated": _samples(recorder.cluster),
            "heldIdle": _samples(recorder.held),
        },
        "workloads": [_workload(job, end=end) for job in _jobs(recorder)],
        "queues": _queues(recorder, entitlements),
        "reservations": [_reservation(r) for r in reservations],
        "podGroups": [_pod_group(g) for g in pod_groups],
        "queueStatuses": {str(q["metadata"]["name"]): _queue_status(q) for q in queues},
        "summary": _summary(recorder, end=end),
    }


def percentile(values: collections.abc.Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile (``fraction`` in 0..1) of ``values``; ``None`` if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return ordered[rank - 1]


def share_basis(report: Report) -> dict[str, int]:
    """The capacity dominant shares are taken over: resources some pod asked for, not pods.

    A resource nobody requests (memory in a GPU-only scenario) would otherwise make every
    share look like an even split of it. ``report`` is a :class:`Report`, built here or read
    back from its JSON (the plots take either).
    """
    used = {
        name
        for sample in report["cluster"]["allocated"]
        for name, text in sample["resources"].items()
        if quantities.parse_milli(text) > 0
    }
    return {
        name: milli
        for name, text in report["cluster"]["capacity"].items()
        if name in used and name != resources.PODS and (milli := quantities.parse_milli(text)) > 0
    }


def dominant_share(
    value: collections.abc.Mapping[str, str], basis: collections.abc.Mapping[str, int]
) -> float:
    """The largest fraction of ``basis`` that ``value`` (API quantity strings) takes (DRF)."""
    return max(
        (
            quantities.parse_milli(text) / basis[name]
            for name, text in value.items()
            if name in basis
        ),
        default=0.0,
    )


# Sections ---------------------------------------------------------------------------------


def _jobs(recorder: records.Recorder) -> list[records.JobRecord]:
    return sorted(recorder.jobs.values(), key=lambda j: (j.submitted, j.namespace, j.name))


def _workload(job: records.JobRecord, *, end: int) -> WorkloadRecord:
    return {
        "namespace": job.namespace,
        "name": job.name,
        "workload": job.workload,
        "queue": job.queue,
        "minMember": job.min_member,
        "submitted": events.seconds(job.submitted),
        "started": _seconds(job.started),
        "finished": _seconds(job.finished),
        "wait": events.seconds(_wait(job, end=end)),
        "pods": dict(sorted(job.pods.items())),
        "evictions": job.evictions,
        "evictedAt": [events.seconds(t) for t in job.evicted_at],
        "evictedFor": list(job.evicted_for),
        "restarts": job.restarts,
        "reason": job.reason,
    }


def _queues(
    recorder: records.Recorder,
    entitlements: dict[str, records.Series],
) -> dict[str, QueueRecord]:
    shapes = {s.name: s for _, current in recorder.shapes for s in current}
    out: dict[str, QueueRecord] = {}
    for name in sorted(recorder.allocated):
        shape = shapes.get(name)
        fair = entitlements.get(name, records.Series(resources.ResourceList()))
        out[name] = {
            "weight": shape.weight if shape else None,
            "guaranteed": shape.guaranteed.to_api() if shape else {},
            "limit": shape.limit.to_api() if shape and shape.limit is not None else None,
            "fairShare": fair.last.to_api(),
            "fairShareSeries": _samples(fair),
            "schedulerFairShare": _samples(recorder.published[name])
            if name in recorder.published
            else None,
            "allocated": _samples(recorder.allocated[name]),
            **_shape_history(recorder, name),  # guaranteedSeries, changes
            "evictions": recorder.evicted[name],
            "workLost": _unit_seconds(recorder.work_lost.get(name, {})),
        }
    return out


class _ShapeHistory(typing.TypedDict):
    guaranteedSeries: list[Sample]
    changes: list[QueueChange]


def _shape_history(recorder: records.Recorder, name: str) -> _ShapeHistory:
    """The queue's guarantee over time, and when its weight or guarantee changed."""
    guaranteed = records.Series(resources.ResourceList())
    changes: list[QueueChange] = []
    before: fairness.QueueShape | None = None
    for at, shapes in recorder.shapes:
        shape = next((s for s in shapes if s.name == name), None)
        if shape is None:
            continue
        guaranteed.set(at, shape.guaranteed)
        if before is not None and (before.weight, before.guaranteed) != (
            shape.weight,
            shape.guaranteed,
        ):
            changes.append(
                {
                    "t": events.seconds(at),
                    "weight": shape.weight,
                    "guaranteed": shape.guaranteed.to_api(),
                }
            )
        before = shape
    return {"guaranteedSeries": _samples(guaranteed), "changes": changes}


def _unit_seconds(lost: collections.abc.Mapping[str, int]) -> dict[str, float]:
    """Milli-units times milliseconds as resource-seconds, rounded to the millisecond."""
    return {
        name: round(amount / 1_000_000, 3)
        for name, amount in sorted(lost.items())
        if amount and name != resources.PODS
    }


def _reservation(raw: custom_objects.Reservation) -> ReservationRecord:
    metadata = raw.get("metadata", {})
    spec = raw.get("spec", {})
    status = raw.get("status") or {}
    scheduled = _scheduled(status)
    placed = scheduled.get("status") == "True" and scheduled.get("lastTransitionTime")
    return {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "phase": status.get("phase", "Pending"),
        "nodeName": status.get("nodeName"),
        "availableAt": _since_epoch(placed) if placed else None,
        "reason": scheduled.get("reason"),
        "message": scheduled.get("message"),
        "owners": spec.get("owners", []),
        "currentOwners": status.get("currentOwners", []),
    }


def _since_epoch(stamp: typing.Any) -> float | None:
    """Seconds of simulated time at an RFC 3339 ``stamp`` the cluster wrote."""
    if not isinstance(stamp, str):
        return None
    return round(meta.parse_timestamp(stamp).timestamp() - events.EPOCH, 3)


def _scheduled(status: custom_objects.ObjectStatus) -> objects.Condition:
    """The status's ``Scheduled`` condition (empty when it has none yet)."""
    return next(
        (c for c in status.get("conditions") or () if c.get("type") == "Scheduled"),
        objects.Condition(),
    )


def _pod_group(raw: custom_objects.PodGroup) -> PodGroupRecord:
    metadata = raw.get("metadata", {})
    status = raw.get("status") or {}
    scheduled = _scheduled(status)
    return {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "phase": status.get("phase", "Pending"),
        "reason": scheduled.get("reason"),
        "message": scheduled.get("message"),
        "scheduled": status.get("scheduled", 0),
        "running": status.get("running", 0),
        "succeeded": status.get("succeeded", 0),
        "failed": status.get("failed", 0),
        "queuePosition": status.get("queuePosition"),
        "queuePending": status.get("queuePending"),
    }


def _queue_status(raw: custom_objects.Queue) -> QueueStatusRecord:
    status = raw.get("status") or {}
    return {
        "state": status.get("state"),
        "stateReason": status.get("stateReason"),
        "allocated": status.get("allocated"),
        "requested": status.get("requested"),
        "fairShare": status.get("fairShare"),
        "pending": status.get("pending"),
        "running": status.get("running"),
        "pendingPods": status.get("pendingPods"),
        "runningPods": status.get("runningPods"),
    }


def _summary(recorder: records.Recorder, *, end: int) -> Summary:
    jain, contended = _jain(recorder, end=end)
    jobs = list(recorder.jobs.values())
    return {
        "utilization": _utilization(recorder, end=end),
        "utilizationWhileWaiting": _utilization_while_waiting(recorder, end=end),
        "wait": _waits(recorder, end=end),
        "waitBySize": _waits_by_size(recorder, end=end),
        "jainIndex": None if jain is None else round(jain, 4),
        "contendedSeconds": events.seconds(contended),
        "partialGangs": recorder.partial_gangs,
        "jobs": {
            "submitted": len(jobs),
            "started": sum(1 for j in jobs if j.started is not None),
            "finished": sum(1 for j in jobs if j.finished is not None),
        },
        "evictions": sum(j.evictions for j in jobs),
        "workLost": _unit_seconds(
            {
                name: sum(lost.get(name, 0) for lost in recorder.work_lost.values())
                for name in {n for lost in recorder.work_lost.values() for n in lost}
            }
        ),
        "emptyNodes": _empty_nodes(recorder, end=end),
        "cycles": recorder.cycles,
        "decisions": recorder.decisions,
    }


def _empty_nodes(recorder: records.Recorder, *, end: int) -> EmptyNodes:
    """Nodes holding no pod: time-averaged over [0, end], and at ``end``."""
    samples = recorder.empty_nodes
    total = 0.0
    for i, (t, empty) in enumerate(samples):
        if t >= end:
            break
        until = min(samples[i + 1][0], end) if i + 1 < len(samples) else end
        total += empty * (until - t)
    last = [empty for t, empty in samples if t <= end]
    return {
        "mean": round(total / end, 3) if end > 0 else float(samples[0][1]),
        "atEnd": last[-1] if last else samples[0][1],
    }


# Computations -----------------------------------------------------------------------------


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else events.seconds(ms)


def _samples(series: records.Series) -> list[Sample]:
    return [{"t": events.seconds(t), "resources": value.to_api()} for t, value in series.samples]


def _wait(job: records.JobRecord, *, end: int) -> int:
    return (job.started if job.started is not None else max(end, job.submitted)) - job.submitted


def _waits(recorder: records.Recorder, *, end: int) -> dict[str, QueueWait]:
    by_queue: dict[str, list[records.JobRecord]] = {}
    for job in _jobs(recorder):
        by_queue.setdefault(job.queue or "(none)", []).append(job)
    out: dict[str, QueueWait] = {}
    for queue in sorted(by_queue):
        jobs = by_queue[queue]
        waits = [events.seconds(_wait(j, end=end)) for j in jobs]
        out[queue] = {
            "p50": percentile(waits, 0.5),
            "p90": percentile(waits, 0.9),
            "jobs": len(jobs),
            "started": sum(1 for j in jobs if j.started is not None),
            "pendingAtEnd": sum(1 for j in jobs if j.started is None),
        }
    return out


def _waits_by_size(recorder: records.Recorder, *, end: int) -> list[SizeWait]:
    """Waits by job size: a job's size is what its pods ask for together, of its dominant
    resource (the largest share of the cluster's capacity), rounded up to a power of two of
    that resource's unit; so a trace's 32-GPU gangs are a row of their own, beside the 1-GPU
    jobs that would drown them in a queue's percentiles."""
    capacity = {
        name: milli
        for name, milli in recorder.capacity.items()
        if name != resources.PODS and milli > 0
    }
    by_size: dict[tuple[str, int] | None, list[records.JobRecord]] = {}
    for job in _jobs(recorder):
        shares = [
            (milli / capacity[name], name) for name, milli in job.asked.items() if name in capacity
        ]
        if not shares or max(shares)[0] <= 0:
            by_size.setdefault(None, []).append(job)
            continue
        name = max(shares)[1]
        top = 1000  # one unit: fractions of a unit share its row
        while top < job.asked[name]:
            top *= 2
        by_size.setdefault((name, top), []).append(job)
    out: list[SizeWait] = []
    for size in sorted(by_size, key=lambda k: ("", 0) if k is None else k):
        jobs = by_size[size]
        waits = [events.seconds(_wait(j, end=end)) for j in jobs]
        out.append(
            {
                "resource": None if size is None else size[0],
                "upTo": None
                if size is None
                else resources.ResourceList({size[0]: size[1]}).to_api()[size[0]],
                "jobs": len(jobs),
                "started": sum(1 for j in jobs if j.started is not None),
                "p50": percentile(waits, 0.5),
                "p90": percentile(waits, 0.9),
                "max": max(waits),
            }
        )
    return out


def _integral(series: records.Series, *, end: int) -> dict[str, float]:
    """∫ value dt over [0, end] per resource (milli-units times milliseconds)."""
    total: dict[str, float] = {}
    samples = series.samples
    for i, (t, value) in enumerate(samples):
        if t >= end:
            break
        until = min(samples[i + 1][0], end) if i + 1 < len(samples) else end
        for name, amount in value.items():
            total[name] = total.get(name, 0.0) + amount * (until - t)
    return total


def _utilization(recorder: records.Recorder, *, end: int) -> dict[str, float]:
    if end <= 0:
        return {name: 0.0 for name in sorted(recorder.capacity)}
    used = _integral(recorder.cluster, end=end)
    return {
        name: round(used.get(name, 0.0) / (capacity * end), 4)
        for name, capacity in sorted(recorder.capacity.items())
        if capacity > 0
    }


def _waiting_intervals(recorder: records.Recorder, *, end: int) -> list[tuple[int, int]]:
    """The times some job was submitted and not started yet, as disjoint intervals."""
    spans = sorted(
        (job.submitted, min(job.started if job.started is not None else end, end))
        for job in recorder.jobs.values()
        if job.submitted < end
    )
    out: list[tuple[int, int]] = []
    for start, stop in spans:
        if stop <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


def _utilization_while_waiting(recorder: records.Recorder, *, end: int) -> dict[str, float | None]:
    """Per resource, what bound pods held over capacity, counted only while some job waited
    (a scheduler that leaves room idle then wastes it; idle room with nobody waiting is
    none of its business). ``None`` when no job ever waited."""
    intervals = _waiting_intervals(recorder, end=end)
    span = sum(stop - start for start, stop in intervals)
    if span <= 0:
        return {name: None for name in sorted(recorder.capacity)}
    samples = recorder.cluster.samples
    used: dict[str, float] = {}
    i = 0
    for start, stop in intervals:
        while i + 1 < len(samples) and samples[i + 1][0] <= start:
            i += 1
        j = i
        t = start
        while t < stop:
            until = min(samples[j + 1][0], stop) if j + 1 < len(samples) else stop
            if j < len(samples) and samples[j][0] <= t:
                for name, amount in samples[j][1].items():
                    used[name] = used.get(name, 0.0) + amount * (until - t)
            t = until
            if j + 1 < len(samples) and samples[j + 1][0] <= t:
                j += 1
        i = j
    return {
        name: round(used.get(name, 0.0) / (capacity * span), 4)
        for name, capacity in sorted(recorder.capacity.items())
        if capacity > 0
    }


def _entitlement_series(recorder: records.Recorder) -> dict[str, records.Series]:
    """Each queue's weighted entitlement over time, recomputed whenever the queues change."""
    out: dict[str, records.Series] = {}
    for at, shapes in recorder.shapes:
        shares = fairness.weighted_fair_shares(recorder.capacity, queues=shapes)
        for name in sorted(set(out) | set(shares)):
            out.setdefault(name, records.Series()).set(
                at, shares.get(name, resources.ResourceList())
            )
    return out


def _dominant(value: collections.abc.Mapping[str, int], capacity: resources.ResourceList) -> float:
    """The largest fraction of ``capacity`` that ``value`` takes (DRF's dominant share)."""
    top = 0.0
    for name, amount in value.items():
        size = capacity.get(name, 0)
        if size > 0 and amount / size > top:
            top = amount / size
    return top


def _jain(recorder: records.Recorder, *, end: int) -> tuple[float | None, int]:
    """Time-averaged Jain's index over contended moments, and how long they lasted (ms)."""
    queues = sorted(recorder.allocated)
    # Shares are taken over the resources pods asked for; the pod count is a per-node limit,
    # not a resource queues share.
    asked = {name for _, value in recorder.cluster.samples for name in value}
    capacity = resources.ResourceList(
        {
            name: amount
            for name, amount in recorder.capacity.items()
            if name in asked and name != resources.PODS
        }
    )
    streams: list[tuple[int, int, str, str, resources.ResourceList]] = []
    for order, name in enumerate(queues):
        for t, value in recorder.allocated[name].samples:
            streams.append((t, order, name, "allocated", value))
        for t, value in recorder.pending[name].samples:
            streams.append((t, order, name, "pending", value))
    streams.sort(key=lambda item: (item[0], item[1], item[3]))
    allocated = {name: resources.ResourceList() for name in queues}
    pending = {name: resources.ResourceList() for name in queues}
    shape_index, shapes = -1, tuple[fairness.QueueShape, ...]()
    weighted, contended, i = 0.0, 0, 0
    while i < len(streams):
        at = streams[i][0]
        if at >= end:
            break
        while i < len(streams) and streams[i][0] == at:
            _, _, name, which, value = streams[i]
            (allocated if which == "allocated" else pending)[name] = value
            i += 1
        while shape_index + 1 < len(recorder.shapes) and recorder.shapes[shape_index + 1][0] <= at:
            shape_index += 1
            shapes = recorder.shapes[shape_index][1]
        until = min(streams[i][0], end) if i < len(streams) else end
        index = _instant_jain(capacity, shapes, allocated, pending)
        if index is not None and until > at:
            weighted += index * (until - at)
            contended += until - at
    return (weighted / contended if contended else None), contended


def _instant_jain(
    capacity: resources.ResourceList,
    shapes: tuple[fairness.QueueShape, ...],
    allocated: dict[str, resources.ResourceList],
    pending: dict[str, resources.ResourceList],
) -> float | None:
    demand = {
        s.name: allocated.get(s.name, resources.ResourceList())
        + pending.get(s.name, resources.ResourceList())
        for s in shapes
    }
    active = [name for name, want in demand.items() if _dominant(want, capacity) > 0]
    if len(active) < 2:
        return None
    shares = fairness.weighted_fair_shares(capacity, queues=shapes, demand=demand)
    ratios = []
    for name in active:
        share = _dominant(shares[name], capacity)
        got = _dominant(allocated.get(name, resources.ResourceList()), capacity)
        # A queue entitled to nothing that got nothing is not wronged; one that got something
        # is over its share by as much as the largest ratio can express.
        ratios.append(got / share if share > 0 else (1.0 if got == 0 else 2.0))
    return fairness.jain_index(ratios)
