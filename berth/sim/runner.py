"""The virtual-time loop of ``berth sim``: a scenario in, a report out.

:func:`run` builds an :class:`~berth.sim.cluster.InMemoryCluster` from the scenario (node
pools, then the ``objects`` at time zero), queues every workload arrival and timed event, and
then repeats: jump the clock to the next event; apply every event due at that instant
(arrivals create their jobs, completions end pods, ``apply``/``delete`` change objects,
wake-ups only wake); run one scheduling cycle with the real scheduler
(``Scheduler.run_once(cluster, cluster)``) when something changed and a pod is waiting.

Choices the scheduler does not make and a simulator must:

- *Running.* A bound pod starts at once and succeeds ``sim.berth.io/duration`` after it was
  bound; a pod without the annotation runs until the end.
- *Evictions.* The workload's controller reacts as a batch job's would: a pod of a gang
  (``minMember > 1``) takes its whole job down with it, and every pod of the job is recreated
  (new uids, pending, full duration again: no checkpoint); any other pod is recreated alone.
  Evictions free capacity, so another cycle runs at the same instant (at most
  :data:`MAX_CYCLES_PER_INSTANT`, so that two plugins disagreeing cannot stall virtual time).
- *Time-based decisions.* A PodGroup with ``scheduleTimeoutSeconds`` and a Reservation (at
  its ``expires``, or ``ttl`` after its creation) get a wake-up when that time has passed, so
  the scheduler looks again even if nothing else happens; so do the next running group's
  maximum execution time, a Reservation's ``startAt`` and the start of its drain, and the
  times waiting jobs look again by time alone, such as a gang's starvation threshold (the
  cycle result's ``revisit_at``; a live operator's periodic cycle finds them). A gang
  evicted past its limit is recreated (``Requeue``) or, when its PodGroup says
  ``onMaximumExecutionTime: Fail``, not (its controller stops, as Kueue deactivates the
  workload; its pods are gone).
- *Cycles.* A cycle runs at an instant when something changed and a pod (or a Reservation)
  waits; with ``schedulePeriod`` set, at most once per period (changes in between wait for the
  next cycle, as with a scheduler that runs a session every period).
- *Until.* Events after ``until`` are dropped; the report's ``end`` is ``until``, or,
  without it, the last instant anything happened (a wake-up that changes nothing, such as a
  24h Reservation TTL, does not stretch the run).

Everything is ordered (events by time then by the order they were queued, objects by name), so
the same scenario and seed give byte-identical reports.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import math
import typing

from berth.api import core, custom_objects, dra, durations, keys, objects, resources
from berth.scheduler import loop
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.plugins import registry as plugin_registry
from berth.scheduler.snapshot import gpushare, wire
from berth.scheduler.snapshot import pods as pod_infos
from berth.scheduler.snapshot import reservations as resv
from berth.sim import cluster, events, fairness, records, reports, scenarios, workloads
from berth.util import clocks

__all__ = [
    "MAX_CYCLES_PER_INSTANT",
    "ProgressFn",
    "Simulation",
    "run",
]

MAX_CYCLES_PER_INSTANT = 10
"""Cycles at one instant of virtual time, when each one frees capacity for the next."""

ProgressFn = collections.abc.Callable[[int, int | None], None]
"""Called after each instant with the virtual time and the latest event known (ms)."""


@dataclasses.dataclass
class _Job:
    """What the runner needs to recreate a job's pods (its controller's memory)."""

    key: str
    min_member: int
    templates: dict[str, core.Pod]  # pod name -> manifest as first created


@dataclasses.dataclass(frozen=True)
class _Pod:
    job: str
    duration_ms: int | None


def run(
    scenario: scenarios.Scenario,
    *,
    seed: int | None = None,
    progress: ProgressFn | None = None,
) -> reports.Report:
    """Simulate ``scenario`` and return its report (``seed`` overrides ``spec.seed``)."""
    return Simulation(scenario, seed=seed).run(progress=progress)


class Simulation:
    """One run of a scenario; :meth:`run` may be called once."""

    def __init__(self, scenario: scenarios.Scenario, *, seed: int | None = None) -> None:
        spec = scenario.spec
        self.scenario = scenario
        self.seed = spec.seed if seed is None else seed
        self.until = spec.until.ms if spec.until is not None else None
        registry = plugin_registry.in_tree_registry()
        profile = spec.profile or plugin_registry.default_profile()
        self.clock = clocks.VirtualClock(events.EPOCH)
        # Parked work (queueing hints): a long backlog costs what changes, not its length.
        self.scheduler = loop.Scheduler(profile, registry=registry, clock=self.clock, hints=True)
        self.cluster = cluster.InMemoryCluster(
            clock=self.clock, scheduler_names=(profile.scheduler_name,)
        )
        self.queue = events.EventQueue()
        self.now = 0
        self.horizon = 0
        self._jobs: dict[str, _Job] = {}
        self._pods: dict[str, _Pod] = {}
        self._waiting: set[str] = set()
        self._default_used = False
        self.period = spec.schedule_period.ms
        self._next_cycle = 0
        self._wakeup_pending = False
        self._deadline = False  # a time-based wake-up is due: cycle even with nothing waiting
        self._last_change = 0  # the end of a run without ``until``
        self._wakes: set[int] = set()  # instants a time-bound wake-up is queued for
        capacity = resources.ResourceList()
        node_count = 0
        for pool in spec.nodes:
            for name in scenarios.node_names(pool):
                self.cluster.put(_node(pool, name=name))
                for devices in pool.devices:
                    self.cluster.put(_node_slice(devices, node=name))
                capacity = capacity + _allocatable(pool)
                node_count += 1
        self.recorder = records.Recorder(capacity=capacity, nodes=node_count)
        self._ran = False

    # Driving ------------------------------------------------------------------------------
    def run(self, *, progress: ProgressFn | None = None) -> reports.Report:
        """Run to the end and build the report."""
        if self._ran:
            raise RuntimeError("a Simulation runs once; build another one")
        self._ran = True
        spec = self.scenario.spec
        # Time zero: the objects, in an order that lets references resolve on first sight.
        order = {kind: i for i, kind in enumerate(scenarios.KINDS)}
        # scenarios.load() stored each manifest as its kind's model or wire record validated it.
        manifests = [typing.cast(objects.KubeObject, obj) for obj in spec.objects]
        ranked = sorted(enumerate(manifests), key=lambda item: (_rank(item[1], order), item[0]))
        for _, obj in ranked:
            self._apply(copy.deepcopy(obj))
        self._queues_changed()
        for index, workload in enumerate(spec.workloads):
            for number, at in enumerate(workloads.arrival_times(workload, seed=self.seed)):
                self._push(at, events.Arrival(workload=index, index=number))
        for event in spec.events:
            if event.apply is not None:
                # Validated by its kind's model in scenarios.load(), as the objects are.
                manifest = typing.cast(objects.KubeObject, event.apply)
                self._push(event.at.ms, events.Apply(manifest=manifest))
            elif event.delete is not None:
                ref = event.delete
                self._push(
                    event.at.ms,
                    events.Delete(kind=ref.kind, namespace=ref.scoped_namespace, name=ref.name),
                )
        dirty = True  # the objects of time zero
        while True:
            if dirty and (self._has_work() or self._deadline):
                if self.now >= self._next_cycle:
                    self._cycle()
                    dirty = self._deadline = False
                    self._next_cycle = self.now + self.period
                elif not self._wakeup_pending:
                    # Within the scheduling period: the change waits for the next cycle.
                    self._wakeup_pending = True
                    self._push(
                        self._next_cycle, events.Wakeup(reason="schedule period", periodic=True)
                    )
            if progress is not None:
                progress(self.now, self.horizon)
            next_time = self.queue.next_time()
            if next_time is None or (self.until is not None and next_time > self.until):
                break
            self._advance(next_time)
            _, due = self.queue.pop_due()
            for happening in due:
                changed = self._handle(happening)
                if changed and not isinstance(happening, events.Wakeup):
                    self._last_change = self.now
                dirty = changed or dirty
        end = self.until if self.until is not None else self._last_change
        self.recorder.finish(at=end)
        if progress is not None:
            progress(end, self.horizon)
        # The cluster as the last cycle's decisions left it, for the PodGroups' and Queues'
        # statuses (the live operator's next periodic snapshot); no cycle follows.
        self.cluster.settled_snapshot()
        return reports.build(
            self.recorder,
            scenario=self.scenario.name,
            seed=self.seed,
            reservations=self.cluster.objects("Reservation"),
            pod_groups=self.cluster.objects("PodGroup"),
            queues=self.cluster.objects("Queue"),
        )

    def _has_work(self) -> bool:
        """Whether a cycle could do anything: a pod or a Reservation waits for a node."""
        if self._waiting:
            return True
        return any(
            (r.get("status") or {}).get("phase", "Pending") == "Pending"
            for r in self.cluster.objects("Reservation")
        )

    def _advance(self, at: int) -> None:
        self.now = at
        self.clock.set(events.wall_time(at))

    def _push(self, at: int, event: events.Event) -> None:
        if self.until is not None and at > self.until:
            return
        self.queue.push(at, event)
        self.horizon = max(self.horizon, at)

    def _cycle(self) -> None:
        """Schedule; again at the same instant while evictions keep freeing capacity."""
        for _ in range(MAX_CYCLES_PER_INSTANT):
            result = self.scheduler.run_once(self.cluster, self.cluster)
            again = False
            evicted: list[cluster.Evicted] = []
            for applied in self.cluster.drain():
                if not isinstance(applied, cluster.Waiting):
                    self._last_change = self.now
                if isinstance(applied, cluster.Evicted):
                    evicted.append(applied)
                else:
                    again = self._absorb(applied) or again
            if evicted:
                self._requeue(evicted)
                again = True

            if result.revisit_at is not None:
                self._wake_at_time(result.revisit_at, reason="a time a plugin waits for")
            for queue, summary in sorted(result.queues.items()):
                self.recorder.fair_share_published(queue, summary.fair_share, at=self.now)
                self.recorder.held_published(queue, summary.held, at=self.now)
            self.recorder.cycle_done(decisions=len(result.decisions))
            if not (again and self._waiting):
                return

    # Events -------------------------------------------------------------------------------
    def _handle(self, event: events.Event) -> bool:
        """Apply one due event; True when the scheduler should look again."""
        if isinstance(event, events.Arrival):
            self._arrive(self.scenario.spec.workloads[event.workload], index=event.index)
            return True
        if isinstance(event, events.Completion):
            if self.cluster.succeed_pod(event.key, uid=event.uid):
                self.recorder.pod_succeeded(event.key, at=self.now)
                return True
            return False
        if isinstance(event, events.Apply):
            self._apply(copy.deepcopy(event.manifest))
            return True
        if isinstance(event, events.Delete):
            return self._delete(event)
        if event.periodic:
            self._wakeup_pending = False
        else:
            self._deadline = True  # a timeout or a TTL: the scheduler decides by time
        return True

    def _arrive(self, workload: scenarios.Workload, *, index: int) -> None:
        job = workloads.make_job(
            workload, index=index, scheduler_name=self.scheduler.profile.scheduler_name
        )
        key = f"{job.namespace}/{job.name}"
        self._use_queue(job.queue)
        self.recorder.job_submitted(
            records.JobRecord(
                namespace=job.namespace,
                name=job.name,
                workload=job.workload,
                queue=job.queue,
                min_member=job.min_member,
                submitted=self.now,
            )
        )
        if job.pod_group is not None:
            self._put_group(job.pod_group)
        self._jobs[key] = _Job(
            key=key,
            min_member=job.min_member,
            templates={pod["metadata"]["name"]: pod for pod in job.pods},
        )
        for pod in job.pods:
            self._create_pod(pod, job=key, queue=job.queue)

    def _apply(self, manifest: objects.KubeObject) -> None:
        """A manifest from ``objects`` or a timed ``apply`` (of any scenario kind)."""
        kind = manifest["kind"]
        if kind == "Pod":
            self._apply_pod(typing.cast(core.Pod, manifest))
            return
        if kind == "PodGroup":
            self._apply_group(typing.cast(custom_objects.PodGroup, manifest))
            return
        stored = self.cluster.put(manifest)
        if kind == "Queue":
            self._queues_changed()
        elif kind == "Reservation":
            self._wake_at_deadline(typing.cast(custom_objects.Reservation, stored))

    def _apply_group(self, manifest: custom_objects.PodGroup) -> None:
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        key = f"{namespace}/{name}"
        queue = manifest.get("spec", {}).get("queue") or keys.DEFAULT_QUEUE
        min_member = int(manifest.get("spec", {}).get("minMember", 1))
        self._use_queue(queue)
        if key not in self.recorder.jobs:
            self.recorder.job_submitted(
                records.JobRecord(
                    namespace=namespace,
                    name=name,
                    workload=None,
                    queue=queue,
                    min_member=min_member,
                    submitted=self.now,
                )
            )
            self._jobs[key] = _Job(key=key, min_member=min_member, templates={})
        else:
            self.recorder.jobs[key].queue = queue
            self.recorder.jobs[key].min_member = min_member
            self._jobs[key].min_member = min_member
        self._put_group(manifest)

    def _put_group(self, manifest: custom_objects.PodGroup) -> None:
        stored = self.cluster.put(manifest)
        timeout = stored.get("spec", {}).get("scheduleTimeoutSeconds")
        self._wake_after(stored, seconds=timeout if isinstance(timeout, int) else None)

    def _apply_pod(self, manifest: core.Pod) -> None:
        metadata = manifest["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        key = f"{namespace}/{name}"
        if key in self._pods:  # replacing a pod keeps its job; only its fields change
            self.cluster.put(manifest)
            return
        labels = metadata.get("labels") or {}
        group = labels.get(keys.POD_GROUP_LABEL)
        queue = labels.get(keys.QUEUE_LABEL)
        if group is not None:
            job_key = f"{namespace}/{group}"
            if job_key not in self.recorder.jobs:
                # The pods came before their PodGroup: account them as a job of their own.
                self.recorder.job_submitted(
                    records.JobRecord(
                        namespace=namespace,
                        name=group,
                        workload=None,
                        queue=queue or keys.DEFAULT_QUEUE,
                        min_member=1,
                        submitted=self.now,
                    )
                )
                self._jobs[job_key] = _Job(key=job_key, min_member=1, templates={})
            queue = queue or self.recorder.jobs[job_key].queue
        else:
            job_key = key
            self.recorder.job_submitted(
                records.JobRecord(
                    namespace=namespace,
                    name=name,
                    workload=None,
                    queue=queue,
                    min_member=1,
                    submitted=self.now,
                )
            )
            self._jobs[job_key] = _Job(key=job_key, min_member=1, templates={})
        self._use_queue(queue)
        self._jobs[job_key].templates[name] = manifest
        self._create_pod(manifest, job=job_key, queue=queue)

    def _create_pod(self, manifest: core.Pod, *, job: str, queue: str | None) -> None:
        stored = self.cluster.put(manifest)
        key = f"{stored['metadata']['namespace']}/{stored['metadata']['name']}"
        self._pods[key] = _Pod(job=job, duration_ms=_duration_ms(stored))
        self.recorder.pod_created(
            key, job=job, queue=queue, requests=_requests(stored), at=self.now
        )
        if stored["spec"].get("nodeName"):
            # A manifest may arrive already bound (a running pod at time zero).
            self.recorder.pod_bound(key, node=stored["spec"]["nodeName"], at=self.now)
            self._schedule_completion(key, uid=stored["metadata"]["uid"])
        else:
            self._waiting.add(key)

    def _delete(self, event: events.Delete) -> bool:
        removed = self.cluster.delete(event.kind, namespace=event.namespace, name=event.name)
        if removed is None:
            return False
        if event.kind == "Pod":
            key = f"{event.namespace}/{event.name}"
            self._waiting.discard(key)
            if key in self.recorder.pods:
                self.recorder.pod_removed(key, at=self.now, evicted=False)
        elif event.kind == "Queue":
            self._queues_changed()
        return True

    def _bound_requests(self, key: str, *, node: str) -> resources.ResourceList | None:
        """What a pod asking GPU memory (``gpu-memory``) holds on ``node``'s devices, as the
        scheduler charges it; ``None`` for every other pod (its requests do not change)."""
        namespace, _, name = key.partition("/")
        pod = self.cluster.get("Pod", namespace=namespace, name=name)
        if pod is None:
            return None
        share = gpushare.parse(pod["metadata"].get("annotations") or {})
        if share is None or share.problem is not None or not share.by_memory:
            return None
        labels = (self.cluster.get("Node", name=node) or {}).get("metadata", {}).get("labels")
        memory = gpushare.device_memory(labels or {})
        return gpushare.charged(self.recorder.pods[key].requests, share, memory=memory)

    # What a cycle did ---------------------------------------------------------------------
    def _absorb(self, applied: cluster.Bound | cluster.ReservationPlaced | cluster.Waiting) -> bool:
        """Record one applied decision (evictions: :meth:`_requeue`); True when it opened
        capacity for another cycle."""
        if isinstance(applied, cluster.Bound):
            self._waiting.discard(applied.key)
            self.recorder.pod_bound(
                applied.key,
                node=applied.node,
                at=self.now,
                requests=self._bound_requests(applied.key, node=applied.node),
            )
            self._schedule_completion(applied.key, uid=applied.uid)
            return False
        if isinstance(applied, cluster.ReservationPlaced):
            return True
        # A group's reason says most (quorum, then the first pod's problem); a pod's own
        # reason is kept only for a job that is that one pod.
        if (
            applied.subject is decisions.Subject.GROUP
            or applied.key not in self._pods
            or self._pods[applied.key].job == applied.key
        ):
            self.recorder.job_reason(applied.key, applied.reason.message)
        return False

    def _requeue(self, evicted: list[cluster.Evicted]) -> None:
        """The workloads' controllers recreate what evictions took (module docstring).

        A cycle may evict several pods of one job (reclaim takes a gang whole): the job is
        handled once, after all of its evictions are counted.
        """
        by_job: dict[str, list[str]] = {}
        failing: set[str] = set()  # jobs evicted for running past their limit
        for applied in evicted:
            pod = self._pods.pop(applied.key)
            if applied.cause is reasons.ReasonCode.EXECUTION_TIME_EXCEEDED:
                failing.add(pod.job)
            cause = applied.cause.value if applied.cause is not None else records.PREEMPTED
            self.recorder.pod_removed(applied.key, at=self.now, evicted=True, cause=cause)
            by_job.setdefault(pod.job, []).append(applied.key.partition("/")[2])
        for job_key in sorted(by_job):
            job = self._jobs[job_key]
            namespace = job_key.partition("/")[0]
            if job_key in failing and self._fails_past_limit(job_key):
                # Failed past its maximum execution time: its controller stops (as Kueue
                # deactivates the workload), nothing is recreated.
                self._lose_others(job, namespace=namespace)
                continue
            if job.min_member > 1:
                # A gang cannot run short of a member: its other pods go too, and it starts over.
                self._lose_others(job, namespace=namespace)
                self.recorder.job_restarted(job.key)
                recreate = sorted(job.templates)
            else:
                recreate = sorted(by_job[job_key])
            queue = self.recorder.jobs[job.key].queue
            for name in recreate:
                if name in job.templates:
                    self._create_pod(job.templates[name], job=job.key, queue=queue)

    def _lose_others(self, job: _Job, *, namespace: str) -> None:
        """Delete the pods of ``job`` that the evictions left: they are lost with it (a job
        failed past its limit, or a gang that cannot run short of a member)."""
        for other in sorted(job.templates):
            other_key = f"{namespace}/{other}"
            if other_key in self._pods:
                self.cluster.delete("Pod", namespace=namespace, name=other)
                self._waiting.discard(other_key)
                self._pods.pop(other_key)
                self.recorder.pod_removed(other_key, at=self.now, evicted=False, lost=True)

    def _schedule_completion(self, key: str, *, uid: str) -> None:
        duration = self._pods[key].duration_ms
        if duration is not None:
            self._push(self.now + duration, events.Completion(key=key, uid=uid))

    def _fails_past_limit(self, job_key: str, /) -> bool:
        """Whether the job's PodGroup asks to fail past its maximum execution time
        (``onMaximumExecutionTime: Fail``); a pod of no group is requeued."""
        namespace, _, name = job_key.partition("/")
        group = self.cluster.get("PodGroup", namespace=namespace, name=name)
        spec = (group or {}).get("spec") or {}
        return bool(spec.get("onMaximumExecutionTime") == "Fail")

    def _wake_after(self, obj: objects.KubeObject, *, seconds: int | float | None) -> None:
        if seconds:
            # One millisecond after the deadline, so that "now > created + timeout" holds.
            self._push(self.now + round(seconds * 1000) + 1, events.Wakeup(reason=_name(obj)))

    def _wake_at_time(self, at: float, *, reason: str) -> None:
        """Wake the scheduler at clock reading ``at`` (its first millisecond), once."""
        ms = max(math.ceil(round((at - events.EPOCH) * 1000, 6)), self.now)
        if ms > self.now and ms not in self._wakes:
            self._wakes.add(ms)
            self._push(ms, events.Wakeup(reason=reason))

    def _wake_at_deadline(self, reservation: custom_objects.Reservation) -> None:
        """Wake the scheduler at the instant the Reservation ends by time, whichever way its
        lifetime is given (``expires``, else ``ttl`` after its creation, 24h by default).

        The deadline is the one the cache and the Reservation plugin use
        (:func:`berth.scheduler.snapshot.reservations.deadline`), so the wake-up lands on the
        first millisecond at which they see it as passed (they end it when ``deadline <= now``):
        the capacity is free exactly then, not one cycle later.
        """
        ends = resv.deadline(resv.reservation_info(reservation))
        if ends is None:
            return
        at = max(math.ceil(round((ends - events.EPOCH) * 1000, 3)), self.now)
        if events.wall_time(at) < ends:  # float rounding: never wake before the deadline
            at += 1
        self._push(at, events.Wakeup(reason=_name(reservation)))

    # Queues -------------------------------------------------------------------------------
    def _use_queue(self, queue: str | None) -> None:
        if queue == keys.DEFAULT_QUEUE and not self._default_used:
            self._default_used = True
            self._queues_changed()

    def _queues_changed(self) -> None:
        shapes = {q.name: q for q in map(_shape, self.cluster.objects("Queue"))}
        if self._default_used and keys.DEFAULT_QUEUE not in shapes:
            shapes[keys.DEFAULT_QUEUE] = fairness.QueueShape(
                name=keys.DEFAULT_QUEUE,
                parent=None,
                weight=1,
                guaranteed=resources.ResourceList(),
                limit=None,
            )
        self.recorder.queues_changed(shapes.values(), at=self.now)


# Helpers ------------------------------------------------------------------------------------


def _rank(obj: objects.KubeObject, order: dict[str, int]) -> int:
    return order.get(str(obj.get("kind")), len(order))


def _allocatable(pool: scenarios.NodePool) -> resources.ResourceList:
    allocatable = dict(pool.allocatable)
    allocatable.setdefault(resources.PODS, scenarios.DEFAULT_PODS)
    return resources.ResourceList(allocatable)


def _node(pool: scenarios.NodePool, *, name: str) -> core.Node:
    """A Node of ``pool`` as the API server would hold it."""
    allocatable = _allocatable(pool).to_api()
    spec: core.NodeSpec = {}
    if pool.taints:
        spec["taints"] = [typing.cast(core.Taint, t.to_api()) for t in pool.taints]
    if pool.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**pool.labels, "kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def _node_slice(devices: scenarios.NodeDevices, *, node: str) -> dra.ResourceSlice:
    """The ResourceSlice of ``node``'s devices of one driver (its pool is named after it)."""
    items: list[dra.Device] = []
    for index in range(devices.count):
        device: dra.Device = {
            "name": f"{devices.name_prefix}{index}",
            "attributes": {**devices.attributes, "index": {"int": index}},
        }
        if devices.capacity:
            device["capacity"] = dict(devices.capacity)
        if devices.allow_multiple_allocations:
            device["allowMultipleAllocations"] = True
        items.append(device)
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{devices.driver}"},
        "spec": {
            "driver": devices.driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": items,
        },
    }


def _requests(pod: core.Pod) -> resources.ResourceList:
    """What the pod asks, as the scheduler counts it: a share of a GPU (``gpu-fraction``) is
    charged its thousandths of ``nvidia.com/gpu`` (a ``gpu-memory`` one once bound)."""
    requests = pod_infos.pod_requests(wire.part(pod.get("spec")))
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    share = gpushare.parse(annotations, whole_gpus=requests.get(resources.GPU, 0))
    if share is None or share.problem is not None:
        return requests
    return gpushare.charged(requests, share, memory=None)


def _duration_ms(pod: core.Pod) -> int | None:
    text = (pod["metadata"].get("annotations") or {}).get(keys.SIM_DURATION_ANNOTATION)
    if text is None:
        return None
    try:
        return durations.parse_ms(str(text))
    except ValueError:
        return None  # a pod whose duration cannot be read runs until the end


def _name(obj: objects.KubeObject) -> str:
    kind, namespace, name = cluster.object_key(obj)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _shape(obj: custom_objects.Queue) -> fairness.QueueShape:
    spec = obj.get("spec") or {}
    limit = spec.get("limit")
    return fairness.QueueShape(
        name=obj["metadata"]["name"],
        parent=spec.get("parent"),
        weight=int(spec.get("weight", 1)),
        guaranteed=resources.ResourceList.parse(spec.get("guaranteed")),
        limit=resources.ResourceList.parse(limit) if limit is not None else None,
    )
