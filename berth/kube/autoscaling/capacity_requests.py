"""Capacity requests to the cluster's autoscaler: ProvisioningRequests and CapacityBuffers.

What Berth asks for, and when, is decided purely (:mod:`berth.status.capacity_requests`: a
gated gang in admission mode, a gang whose queue names a ProvisioningRequest class, a
Reservation that opted in; docs/autoscaling.md). :class:`CapacityRequests` makes and removes
the objects, and reads back what the autoscaler says:

- **Discovery** (:mod:`berth.kube.autoscaling.discovery`): which autoscaler APIs are
  served, asked every few minutes. A want no served kind can carry is told on the group
  (``no autoscaler API to ask ...``), and nothing is created.
- **Making a request** (:mod:`berth.kube.autoscaling.request_objects`): PodTemplates of the
  pods' shapes, then the ProvisioningRequest or one CapacityBuffer per shape, labelled as
  Berth's, named after their owner and attempt, and owned by it; a gang's pods are annotated
  to consume its ProvisioningRequest.
- **Reading it back.** Berth's requests are listed every ``resync`` seconds while there are
  any; each one's conditions become a verdict (:mod:`berth.kube.autoscaling.request_entries`)
  and a note on the group's reason (:meth:`CapacityRequests.note`,
  :mod:`berth.kube.autoscaling.request_notes`): what was asked, and what the autoscaler says —
  launching, provisioned, refused — or that none has answered in ``answer_timeout``. Changes of
  verdict are Events on the owner (``CapacityRequested``, ``CapacityProvisioned``,
  ``CapacityRequestRefused``, ``CapacityRequestUnanswered``).
- **Refused.** A refused request stays (its status is the record) until ``retry_after``
  (doubling to ``retry_cap``) has passed; then it is deleted and made again as the next
  attempt. Nothing is evicted for it, and no node is bought that the work cannot use: only
  work waiting for capacity alone asks.
- **Ending.** A request whose want ended (the gang placed, admitted, gone, or waiting for
  something capacity cannot give) is deleted with its PodTemplates (uid preconditions). A
  Reservation's buffer is emptied (``replicas: 0``) once the reservation holds its node, and
  deleted when it ends.
- **Admitting a gang that asked with a buffer.** Admission calls :meth:`withdraw` with the
  pods it is about to pin, and pins them only once it returned: the gang's CapacityBuffer is
  deleted first (one still asking when the pods bind makes Karpenter buy a node for its
  virtual pods). A ProvisioningRequest stays until the pods are placed: Cluster Autoscaler
  books its capacity for the pods that consume it.
- **What the autoscaler did** for each group waiting on one, as data
  (:attr:`CapacityRequests.verdicts`, the PodGroup's ``ScaleUp`` condition;
  :mod:`berth.status.scale_up`): for a request, its state; for a gang in scheduler mode that
  asks with its pods' ``Unschedulable`` condition alone (:attr:`~berth.status
  .capacity_requests.Planner.signals`), Karpenter's and Cluster Autoscaler's Events on its pods
  (:mod:`berth.kube.autoscaling.autoscaler_events`, listed on each pass while such a gang waits, on
  a cluster serving an autoscaler's API — Karpenter's NodePools or ``autoscaling.x-k8s.io``):
  a member it cannot fit, its plan, or nobody acting within ``answer_timeout``; for a gang
  asking with CapacityBuffers (one per pod shape), their ``Provisioning`` conditions
  (:func:`berth.status.scale_up.judge_buffers`: ``Infeasible``, or one shape fitting while
  another stays ``False``, timed from when none of Karpenter's NodeClaims was still
  launching: :mod:`berth.kube.autoscaling.node_claims`). A change of a gang's verdict is an
  Event on its owner, its code as the reason.
- **A gang the autoscaler cannot fit asks for nothing** for a backoff
  (:class:`berth.status.scale_up.Holds`): in scheduler mode its pods leave the autoscalers'
  list (the binder, told through ``on_hold``); a gang asking with a request has it deleted and
  not made again until the hold ends, when it is made as the next attempt — so that no node
  is bought for the members that fit. The verdict stands until the new request answers.
- **A new leader** adopts the requests it finds (by label and owner uid) once its first cycle
  has said what is wanted, and deletes the others.

Every write goes through the write primitive (:class:`~berth.kube.transport.writes.Writer`), fenced.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging

import kubernetes_asyncio.client

from berth.kube.autoscaling import (
    autoscaler_events,
    discovery,
    node_claims,
    request_entries,
    request_notes,
)
from berth.kube.autoscaling import request_objects as objects
from berth.kube.transport import events, writes
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import snapshots
from berth.status import capacity_requests as plans
from berth.status import scale_up
from berth.util import clocks, wakeups

__all__ = ["CapacityRequests"]

logger = logging.getLogger(__name__)

CapacityRequest = objects.CapacityRequest
Kind = plans.Kind

Entry = request_entries.Entry


class CapacityRequests:
    """Keeps the autoscaler requests the planner wants; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        writer: writes.Writer,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
        answer_timeout: float = 120.0,
        retry_after: float = 60.0,
        retry_cap: float = 900.0,
        hold_backoff: tuple[float, float] = (scale_up.HOLD_FIRST, scale_up.HOLD_CAP),
        resync: float = 5.0,
        on_hold: collections.abc.Callable[[collections.abc.Mapping[str, reasons.Reason]], None]
        | None = None,
    ) -> None:
        self._api = api
        self._objects = objects.RequestObjects(api, writer=writer)
        self._clock = clock
        self._recorder = recorder
        self._answer_timeout = answer_timeout
        self._retry = (retry_after, retry_cap)
        self._resync = resync
        self.planner = plans.Planner()
        self._snapshot: snapshots.Snapshot | None = None
        self._cycles = 0
        self._entries: dict[str, Entry] = {}  # by str(owner)
        self._failures: dict[str, int] = {}  # owner -> refusals in a row (the backoff)
        self._found: list[tuple[Kind, CapacityRequest]] | None = None  # a new leader's leftovers
        self.served: frozenset[Kind] | None = None
        """The kinds the API server serves (None: not asked yet)."""
        self._discovered_at = -discovery.INTERVAL
        # A new leader's leftovers nobody wants.
        self._stray: list[tuple[Kind, CapacityRequest]] = []
        self._wake = wakeups.Wakeup()
        self._notes: dict[str, str] = {}  # group key -> note
        self._verdicts: dict[str, scale_up.ScaleUp] = {}  # group key -> what the autoscaler did
        self._sightings: list[scale_up.Sighting] = []  # the autoscalers' Events, last read
        self._said: dict[str, scale_up.ScaleUpReason] = {}  # a judged gang's last Event
        # What the autoscaler did for a gang, judged from its Events or its buffers, by
        # group key: the verdict and the owner told of it.
        self._judged: dict[str, tuple[scale_up.ScaleUp, plans.Owner]] = {}
        # A gang asking with buffers that the autoscaler cannot fit: the verdict stands while
        # its want lasts (through its hold, when its buffers are gone) until its buffers say
        # otherwise, as Karpenter's last word on a pod stands in scheduler mode.
        self._cannot_fit: dict[str, scale_up.ScaleUp] = {}
        self._attempts: dict[str, int] = {}  # owner -> the attempt a hold withdrew
        self.holds = scale_up.Holds(first=hold_backoff[0], cap=hold_backoff[1])
        """The gangs the autoscaler cannot fit: kept off its list (scheduler mode) or asking
        with no request (admission mode) for a backoff."""
        self._on_hold = on_hold  # told the held gangs whenever they change (the binder)
        self.karpenter = False
        """Karpenter's NodePools are served (an autoscaler is expected to act)."""
        self._launching: float | None = None  # when a NodeClaim was last seen launching
        self._noted: tuple[decisions.CycleResult, dict[str, str], decisions.CycleResult] | None
        self._noted = None
        self._lock = asyncio.Lock()  # a pass and a withdrawal never interleave
        self.created = 0
        """Requests made (tests)."""

    # After each cycle ---------------------------------------------------------------------
    def offer(
        self,
        snapshot: snapshots.Snapshot,
        result: decisions.CycleResult,
        *,
        gated: collections.abc.Collection[str],
    ) -> None:
        """Take one cycle's decisions (``gated``: the pods admission mode holds)."""
        self._snapshot = snapshot
        marks = result.of_kind(decisions.MarkPending)
        told = [
            d
            for d in result.of_kind(decisions.Unschedulable)
            if d.subject is decisions.Subject.RESERVATION
        ]
        before = dict(self.planner.wants), self.planner.signalled
        wants = self.planner.cycle(snapshot, marks=marks, gated=gated, reservations=told)
        self._cycles += 1
        if (wants, self.planner.signalled) != before or self._cycles == 1:
            self._wake.wake()

    def note(self, group: str) -> str | None:
        """What Berth asked the autoscaler for ``group`` (a gang's or a Reservation's key) and
        what it says, for the group's reason; None when nothing was asked."""
        return self._notes.get(group)

    def noted(self, result: decisions.CycleResult) -> decisions.CycleResult:
        """``result`` with each group's note appended to its reason's message (the code
        stands: it says why the group waits); the same object while nothing changed."""
        if not self._notes:
            return result
        memo = self._noted
        if memo is not None and memo[0] is result and memo[1] is self._notes:
            return memo[2]
        group_why = request_notes.Noted(result.group_why, self._notes)
        noted = dataclasses.replace(result, group_why=group_why)
        self._noted = (result, self._notes, noted)
        return noted

    @property
    def verdicts(self) -> collections.abc.Mapping[str, scale_up.ScaleUp]:
        """What the autoscaler did for each group waiting on one (by group key): the
        PodGroup's ``ScaleUp`` condition (:mod:`berth.status.scale_up`)."""
        return self._verdicts

    @property
    def notes(self) -> collections.abc.Mapping[str, str]:
        """Every group's note (see :meth:`note`)."""
        return self._notes

    @property
    def entries(self) -> collections.abc.Mapping[str, Entry]:
        """The requests made, by owner (tests)."""
        return self._entries

    # The loop -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Discover, reconcile and read back until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("capacity requests: a pass failed")
            self._wake.clear()
            await self._wake.sleep(stop=stop, timeout=self._resync)

    async def reconcile(self) -> None:
        """One pass: discovery when due, leftovers adopted, statuses read, objects made and
        removed as the wants say, notes and Events updated."""
        async with self._lock:
            await self._pass()

    async def withdraw(self, pods: collections.abc.Collection[str]) -> None:
        """Delete the CapacityBuffers asking for any of ``pods`` (keys) and forget their wants;
        return once the deletions are answered. Admission awaits it before pinning the pods it
        admits (module docstring: a buffer still asking when they bind buys one node too many).
        A want whose request is a ProvisioningRequest is kept (its pods consume it)."""
        wanted = set(pods)
        if not wanted:
            return
        async with self._lock:
            for key, want in sorted(self.planner.wants.items()):
                if want.purpose is plans.Purpose.RESERVATION or not wanted & set(want.members):
                    continue
                entry = self._entries.get(key)
                kind = entry.kind if entry is not None else want.kind_in(self.served)
                if kind is Kind.PROVISIONING_REQUEST:
                    continue
                self.planner.forget(key)
                self._failures.pop(key, None)
                if entry is not None:
                    del self._entries[key]
                    await self._remove(entry)
            self._update_notes(self.planner.wants)

    async def _pass(self) -> None:
        now = self._clock.now()
        if self.served is None or now - self._discovered_at >= discovery.INTERVAL:
            known = discovery.Served(self.served or frozenset(), self.karpenter)
            found = await discovery.discover(self._api, known=known)
            self.served, self.karpenter = found.kinds, found.karpenter
            self._discovered_at = now
        if self._found is None:
            self._found = await self._objects.list_all(self.served)
        if self._cycles == 0:
            return  # nothing is known to be wanted yet: leave what exists alone
        self._adopt()
        for kind, obj in self._stray:
            await self._objects.delete_object(kind, obj)
        self._stray = []
        if self._entries:
            await self._read_back()
            if self.karpenter:  # a shape whose node is still on its way is not one it cannot fit
                last, said = self._launching, [e.said.values() for e in self._entries.values()]
                self._launching = await node_claims.seen(self._api, said, self._clock, last)
        wants = dict(self.planner.wants)
        for key in sorted(set(self._entries) - set(wants)):
            await self._remove(self._entries.pop(key))
            self._failures.pop(key, None)
        # An autoscaler's Events are read only where one is known to run (its API is served):
        # elsewhere nobody writes them, and the lists would cost the API server for nothing.
        signals = self.planner.signals
        if signals and (self.karpenter or self.served):
            read = await autoscaler_events.sightings(
                self._api, (s.owner.namespace for s in signals.values())
            )
            if read is not None:  # a failed list keeps what was read before
                self._sightings = read
        else:
            self._sightings = []
        self._judge(wants)
        for key, want in sorted(wants.items()):
            if want.purpose is not plans.Purpose.RESERVATION and want.group in self.holds.held:
                # The autoscaler cannot fit a member: ask for nothing until the hold ends,
                # so that no node is bought for the members that fit.
                held = self._entries.pop(key, None)
                if held is not None:
                    await self._remove(held)
                    self._failures.pop(key, None)
                    self._attempts[key] = held.attempt  # the next one is made as the next
                continue
            await self._keep(key, want)
        self._update_notes(wants)

    # Adoption and reading back ----------------------------------------------------------------
    def _adopt(self) -> None:
        """Match a new leader's leftovers to its wants; the others are deleted as stray."""
        found, self._found = self._found or [], []
        if not found:
            return
        adopted, stray = request_entries.adopt(
            found, wants=self.planner.wants, entries=self._entries, now=self._clock.now()
        )
        self._entries.update(adopted)
        self._stray.extend(stray)

    async def _read_back(self) -> None:
        current = {
            (kind, f"{o['metadata'].get('namespace')}/{o['metadata']['name']}"): o
            for kind, o in await self._objects.list_all(self.served or ())
        }
        now = self._clock.now()
        for entry in self._entries.values():
            request_entries.read(entry, current, now=now)
            request_notes.tell(entry, now=now, timeout=self._answer_timeout, record=self._event)

    # Keeping a want -------------------------------------------------------------------------
    async def _keep(self, key: str, want: plans.Want) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.want = want
            now = self._clock.now()
            if entry.verdict.state is plans.State.REFUSED and entry.retry_at is None:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                entry.retry_at = now + min(self._retry[0] * 2 ** (failures - 1), self._retry[1])
            if entry.retry_at is not None and now >= entry.retry_at:
                await self._remove(self._entries.pop(key))
                await self._make(key, want, attempt=entry.attempt + 1)
                return
            if entry.kind is Kind.CAPACITY_BUFFER and entry.active != want.active:
                namespace = want.owner.namespace
                if await self._objects.scale(
                    namespace, entry.requests, entry.counts, active=want.active
                ):
                    entry.active = want.active
            return
        if want.purpose is plans.Purpose.RESERVATION and not want.active:
            return  # never asked while it could: nothing to keep
        await self._make(key, want, attempt=self._attempts.get(key, 0) + 1)

    async def _make(self, key: str, want: plans.Want, *, attempt: int) -> None:
        kind = want.kind_in(self.served)
        if kind is None:
            return  # the note says why
        shapes = await self._objects.shapes(want, self._snapshot)
        if not shapes:
            return  # its pods are gone: the next cycle ends the want
        try:
            made = await self._objects.make(want, kind=kind, attempt=attempt, shapes=shapes)
        except objects.KindGone:
            self.served = None  # no longer served? ask again on the next pass
            return
        if made is None:
            return
        entry = Entry(
            want=want,
            kind=kind,
            attempt=attempt,
            requests=made.requests,
            templates=made.templates,
            counts=made.counts,
            created=self._clock.now(),
            uids=made.uids,
            active=want.active,
        )
        self._entries[key] = entry
        self._attempts.pop(key, None)
        self.created += 1
        if kind is Kind.PROVISIONING_REQUEST:
            await self._objects.consume(want, request=made.requests[0])
        self._event(
            want.owner,
            type=events.NORMAL,
            reason="CapacityRequested",
            message=f"asked the autoscaler for {request_notes.what(entry)}",
        )
        entry.told = plans.State.UNANSWERED

    async def _remove(self, entry: Entry) -> None:
        await self._objects.remove(
            entry.kind,
            entry.want.owner,
            requests=entry.requests,
            uids=entry.uids,
            templates=entry.templates,
        )

    # Notes and Events -----------------------------------------------------------------------
    def _update_notes(self, wants: collections.abc.Mapping[str, plans.Want]) -> None:
        now = self._clock.now()
        verdicts: dict[str, scale_up.ScaleUp] = {}
        for key, want in wants.items():
            entry = self._entries.get(key)
            if entry is None:
                if want.kind_in(self.served) is None and self.served is not None:
                    verdicts[want.group] = scale_up.ScaleUp(
                        scale_up.ScaleUpReason.CAPACITY_API_UNSERVED,
                        request_notes.unserved(want),
                    )
                continue
            verdicts[want.group] = request_notes.request_verdict(
                entry, now=now, timeout=self._answer_timeout
            )
        current = set(self.planner.signals) | {w.group for w in wants.values()}
        for group, (verdict, _) in sorted(self._judged.items()):
            if group in current:  # not a gang admitted since (its want withdrawn)
                verdicts[group] = self._shown(group, verdict)
        self._verdicts = verdicts
        self._notes = {group: v.message for group, v in verdicts.items()}

    def _judge(self, wants: collections.abc.Mapping[str, plans.Want]) -> None:
        """What the autoscaler did for each gang, from its Events on the pods of a signalled
        gang (scheduler mode) and from the buffers of a gang asking with them; the holds
        updated from it (and the binder told), a changed verdict told on the gang's owner."""
        now = self._clock.now()
        autoscaled = self.karpenter or bool(self.served)
        by_pod: dict[str, list[scale_up.Sighting]] = {}  # each gang reads its members' only
        for seen in self._sightings:
            by_pod.setdefault(seen.pod_uid, []).append(seen)
        judged: dict[str, tuple[scale_up.ScaleUp, plans.Owner]] = {}
        for group, signalled in self.planner.signals.items():
            verdict = scale_up.judge(
                signalled.members,
                [s for uid in signalled.members.values() for s in by_pod.get(uid, ())]
                if by_pod
                else (),
                since=signalled.since,
                now=now,
                timeout=self._answer_timeout,
                autoscaled=autoscaled,
            )
            if verdict is not None:
                judged[group] = (verdict, signalled.owner)
        asking: set[str] = set()
        timeout, launching = self._answer_timeout, self._launching
        for key, want in wants.items():
            if want.purpose is plans.Purpose.RESERVATION:
                continue
            asking.add(want.group)
            entry = self._entries.get(key)
            found = (
                scale_up.judge_buffers(
                    list(entry.said.values()), now=now, timeout=timeout, launching=launching
                )
                if entry is not None and entry.kind is Kind.CAPACITY_BUFFER
                else None
            )
            if found is not None:
                self._cannot_fit[want.group] = found
            elif entry is not None and entry.verdict.state is plans.State.PROVISIONED:
                self._cannot_fit.pop(want.group, None)  # asked again, and all of it fits now
            if want.group in self._cannot_fit:
                judged[want.group] = (self._cannot_fit[want.group], want.owner)
        for group in set(self._cannot_fit) - asking:
            del self._cannot_fit[group]
        for key in set(self._attempts) - set(wants):
            del self._attempts[key]
        # A gang the autoscaler cannot fit asks for nothing for a while: otherwise it buys
        # nodes for the members that fit, which the gang can never use.
        if (
            self.holds.update({g: v for g, (v, _) in judged.items()}, now=now)
            and self._on_hold is not None
        ):
            self._on_hold(self.holds.held)
        for group, (verdict, owner) in sorted(judged.items()):
            if self._said.get(group) is not verdict.code:
                self._said[group] = verdict.code
                self._event(
                    owner,
                    type=events.WARNING if verdict.warning else events.NORMAL,
                    reason=verdict.code.value,
                    message=self._shown(group, verdict).message,
                )
        for group in set(self._said) - set(self.planner.signals) - asking:
            del self._said[group]
        self._judged = judged

    def _shown(self, group: str, verdict: scale_up.ScaleUp) -> scale_up.ScaleUp:
        """``verdict`` as said on ``group``: with its hold, while it is held."""
        until = self.holds.until(group)
        if until is None:
            return verdict
        pods = self.holds.held[group].code if group in self.planner.signals else None
        return request_notes.held(verdict, until=until, pods=pods)

    def _event(self, owner: plans.Owner, *, type: str, reason: str, message: str) -> None:
        if self._recorder is None:
            return
        ref = events.ObjectRef(
            owner.kind, owner.name, owner.namespace, owner.uid, owner.api_version
        )
        self._recorder.record(ref, type=type, reason=reason, message=message)
