"""Admission mode: Berth decides, kube-scheduler binds — pending allocations over scheduling gates.

:class:`Admission` sits between the scheduling loop and the usual source and sink (the informers'
:class:`~berth.kube.informers.snapshots.CacheSource` and the binder
:class:`~berth.kube.binder.decisions.ApiSink`) and is both a ``SnapshotSource`` and a
``DecisionSink``:

- **The view.** A pod held by Berth's gate ``scheduling.berth.io/admission`` — and by no other
  gate: the others' owners go first — is offered to the session as a pending pod, whatever its
  ``schedulerName`` (the informers keep such pods in the cache through :meth:`observe_pod`).
  The session runs unchanged, so queues, gangs, reservations, reclaim and preemption, and the
  why-pending reasons of PodGroups, are those of scheduler mode.
- **Admitting.** A ``BindPod`` for such a pod becomes a *pending allocation* pod → node: the
  cache assumes the pod on the node at once (the next cycle counts the capacity as used), then
  the pod is pinned — a required node affinity ``matchFields metadata.name In [node]`` added to
  each of its terms (allowed while gated), and the annotations ``admitted-node`` /
  ``admitted-at`` — and only when *every* pod the cycle admitted of the same group is pinned
  are the gates removed, together: a gang is released whole or not at all (a pin that fails
  releases nothing; the group is tried again next cycle — its pods already pinned keep their
  pin, since a gated pod's node affinity may only narrow, and the session sees it). Before
  the pins, ``before_pin`` withdraws the gang's CapacityBuffer, if it asked with one
  (:mod:`berth.kube.autoscaling.capacity_requests`: a buffer still asking once they bind buys a
  node). The kube-scheduler then binds. A pod admitted onto a node from which the same cycle evicted
  victims stays pinned and gated (assumed in the cache) until those victims are gone, as the
  binder holds a preemptor's binding (the shared
  :class:`~berth.kube.binder.victim_waits.VictimWaits`, bounded by ``eviction_wait``): ungated at
  once, kube-scheduler could bind it while the victims still run and the kubelet would fail it
  ``OutOf<resource>``. If they outstay the wait, the batch's allocations are dropped (capacity
  released, a ``FailedScheduling`` Event names the victims) and a later cycle admits the pods again.
  A pod that names Berth's own scheduler is ungated and bound by Berth (POST binding) instead.
- **Devices.** The session places a gated pod only where its ResourceClaims can be met, as any
  pod; kube-scheduler allocates them when it binds the pod, so the cycle's ``ReserveClaim``
  decisions for admitted pods are not written — the devices found are assumed in the cache
  for as long as the pending allocation lives (the next cycles count them taken), and forgotten
  when it ends unbound; once kube-scheduler's allocation shows in the claim, that is the word.
  A gated pod naming Berth's own scheduler and using claims is not admitted: its gate is removed
  at once, unpinned, and the scheduler places it as any of its pods (queues and gangs checked
  there), the binder writing its claims before binding it.
- **Watching.** Bound to the allocated node: done (the cache's assumption turns into the real
  thing). Bound elsewhere, reported ``Unschedulable`` by its scheduler, or still unbound
  ``bind_timeout`` seconds after the gate went: the allocation is *rejected* (YuniKorn's
  RejectTask): the cache forgets the assumption (capacity released), Warning Events go to the
  pod and its PodGroup, the group's reason says why until it is admitted again, and the pod is
  sent back to wait: Kubernetes forbids adding a scheduling gate to an existing pod, so a pod
  owned by a controller is evicted (Eviction API; the controller recreates it and the webhook
  gates the new one) and a bare pod is recreated by Berth — deleted, then created again with
  the same name and spec, its pin removed and the gate back. Why it was refused is data
  (:mod:`berth.kube.admission.refusals`: the taint, cordon or ResourceClaim Berth sees on the node,
  and kube-scheduler's own words verbatim), in the Events and the group's reason. The node is
  remembered for the pod and its gang (:mod:`berth.kube.admission.rejections`): no member is pinned
  there again until the cause may have gone (a taint removed, a device freed, the node changed) or
  the memory fades; the pod backs off exponentially before it is offered again; and no pod is
  deleted more than once a minute — refused again sooner, it stays pinned and ungated until
  then (kube-scheduler may still bind it there). A gang member rejected releases its group's
  other pending allocations with it, so the gang is admitted again whole.
- **Restarts and mode switches.** The allocation lives in the pod (the annotations), so a new
  leader adopts ungated, unbound pods it admitted earlier (assumed on their node again, the
  timeout running from ``admitted-at``), and gated pods are simply pending. Both executors are
  always on — pods naming Berth's scheduler are bound by the inner sink in either mode — so a
  restart with the other ``--mode`` loses no pod: the mode decides what new pods look like
  (the webhook), not what happens to the ones already there.
- **Bad input.** A pod with the gate but neither group nor queue is not Berth's: the gate is
  removed with a Warning Event saying so, and kube-scheduler places it as usual.

Why-pending reasons of pods held by the gate become Normal ``NotAdmitted`` Events (when they
change), never a ``PodScheduled=False/Unschedulable`` condition: the gated pods' ``MarkPending``
decisions are kept from the inner sink, so their condition stays ``SchedulingGated``; what
they tell autoscalers instead is in docs/autoscaling.md.

This class is the thin asynchronous part of admission. What a pod's observation means, and
every transition of a pending allocation (pinning, ungated; bound, dropped, rejected), is the
pure state machine of :mod:`berth.kube.admission.admission_states`; the pending allocations,
mirrored in the cache, are kept by :mod:`berth.kube.admission.allocations`; the edits of the pods
(pin, unpin, ungate, gate again) are pure functions in :mod:`berth.kube.transport.pod_edits`; pins
and gate removals go through the write primitive (:class:`berth.kube.transport.writes.Writer`: read
at version, retry on conflict, fenced). Everything but the requests runs on the event loop and never
blocks: :meth:`Admission.apply` and :meth:`Admission.observe_pod` record and queue;
:meth:`Admission.run` does the requests.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import functools
import logging
import types
import typing

import kubernetes_asyncio.client

from berth.api import keys
from berth.kube.admission import admission_states as states
from berth.kube.admission import allocations, refusals, rejections
from berth.kube.binder import victim_waits
from berth.kube.transport import errors, events, pod_edits, rest, writes
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import pods, resourceclaims, snapshots, usage, wire
from berth.status import conditions
from berth.util import clocks, wakeups

__all__ = ["Admission", "Sink", "Source"]

logger = logging.getLogger(__name__)

_GATE = keys.ADMISSION_GATE
_TERMINAL = frozenset({"Succeeded", "Failed"})
_RECREATE_WAIT = 30.0  # seconds to wait for a deleted pod to be gone before creating it again


class Source(typing.Protocol):
    """The snapshot source admission wraps (``CacheSource``)."""

    def snapshot(self) -> snapshots.Snapshot: ...


class Sink(typing.Protocol):
    """The decision sink admission wraps (``ApiSink``): it binds, evicts, annotates, explains."""

    def apply(self, result: decisions.CycleResult) -> None: ...

    def pod_removed(self, key: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class _Admit:
    """Pods of one group (or one pod) the cycle admitted: released together or not at all."""

    group: str | None
    binds: tuple[decisions.BindPod, ...]
    ours: frozenset[str]  # keys of pods naming Berth's scheduler: Berth binds them itself
    victims: tuple[decisions.EvictPod, ...] = ()  # evicted by the cycle from the pods' nodes


class Admission:
    """``SnapshotSource`` and ``DecisionSink`` of admission mode; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        cache: cluster_cache.ClusterCache,
        source: Source,
        sink: Sink,
        clock: clocks.Clock,
        scheduler_names: collections.abc.Collection[str] = (keys.DEFAULT_SCHEDULER_NAME,),
        recorder: events.EventRecorder | None = None,
        bind_timeout: float = 60.0,
        concurrency: int = 16,
        request_timeout: float = 30.0,
        victims: victim_waits.VictimWaits | None = None,
        writer: writes.Writer | None = None,
        before_pin: collections.abc.Callable[
            [collections.abc.Collection[str]], collections.abc.Awaitable[None]
        ]
        | None = None,
    ) -> None:
        self._api = api
        # Awaited with a batch's pod keys before they are pinned: the capacity requests
        # withdraw the gang's CapacityBuffer first (berth.kube.autoscaling.capacity_requests).
        self._before_pin = before_pin
        self._writer = writer or writes.Writer(api, timeout=request_timeout)
        self._cache = cache
        self._source = source
        self._sink = sink
        self._clock = clock
        self._ours = frozenset(scheduler_names)
        self._recorder = recorder
        self._bind_timeout = bind_timeout
        self._concurrency = concurrency
        self._timeout = request_timeout
        self._objects: dict[str, dict[str, typing.Any]] = {}  # raw pods Berth may patch
        self._gated: set[str] = set()  # pods held by Berth's gate (and maybe others)
        self._bad: set[str] = set()  # gated pods with neither group nor queue, to release
        self._releasing: set[str] = set()  # bad input being ungated
        self._handing_over: set[str] = set()  # Berth's own pods with claims being ungated
        self._view: set[str] = set()  # pods the last snapshot offered through the gate
        # What the last snapshot offered through the gate, and how often that changed.
        self._offered: tuple[tuple[pods.PodInfo, ...], tuple[str, ...]] = ((), ())
        self._offer_changes = 0
        self._reasons: dict[str, reasons.Reason] = {}  # pod key -> the NotAdmitted reason last sent
        self._notes: dict[str, reasons.Reason] = {}  # group -> why its last admission failed
        self._recreating: dict[str, asyncio.Event] = {}  # pod key -> set when the old one is gone
        # Refused pods to send back later (no pod is deleted twice within the resend interval):
        # pod key -> (when, UID, node).
        self._due: dict[str, tuple[float, str, str]] = {}
        self._seen: snapshots.Snapshot | None = None  # the inner source's last snapshot
        # Pod key -> UID of the pods this process wrote the admitted-node marker on (any other
        # marker it sees was forged), and of those it reported forged (once each).
        self._pinned: dict[str, str] = {}
        self._forged: dict[str, str] = {}
        self._cache = cache
        self._jobs: asyncio.Queue[collections.abc.Callable[[], collections.abc.Awaitable[None]]]
        self._jobs = asyncio.Queue()
        # The binder's waits for preemption victims (None: nothing waits, as without presence).
        self._victims = victims
        self._waiting: set[asyncio.Task[None]] = set()  # batches waiting for their victims
        self._active = 0
        self._failing: set[str] = set()
        self.gate_bypasses = 0
        """Pods whose admission gate someone other than Berth removed (tests, metrics)."""
        self.forged_markers = 0
        """Pods seen with an ``admitted-node`` marker Berth did not write (tests, metrics)."""
        self.allocations = allocations.Allocations(cache)
        """Pending allocations by pod key."""
        self.rejected = 0
        """Allocations rejected so far."""
        self.rejections = rejections.Rejections()
        """kube-scheduler's refusals: the nodes avoided, the pods' backoff and send-backs."""
        self.sent_back = 0
        """Refused pods deleted to send them back (evicted or recreated; tests, metrics)."""

    @property
    def through_gate(self) -> frozenset[str]:
        """The gated pods the last snapshot offered as pending (admission decides them; their
        capacity is asked for by :mod:`berth.kube.autoscaling.capacity_requests`)."""
        return frozenset(self._view)

    @property
    def pinned(self) -> dict[str, str]:
        """Pod key -> the node of its pending allocation (pinned or pinning, not bound yet):
        the node writer keeps such nodes from scale-down."""
        return {key: allocation.node for key, allocation in self.allocations.items()}

    # Informer side -----------------------------------------------------------------------
    def observe_pod(self, obj: dict[str, typing.Any]) -> bool:
        """Told every pod the informer sees (before it is cached); True keeps a pod of another
        scheduler in the cache: gated by Berth, or admitted by it. What the pod means is
        decided by :mod:`berth.kube.admission.admission_states`; this only records and acts."""
        seen = states.Observation.of(obj)
        key = seen.key
        allocation = self.allocations.get(key)
        event = (
            states.observed(seen, node=allocation.node, uid=allocation.uid, state=allocation.state)
            if allocation is not None
            else None
        )
        if allocation is not None and event is states.Event.RECREATED:
            # Another pod under the name: the old allocation is moot; judge the new pod.
            self._move(allocation, event)
            allocation, event = None, None
        holding = (
            states.classify(
                seen,
                was_held=key in self._gated,
                recreating=key in self._recreating or key in self._due,
                opted_in=self._cache.namespace_labels(seen.namespace).get(keys.ADMISSION_LABEL)
                == "enabled",
                admitted=bool(seen.uid) and self._pinned.get(key) == seen.uid,
            )
            if allocation is None
            else None
        )
        if holding is states.Holding.BYPASSED:
            self._gate_removed(key, obj)
        elif holding is states.Holding.FORGED:
            self._marker_forged(key, obj, uid=seen.uid, node=seen.admitted_node or "")
        if seen.held:
            self._gated.add(key)
            if not seen.belongs:
                # (A pod Berth may still group by its owners is judged by the snapshot: with
                # grouping on it waits for its group, with grouping off it is plain there.)
                self._bad.add(key)
        else:
            self._gated.discard(key)
            self._bad.discard(key)
        if seen.held or seen.admitted_node is not None or allocation is not None:
            self._objects[key] = obj
        else:
            self._objects.pop(key, None)
        if key in self._due and (seen.node is not None or seen.finished):
            del self._due[key]  # bound after all (the cause went), or ending: nothing to send
        if allocation is not None:
            if event is not None:
                self._move(allocation, event, seen=seen)
        elif holding is states.Holding.ADOPT:
            assert seen.admitted_node is not None
            since = seen.admitted_at
            self.allocations.adopt(
                key,
                uid=seen.uid,
                node=seen.admitted_node,
                since=since if since is not None else self._clock.now(),
            )
            logger.info("adopted the pending allocation of pod %s on %s", key, seen.admitted_node)
        return (
            seen.held
            or seen.admitted_node is not None
            or key in self.allocations
            or key in self._recreating
        )

    def _move(
        self,
        allocation: allocations.Allocation,
        event: states.Event,
        *,
        seen: states.Observation | None = None,
    ) -> None:
        """Apply ``event`` to ``allocation`` as :func:`~.admission_states.advance`
        says: its next state, or its end (bound: done; dropped: capacity released; rejected:
        :meth:`_reject`, ``seen`` being what the informer saw of the pod)."""
        if self.allocations.get(allocation.key) is not allocation:
            return  # ended already (a late answer for an allocation that is gone)
        moved = states.advance(allocation.state, event)
        if moved.state is not None:
            allocation.state = moved.state
        elif moved.ending is states.Ending.BOUND:
            self.allocations.bound(allocation.key)
            self.rejections.bound(allocation.key)
        elif moved.ending is states.Ending.DROPPED:
            self.allocations.drop(allocation)
        else:
            self._reject(allocation, refusal=self._refusal(allocation, event, seen))

    def _gate_removed(self, key: str, obj: dict[str, typing.Any]) -> None:
        """Someone other than Berth removed the admission gate: the pod bypassed its queue's
        and gang's checks. Say so on the pod and in the log; the cache charges it to no queue
        (Berth did not admit it), so it cannot take its queue's limit from the queue's
        tenants."""
        self.gate_bypasses += 1
        self._objects[key] = obj  # for the Event's UID
        message = (
            f"the scheduling gate {_GATE} was removed by someone other than Berth: the pod was "
            "not admitted by Berth (no queue or gang check) and is charged to no queue"
        )
        self._log_failure("gate-removed", f"pod {key}: {message}")
        self._pod_event(key, type=events.WARNING, reason="AdmissionBypassed", message=message)

    def _marker_forged(self, key: str, obj: dict[str, typing.Any], *, uid: str, node: str) -> None:
        """The pod carries Berth's ``admitted-node`` marker, but Berth did not write it: it
        bypassed its queue's and gang's checks. The cache charges it to no queue; the pod and
        the log say so (once per pod)."""
        self._cache.disown(key, uid=uid)
        if self._forged.get(key) == uid:
            return
        self._forged[key] = uid
        self.forged_markers += 1
        self._objects[key] = obj  # for the Event's UID
        message = (
            f"the annotation {keys.ADMITTED_NODE_ANNOTATION}={node} was not written by Berth: "
            "the pod was not admitted by Berth (no queue or gang check) and is charged to no "
            "queue"
        )
        self._log_failure("marker-forged", f"pod {key}: {message}")
        self._pod_event(key, type=events.WARNING, reason="AdmissionBypassed", message=message)

    def pod_removed(self, key: str) -> None:
        """The pod left the cluster (the informer's removal callback)."""
        self._pinned.pop(key, None)
        self._forged.pop(key, None)
        self._gated.discard(key)
        self._bad.discard(key)
        self._objects.pop(key, None)
        self._reasons.pop(key, None)
        self._due.pop(key, None)
        allocation = self.allocations.get(key)
        if allocation is not None:
            self._move(allocation, states.Event.GONE)
        if key not in self._recreating:  # Berth's own recreation keeps the memory
            self.rejections.forget_pod(key)
        gone = self._recreating.get(key)
        if gone is not None:
            gone.set()
        self._sink.pod_removed(key)

    # SnapshotSource ----------------------------------------------------------------------
    def snapshot(self) -> snapshots.Snapshot:
        """The inner source's snapshot, with pods held only by Berth's gate offered as pending."""
        self.allocations.assume_adopted()
        base = self._source.snapshot()
        self._seen = base
        # A node whose refusal's cause may have gone (a taint removed, a device freed, the node
        # changed) is tried again, as kube-scheduler's queueing hints requeue its pods.
        for forgot in self.rejections.forget_changed(
            functools.partial(refusals.mark, base), now=base.now
        ):
            logger.info("%s may go again where it was refused: the node changed", forgot)
        candidates = set(self._gated) | {p.key for p in base.gated if _GATE in p.scheduling_gates}
        admitted: list[pods.PodInfo] = []
        still_gated: list[pods.PodInfo] = []
        for key in sorted(candidates):
            info = base.pods.get(key)
            if (
                info is None
                or key in self.allocations
                or info.node_name is not None
                or info.terminal
                or info.deleting
                or _GATE not in info.scheduling_gates
            ):
                continue
            if info.plain:
                self._bad.add(key)
                continue
            if info.resource_claims and info.scheduler_name in self._ours:
                # Bound by Berth: its claims are written before its binding, which the binder
                # does for the pods it schedules (ungated, it is one).
                if key not in self._handing_over:
                    self._handing_over.add(key)
                    self._jobs.put_nowait(functools.partial(self._hand_over, key))
                continue
            if info.scheduling_gates == (_GATE,):
                retry = self.rejections.retry_at(key, group=info.pod_group, now=base.now)
                if retry is not None:
                    self._backing_off(info, until=retry)
                    continue  # stays gated (in base.gated) until its backoff ends
                offered = self.rejections.avoiding(info, now=base.now)
                admitted.append(dataclasses.replace(offered, scheduling_gates=()))
            elif key not in {p.key for p in base.gated}:
                still_gated.append(info)
        self._view = {p.key for p in admitted} | {p.key for p in still_gated}
        offering = (tuple(admitted), tuple(p.key for p in still_gated))
        if offering != self._offered:
            # Which gated pods are offered, and how, is admission's state, not the cache's:
            # parked work must see it change (an allocation given up, a rejection expired).
            self._offered = offering
            self._offer_changes += 1
        if base.changes is not None:
            base = dataclasses.replace(base, changes=base.changes.plus_outside(self._offer_changes))
        if not admitted and not still_gated:
            return base
        lifted = {p.key for p in admitted}
        by_group: dict[str, int] = {}
        for info in admitted:
            if info.pod_group is not None:
                by_group[info.pod_group] = by_group.get(info.pod_group, 0) + 1
        groups = dict(base.pod_groups)
        for group, count in by_group.items():
            found = groups.get(group)
            if found is not None:
                moved = min(count, found.gated)
                groups[group] = dataclasses.replace(
                    found, pending=found.pending + moved, gated=found.gated - moved
                )
        return dataclasses.replace(
            base,
            pods=types.MappingProxyType({**base.pods, **{p.key: p for p in admitted}}),
            pending=tuple(sorted((*base.pending, *admitted), key=lambda p: p.key)),
            queue_usage=_with_demand(base, admitted),
            gated=tuple(
                sorted(
                    (*(p for p in base.gated if p.key not in lifted), *still_gated),
                    key=lambda p: p.key,
                )
            ),
            pod_groups=types.MappingProxyType(groups),
        )

    # DecisionSink ------------------------------------------------------------------------
    def apply(self, result: decisions.CycleResult) -> None:
        """Admit the gated pods ``result`` binds; hand everything else to the inner sink."""
        admits: dict[str, list[decisions.BindPod]] = {}
        reserving: list[decisions.ReserveClaim] = []
        passed: list[decisions.Decision] = []
        for decision in result.decisions:
            if isinstance(decision, decisions.BindPod) and decision.key in self._view:
                group = self._group_of(decision.key)
                admits.setdefault(group or decision.key, []).append(decision)
            elif (
                isinstance(decision, decisions.Unschedulable)
                and decision.subject is decisions.Subject.POD
                and decision.key in self._view
            ):
                self._explain(decision)
            elif (
                isinstance(decision, decisions.SelectClaimNode | decisions.BindClaimVolume)
                and decision.pod in self._view
            ):
                continue  # kube-scheduler binds it, and handles its claims as it does so
            elif isinstance(decision, decisions.MarkPending) and any(
                p.key in self._view for p in decision.pods
            ):
                # A gated pod's condition stays SchedulingGated (its NotAdmitted Events say
                # why); the capacity it waits for is asked for by its gang's request.
                others = tuple(p for p in decision.pods if p.key not in self._view)
                if others:
                    passed.append(dataclasses.replace(decision, pods=others))
            elif (
                isinstance(decision, decisions.ReserveClaim)
                and f"{decision.namespace}/{decision.pod}" in self._view
            ):
                reserving.append(decision)  # kube-scheduler allocates it as it binds the pod
            else:
                passed.append(decision)
        for group_key in sorted(admits):
            self._notes.pop(group_key, None)
        group_why = result.group_why
        if self._notes:
            # Copied only for notes: a parked backlog's reasons are many.
            why = dict(group_why)
            for group_key, note in sorted(self._notes.items()):
                why[group_key] = _noted(why[group_key], note) if group_key in why else note
            group_why = types.MappingProxyType(why)
        self._sink.apply(dataclasses.replace(result, decisions=tuple(passed), group_why=group_why))
        evicted = victim_waits.victims_by_node(result)
        for group_key, binds in sorted(admits.items()):
            self._start(group_key, binds, evicted=evicted)
        self._assume_devices(reserving)
        for key in sorted(self._bad - self._releasing):
            self._releasing.add(key)
            self._jobs.put_nowait(functools.partial(self._release, key))
        self.check_timeouts()

    def _start(
        self,
        group_key: str,
        binds: list[decisions.BindPod],
        *,
        evicted: collections.abc.Mapping[str, tuple[decisions.EvictPod, ...]],
    ) -> None:
        """Record the pending allocations of one group's admitted pods and queue their release."""
        now = self._clock.now()
        accepted: list[decisions.BindPod] = []
        ours: set[str] = set()
        for bind in binds:
            group = self._group_of(bind.key)
            if not self.allocations.start(
                bind.key, uid=bind.uid, node=bind.node, group=group, now=now
            ):
                continue  # gone while the session ran
            self._reasons.pop(bind.key, None)
            obj = self._objects.get(bind.key)
            if obj is not None and wire.sub(obj, "spec").get("schedulerName") in self._ours:
                ours.add(bind.key)
            accepted.append(bind)
        if accepted:
            nodes = sorted({bind.node for bind in accepted})
            victims = tuple(v for node in nodes for v in evicted.get(node, ()))
            admit = _Admit(group_key, tuple(accepted), frozenset(ours), victims)
            self._jobs.put_nowait(lambda: self._admit(admit))

    def _assume_devices(self, reserving: collections.abc.Iterable[decisions.ReserveClaim]) -> None:
        """Count the devices found for admitted pods' claims as taken while their pending
        allocations live (:meth:`~.allocations.Allocations.drop` forgets them)."""
        for decision in reserving:
            if f"{decision.namespace}/{decision.pod}" not in self.allocations:
                continue  # gone while the session ran
            self._cache.assume_resource_claim(
                decision.key,
                uid=decision.uid,
                pod=decision.pod,
                pod_uid=decision.pod_uid,
                allocation=resourceclaims.allocation_info(decision.allocation)
                if decision.allocation is not None
                else None,
            )

    def _explain(self, decision: decisions.Unschedulable) -> None:
        why = decision.reason
        # The snapshot's view of the pod, not a parse of it: this runs for every gated pod
        # that waits, every cycle its reason is given.
        info = self._seen.pods.get(decision.key) if self._seen is not None else None
        group = info.pod_group if info is not None else None
        _, last = self.rejections.refused(decision.key, group=group)
        if last is not None and last.node in self.rejections.nodes_of(decision.key, group=group):
            # The session's reason says the node does not match; the refusal says why not.
            why = why.explained_by(
                last.reason(message=f"kube-scheduler refused it on {last.node}: {last.message}")
            )
        self._tell(decision.key, why)

    def _tell(self, key: str, why: reasons.Reason) -> None:
        """A ``NotAdmitted`` Event saying ``why`` the gated pod waits (when that changed)."""
        if self._reasons.get(key) == why:
            return
        self._reasons[key] = why
        self._pod_event(key, type=events.NORMAL, reason="NotAdmitted", message=why.message)

    def _backing_off(self, info: pods.PodInfo, *, until: float) -> None:
        """Tell the gated pod it waits out its backoff after kube-scheduler's refusals."""
        count, last = self.rejections.refused(info.key, group=info.pod_group)
        message = (
            f"backing off after {count} admission rejection(s): admitted again no sooner than "
            f"{conditions.timestamp(until)}"
        )
        if last is not None:
            message += f"; last refused on {last.node}: {last.message}"
        why = reasons.new(
            reasons.ReasonCode.ADMISSION_REJECTED,
            message,
            rejections=count,
            retryAt=conditions.timestamp(until),
        )
        self._tell(info.key, why)

    def check_timeouts(self) -> None:
        """Reject allocations whose pod is still unbound ``bind_timeout`` after its gate went;
        send back the refused pods whose turn came."""
        now = self._clock.now()
        for allocation in self.allocations.overdue(now, timeout=self._bind_timeout):
            self._move(allocation, states.Event.BIND_TIMEOUT)
        for key, (when, uid, node) in sorted(self._due.items()):
            if when > now:
                continue
            del self._due[key]
            obj = self._objects.get(key)
            if obj is None or str(wire.sub(obj, "metadata").get("uid") or "") != uid:
                continue  # gone, or another pod under the name
            if key in self.allocations or wire.sub(obj, "spec").get("nodeName"):
                continue  # admitted again, or bound after all
            self._send_back(key, obj, node=node)

    # Rejection -----------------------------------------------------------------------------
    def _refusal(
        self,
        allocation: allocations.Allocation,
        event: states.Event,
        seen: states.Observation | None,
    ) -> refusals.Refusal:
        """kube-scheduler's refusal of ``allocation`` (``event``), read against Berth's view."""
        obj = self._objects.get(allocation.key)
        info = pods.pod_info(obj) if obj is not None else None
        return refusals.refusal(
            self._seen,
            info,
            node=allocation.node,
            how=event,
            said=seen.unschedulable if seen is not None else None,
            bound_to=seen.node if event is states.Event.BOUND_ELSEWHERE and seen else None,
            timeout=self._bind_timeout,
        )

    def _reject(
        self,
        allocation: allocations.Allocation,
        *,
        refusal: refusals.Refusal | None = None,
        released_with: str | None = None,
    ) -> None:
        """RejectTask: release the capacity, explain, and send the pod back to wait gated.

        ``refusal``: kube-scheduler refused the pod there: the node is remembered (for the
        pod and its gang), the pod backs off, and the gang's other pending allocations are
        released with it. ``released_with``: the member of its gang that was refused."""
        self.allocations.drop(allocation)
        self.rejected += 1
        key = allocation.key
        obj = self._objects.get(key)
        group = allocation.group or self._group_of(key)
        now = self._clock.now()
        if refusal is not None:
            retry = self.rejections.remember(
                key, group=group, node=allocation.node, now=now, refusal=refusal
            )
            why = f"{refusal.message}; admitted again no sooner than {conditions.timestamp(retry)}"
        else:
            why = f"released with {released_with}, rejected on {allocation.node}"
        message = f"admission of pod {key} on {allocation.node} rejected: {why}"
        logger.warning("%s", message)
        self._pod_event(key, type=events.WARNING, reason="AdmissionRejected", message=message)
        if group is not None:
            note = f"{message}; the pod waits gated again"
            self._notes[group] = (
                refusal.reason(message=note)
                if refusal is not None
                else reasons.new(reasons.ReasonCode.ADMISSION_REJECTED, note, node=allocation.node)
            )
            namespace, _, name = group.partition("/")
            if not name.startswith("pod:") and self._recorder is not None:
                self._recorder.record(
                    events.ObjectRef("PodGroup", name, namespace, "", keys.API_VERSION),
                    type=events.WARNING,
                    reason="AdmissionRejected",
                    message=message,
                )
        if obj is not None:
            when = self.rejections.send_back_at(key, now=now)
            if when <= now:
                self._send_back(key, obj, node=allocation.node)
            else:
                # Deleted less than a resend interval ago: it stays pinned and ungated until
                # then (kube-scheduler may still bind it there if the cause goes).
                uid = str(wire.sub(obj, "metadata").get("uid") or "")
                self._due[key] = (when, uid, allocation.node)
                logger.info(
                    "pod %s is sent back at %s at the soonest (deleted once already within %gs)",
                    key,
                    conditions.timestamp(when),
                    self.rejections.resend,
                )
        if refusal is not None and group is not None:
            for sibling in [a for a in self.allocations.values() if a.group == group]:
                self._reject(sibling, released_with=key)

    def _send_back(self, key: str, obj: dict[str, typing.Any], *, node: str) -> None:
        """Send a refused pod back to wait gated: evict it (its controller recreates it, the
        webhook gates it) or, a bare pod, delete it and create it again."""
        self.rejections.sent_back(key, now=self._clock.now())
        self.sent_back += 1
        if pod_edits.controlled(obj):
            self._jobs.put_nowait(lambda: self._evict(key, obj))
        else:
            self._recreating[key] = asyncio.Event()
            self._jobs.put_nowait(lambda: self._recreate(key, obj, node=node))

    # Workers -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Do the queued requests and check the bind timeout until ``stop`` is set."""
        workers = [
            asyncio.create_task(self._work(), name=f"admission worker {i}")
            for i in range(self._concurrency)
        ]
        try:
            tick = min(1.0, self._bind_timeout / 4)
            while not await wakeups.sleep_or_stop(tick, stop=stop):
                self.check_timeouts()
        finally:
            waiting = list(self._waiting)
            for task in [*workers, *waiting]:
                task.cancel()
            await asyncio.gather(*workers, *waiting, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every queued request is done (tests), batches waiting for victims
        included."""
        while True:
            await self._jobs.join()
            if not self._waiting:
                return
            # A job may have left a batch waiting, and the wait ends in requests of its own.
            await asyncio.gather(*self._waiting, return_exceptions=True)

    @property
    def in_flight(self) -> int:
        return self._jobs.qsize() + self._active + len(self._waiting)

    async def _work(self) -> None:
        while True:
            job = await self._jobs.get()
            self._active += 1
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("an admission request failed")
            finally:
                self._active -= 1
                self._jobs.task_done()

    async def _admit(self, admit: _Admit) -> None:
        """Pin every pod of the batch; only if all pins landed, remove their gates."""
        if self._before_pin is not None:
            try:
                await self._before_pin([b.key for b in admit.binds])
            except asyncio.CancelledError:
                raise
            except Exception:
                # Admitting matters more than the autoscaler's view: pin anyway.
                logger.exception("withdrawing the capacity request of %s failed", admit.group)
        pinned = await asyncio.gather(*(self._pin(b) for b in admit.binds))
        if not all(version is not None for version in pinned):
            self._drop_pinning(admit, states.Event.PIN_FAILED)
            self._log_failure(
                "pin", f"could not pin every pod of {admit.group}: released none; retrying"
            )
            return
        staying = self._victims.staying(admit.victims) if self._victims is not None else ()
        if staying:
            # Off the worker: a wait may take up to eviction_wait, other batches go on.
            task = asyncio.get_running_loop().create_task(
                self._ungate_after_victims(admit, victims=staying),
                name=f"admitting {admit.group} after its victims",
            )
            self._waiting.add(task)
            task.add_done_callback(self._waiting.discard)
            return
        await self._ungate_all(admit, versions=pinned)

    async def _ungate_all(
        self, admit: _Admit, *, versions: collections.abc.Sequence[str | None]
    ) -> None:
        await asyncio.gather(
            *(
                self._ungate(b, version=v, bind=b.key in admit.ours)
                for b, v in zip(admit.binds, versions, strict=True)
                if v is not None
            )
        )

    async def _ungate_after_victims(
        self, admit: _Admit, *, victims: collections.abc.Sequence[decisions.EvictPod]
    ) -> None:
        """Keep the pinned batch gated until ``victims`` are gone, then ungate it; when they
        outstay the wait (or a pod of the batch goes), release the batch for a later cycle."""
        assert self._victims is not None
        keys_ = [b.key for b in admit.binds]
        try:
            waited = await self._victims.wait(
                keys_, victims, abandoned=lambda: not all(k in self.allocations for k in keys_)
            )
        except BaseException:
            # Stopped, or a bug: nothing will ungate them.
            self._drop_pinning(admit, states.Event.VICTIMS_STAYED)
            raise
        if waited.clear:
            # The informers may have seen the pins since: ungate at the newest version known.
            versions = [
                str(wire.sub(self._objects.get(b.key), "metadata").get("resourceVersion") or "")
                for b in admit.binds
            ]
            await self._ungate_all(admit, versions=versions)
            return
        self._drop_pinning(admit, states.Event.VICTIMS_STAYED)
        if waited.abandoned:
            logger.info("a pod of %s went while it waited for victims; released it", admit.group)
            return
        for bind in admit.binds:
            staying = [v for v in waited.staying if v.node == bind.node]
            if staying:
                message = self._victims.message(bind.node, staying, doing="admitting")
            else:
                names = ", ".join(v.key for v in waited.staying)
                message = f"released with its group: victims {names} were still on their nodes"
            self._pod_event(
                bind.key, type=events.WARNING, reason="FailedScheduling", message=message
            )

    def _drop_pinning(self, admit: _Admit, event: states.Event) -> None:
        """Tell the batch's allocations ``event`` (those still pinning end: the gang goes
        whole or not at all)."""
        for bind in admit.binds:
            allocation = self.allocations.get(bind.key)
            if allocation is not None:
                self._move(allocation, event)

    async def _pin(self, bind: decisions.BindPod) -> str | None:
        """Write the pin and the admitted annotations at the version read (the write
        primitive reads again on a conflict); the new resourceVersion, None on failure."""
        allocation = self.allocations.get(bind.key)
        if bind.key not in self._objects or allocation is None:
            return None
        now = self._clock.now()
        self._pinned[bind.key] = allocation.uid  # before the send: it may land unanswered

        def pin(current: rest.Body) -> rest.Body:
            # A pin from an earlier attempt stays (Kubernetes lets a gated pod's node affinity
            # only narrow); the session saw it and chose within it, so adding ours is a no-op.
            affinity = wire.sub(current, "spec").get("affinity")
            return {
                "metadata": {
                    "annotations": {
                        keys.ADMITTED_NODE_ANNOTATION: bind.node,
                        keys.ADMITTED_AT_ANNOTATION: conditions.timestamp(now),
                    },
                },
                "spec": {"affinity": pod_edits.pin_affinity(affinity, node=bind.node)},
            }

        written = await self._writer.update(
            pod_edits.path(bind.key), pin, what=f"pin of pod {bind.key} to {bind.node}"
        )
        if written.outcome is not writes.Outcome.WRITTEN or written.object is None:
            return None
        answer = written.object
        self._objects[bind.key] = answer
        allocation = self.allocations.get(bind.key)
        if allocation is not None:
            self._move(allocation, states.Event.PINNED)
        return str(wire.sub(answer, "metadata").get("resourceVersion") or "")

    async def _ungate(self, decision: decisions.BindPod, *, version: str, bind: bool) -> None:
        """Remove Berth's gate (keeping the others); Berth binds pods naming its scheduler."""
        key = decision.key
        allocation = self.allocations.get(key)
        obj = self._objects.get(key)
        if allocation is None or obj is None:
            return
        # Ungated before the request: an informer event of the ungated pod may come first.
        state_before, since_before = allocation.state, allocation.since
        self._move(allocation, states.Event.UNGATED)
        allocation.since = self._clock.now()
        try:
            self._objects[key] = await self._remove_gate(key, obj, version=version)
        except errors.KubeError as exc:
            # Still gated (or gone): the next cycle offers it again.
            self._log_failure("ungate", f"removing the gate of pod {key} failed: {exc}")
            allocation.state, allocation.since = state_before, since_before
            self._move(allocation, states.Event.UNGATE_FAILED)
            return
        if bind:
            await self._bind(decision)

    async def _bind(self, decision: decisions.BindPod) -> None:
        """Bind a pod naming Berth's scheduler once its gate is gone (nobody else will)."""
        body = pod_edits.binding(decision.key, uid=decision.uid, node=decision.node)
        try:
            await self._call("POST", pod_edits.path(decision.key) + "/binding", body=body)
        except errors.KubeError as exc:
            # Ungated and Berth's: the inner sink binds it from the next cycle on.
            self._log_failure("bind", f"binding pod {decision.key} failed: {exc}")
            allocation = self.allocations.get(decision.key)
            if allocation is not None:
                self._move(allocation, states.Event.BIND_FAILED)

    async def _release(self, key: str) -> None:
        """Bad input: Berth's gate on a pod with neither group nor queue; remove it, say why."""
        try:
            obj = self._objects.get(key)
            if obj is None or key not in self._bad:
                return
            version = wire.sub(obj, "metadata").get("resourceVersion")
            try:
                answer = await self._remove_gate(key, obj, version=version)
            except errors.KubeError as exc:
                self._log_failure("release", f"removing the gate of pod {key} failed: {exc}")
                return
            self._bad.discard(key)
            self._objects[key] = answer
            self._pod_event(
                key,
                type=events.WARNING,
                reason="NotBerths",
                message=(
                    f"the scheduling gate {_GATE} was removed: the pod names neither a PodGroup "
                    f"({keys.POD_GROUP_LABEL}) nor a queue ({keys.QUEUE_LABEL}), so Berth does "
                    "not admit it and the default scheduler places it"
                ),
            )
        finally:
            self._releasing.discard(key)

    async def _hand_over(self, key: str) -> None:
        """A gated pod of Berth's scheduler with ResourceClaims: remove the gate (no pin)."""
        try:
            obj = self._objects.get(key)
            if obj is None:
                return
            version = wire.sub(obj, "metadata").get("resourceVersion")
            try:
                self._objects[key] = await self._remove_gate(key, obj, version=version)
            except errors.KubeError as exc:
                self._log_failure("hand-over", f"removing the gate of pod {key} failed: {exc}")
        finally:
            self._handing_over.discard(key)

    async def _evict(self, key: str, obj: dict[str, typing.Any]) -> None:
        """A rejected pod with a controller: evict it; the controller recreates it (gated)."""
        uid = str(wire.sub(obj, "metadata").get("uid") or "")
        try:
            await self._call(
                "POST", pod_edits.path(key) + "/eviction", body=pod_edits.eviction(key, uid=uid)
            )
        except errors.NotFound:
            return
        except errors.KubeError as exc:
            self._log_failure("evict", f"evicting rejected pod {key} failed: {exc}")

    async def _recreate(self, key: str, obj: dict[str, typing.Any], *, node: str) -> None:
        """A rejected bare pod: delete it and create it again, unpinned and gated."""
        gone = self._recreating.get(key) or asyncio.Event()
        try:
            options: dict[str, typing.Any] = {
                "preconditions": {"uid": wire.sub(obj, "metadata").get("uid")}
            }
            if not wire.sub(obj, "spec").get("nodeName"):
                options["gracePeriodSeconds"] = 0  # never started: nothing to stop gracefully
            try:
                await self._call("DELETE", pod_edits.path(key), body=options)
            except errors.NotFound:
                gone.set()
            except errors.Conflict:
                return  # another pod of that name already: nothing of ours to recreate
            except errors.KubeError as exc:
                self._log_failure("recreate", f"deleting rejected pod {key} failed: {exc}")
                return
            body = pod_edits.recreated_pod(obj, node=node)
            collection = pod_edits.path(key).rsplit("/", 1)[0]
            deadline = self._clock.now() + _RECREATE_WAIT
            while True:
                try:
                    await self._call("POST", collection, body=body)
                    logger.info("recreated rejected pod %s gated", key)
                    return
                except errors.Conflict:
                    # The old pod is still terminating: wait for its removal, then again.
                    left = deadline - self._clock.now()
                    if left <= 0:
                        break
                    gone.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gone.wait(), timeout=min(left, 5.0))
                except errors.KubeError as exc:
                    self._log_failure("recreate", f"recreating rejected pod {key} failed: {exc}")
                    return
            self._log_failure("recreate", f"rejected pod {key} was not gone in time to recreate")
        finally:
            self._recreating.pop(key, None)

    async def _remove_gate(
        self, key: str, obj: dict[str, typing.Any], *, version: str | None
    ) -> rest.Body:
        """PATCH away Berth's gate (the other gates kept) at ``version``; the pod as written."""
        patch = {
            "metadata": {"resourceVersion": version},
            "spec": {"schedulingGates": pod_edits.without_gate(obj)},
        }
        written = await self._writer.patch(
            pod_edits.path(key), patch, what=f"gate removal of pod {key}", retry=False
        )
        if written.outcome is not writes.Outcome.WRITTEN or written.object is None:
            raise errors.KubeError(f"not written ({written.outcome.value})")
        return written.object

    async def _call(
        self, method: str, path: str, *, body: dict[str, typing.Any] | None = None
    ) -> rest.Body:
        """One request within the request timeout; every PATCH here is a JSON merge patch."""
        content_type = rest.MERGE_PATCH if method == "PATCH" else "application/json"
        return await rest.request(
            self._api,
            method=method,
            path=path,
            body=body,
            content_type=content_type,
            timeout=self._timeout,
        )

    def _group_of(self, key: str) -> str | None:
        """The pod's group key as the cache forms it (explicit group, or the queue's group of
        one); None when the pod is not known here."""
        obj = self._objects.get(key)
        return pods.pod_info(obj).pod_group if obj is not None else None

    def _pod_event(self, key: str, *, type: str, reason: str, message: str) -> None:
        if self._recorder is None:
            return
        namespace, _, name = key.partition("/")
        obj = self._objects.get(key)
        uid = str(wire.sub(obj, "metadata").get("uid") or "")
        self._recorder.record(
            events.ObjectRef("Pod", name, namespace, uid), type=type, reason=reason, message=message
        )

    def _log_failure(self, kind: str, message: str) -> None:
        # The first failure of a kind is a warning; repeats are debug (one line per pod would
        # flood the log while the API server is down).
        if kind not in self._failing:
            self._failing.add(kind)
            logger.warning("%s", message)
        else:
            logger.debug("%s", message)


def _noted(why: reasons.Reason, note: reasons.Reason) -> reasons.Reason:
    """The scheduler's reason for a group with the last admission rejection appended; the
    scheduler's code stands (it says why the group waits now)."""
    return dataclasses.replace(why, message=f"{why.message}; {note.message}")


def _with_demand(
    base: snapshots.Snapshot, offered: collections.abc.Sequence[pods.PodInfo]
) -> collections.abc.Mapping[str, usage.QueueUsage]:
    """``base``'s queue usage with the gated pods ``offered`` as pending counted as their
    queues' demand, as the cache counts the pending pods it knows (a pod whose queue's
    ``namespaceSelector`` does not admit its namespace is none of that queue's demand): without
    them a queue's waiting pods and its fair share would leave admission mode's work out."""
    totals = dict(base.queue_usage)
    for info in offered:
        if info.queue is None:
            continue
        queue = base.queues.get(info.queue)
        selector = queue.namespaces if queue is not None else None
        if selector is not None and not selector.admits(base.namespaces.get(info.namespace, {})):
            continue
        found = totals.get(info.queue, usage.EMPTY)
        totals[info.queue] = dataclasses.replace(found, requested=found.requested + info.requests)
    return types.MappingProxyType(totals)
