"""Capacity requests to the cluster's autoscaler: ProvisioningRequests and CapacityBuffers.

What Berth asks for, and when, is decided purely (:mod:`berth.status.capacity_requests`: a
gated gang in admission mode, a gang whose queue names a ProvisioningRequest class, a
Reservation that opted in; docs/autoscaling.md). :class:`CapacityRequests` makes and removes
the objects, and reads back what the autoscaler says:

- **Discovery.** Which of ``autoscaling.x-k8s.io/v1`` ProvisioningRequests and
  ``v1beta1`` CapacityBuffers the API server serves, asked at start and every few minutes (an
  autoscaler installed later is found). A want no served kind can carry is told on the
  group (``no autoscaler API to ask ...``), and nothing is created.
- **Making a request.** The pods' shapes (one read of a member per distinct shape in the
  snapshot) become PodTemplates; then the ProvisioningRequest (one podSet per shape, with the
  class and parameters) or one CapacityBuffer per shape (``replicas``: the members of that
  shape). Every object is labelled as Berth's, named after its owner and attempt
  (``berth-pg-train-1``), and owned by the PodGroup, pod or Reservation it is for, so the
  garbage collector removes what Berth does not. The gang's pods are annotated to consume a
  ProvisioningRequest (``autoscaling.x-k8s.io/consume-provisioning-request`` and its class):
  Cluster Autoscaler then scales up for them only through the request — atomically with
  ``best-effort-atomic-scale-up`` — never pod by pod.
- **Reading it back.** Berth's requests are listed every ``resync`` seconds while there are
  any; each one's conditions become a verdict (:func:`berth.status.capacity_requests.verdict`)
  and a note on the group's reason (:meth:`CapacityRequests.note`): what was asked, and what
  the autoscaler says — launching, provisioned, refused — or that none has answered in
  ``answer_timeout``. Changes of verdict are Events on the owner (``CapacityRequested``,
  ``CapacityProvisioned``, ``CapacityRequestRefused``, ``CapacityRequestUnanswered``).
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
  deleted first. A buffer still there when the pods bind asks for its virtual pods on top of
  them, and Karpenter buys a node for it (it did, when the buffer went with the next pass,
  about 0.7 s after the pins). A ProvisioningRequest stays until the pods are placed:
  Cluster Autoscaler books its capacity for the pods that consume it, and asks for nothing
  more.
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
  another stays ``False``). A change of a gang's verdict is an Event on its owner, its code
  as the reason.
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
import copy
import dataclasses
import logging
import typing

import kubernetes_asyncio.client

from berth.api import autoscaling, keys
from berth.kube.autoscaling import autoscaler_events
from berth.kube.transport import errors, events, pod_edits, rest, watching, writes
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import snapshots
from berth.status import capacity_requests as plans
from berth.status import conditions, scale_up
from berth.util import clocks, wakeups

__all__ = ["MANAGED_LABEL", "OWNER_LABEL", "CapacityRequests", "Entry", "pod_template"]

logger = logging.getLogger(__name__)

Object = dict[str, typing.Any]
Kind = plans.Kind

MANAGED_LABEL = f"{keys.GROUP}/capacity-request"
"""On every object of a request: the attempt (``"1"``, ``"2"``, ...)."""
OWNER_LABEL = f"{keys.GROUP}/capacity-owner"
"""On every object of a request: the owner's uid (a new leader matches objects by it)."""
_OWNER_ANNOTATION = f"{keys.GROUP}/capacity-owner"  # "<Kind> ns/name", for people
_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # a template's container without an image
_GROUP_PATH = f"/apis/{autoscaling.GROUP}"
_PATHS = {
    Kind.PROVISIONING_REQUEST: (f"{_GROUP_PATH}/v1", "provisioningrequests"),
    Kind.CAPACITY_BUFFER: (f"{_GROUP_PATH}/v1beta1", "capacitybuffers"),
}
_API_VERSION = {
    Kind.PROVISIONING_REQUEST: autoscaling.PROVISIONING_REQUEST_API_VERSION,
    Kind.CAPACITY_BUFFER: autoscaling.CAPACITY_BUFFER_API_VERSION,
}
_DISCOVERY_INTERVAL = 300.0
_KARPENTER_PATH = "/apis/karpenter.sh/v1"  # NodePools served: Karpenter is installed


def pod_template(pod: collections.abc.Mapping[str, typing.Any]) -> Object:
    """A PodTemplate's ``template`` of ``pod``'s shape: its labels and spec, without what
    ties it to one pod (node, gates, ephemeral containers, Berth's pin); a container without
    an image gets a pause image (the autoscaler's virtual pods never run)."""
    metadata = pod.get("metadata") or {}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    for field in ("nodeName", "schedulingGates", "ephemeralContainers"):
        spec.pop(field, None)
    admitted = (metadata.get("annotations") or {}).get(keys.ADMITTED_NODE_ANNOTATION)
    if admitted and spec.get("affinity"):
        unpinned = pod_edits.unpin_affinity(spec["affinity"], node=str(admitted))
        if unpinned:
            spec["affinity"] = unpinned
        else:
            spec.pop("affinity")
    for field in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(field) or []):
            container.setdefault("name", f"c{i}")
            container.setdefault("image", _PAUSE_IMAGE)
    out: Object = {"spec": spec}
    labels = metadata.get("labels")
    if labels:
        out["metadata"] = {"labels": dict(labels)}
    return out


@dataclasses.dataclass
class Entry:
    """One request as made: its want, attempt, objects and what the autoscaler said."""

    want: plans.Want
    kind: Kind
    attempt: int
    requests: tuple[str, ...]  # the request objects' names (one PR, or a buffer per shape)
    templates: tuple[str, ...]  # its PodTemplates' names
    counts: tuple[int, ...]  # pods per shape, as asked
    created: float
    uids: dict[str, str] = dataclasses.field(default_factory=dict)  # object name -> uid
    verdict: plans.Verdict = dataclasses.field(
        default_factory=lambda: plans.Verdict(plans.State.UNANSWERED, "")
    )
    told: plans.State | None = None  # the state last told in an Event
    retry_at: float | None = None  # refused: when to ask again
    active: bool = True  # a buffer's replicas as written (False: 0)
    unanswered_told: bool = False  # the Event saying nobody answered went out
    said: dict[str, scale_up.BufferSaid] = dataclasses.field(default_factory=dict)
    """A gang's buffers: where each one's virtual pods fit, since when (by object name)."""

    @property
    def pods(self) -> int:
        return sum(self.counts)


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
        resync: float = 5.0,
        on_hold: collections.abc.Callable[[collections.abc.Mapping[str, reasons.Reason]], None]
        | None = None,
    ) -> None:
        self._api = api
        self._writer = writer
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
        self._found: list[tuple[Kind, Object]] | None = None  # a new leader's leftovers
        self.served: frozenset[Kind] | None = None
        """The kinds the API server serves (None: not asked yet)."""
        self._discovered_at = -_DISCOVERY_INTERVAL
        self._stray: list[tuple[Kind, Object]] = []  # a new leader's leftovers nobody wants
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
        self.holds = scale_up.Holds()
        """The gangs the autoscaler cannot fit: kept off its list (scheduler mode) or asking
        with no request (admission mode) for a backoff."""
        self._on_hold = on_hold  # told the held gangs whenever they change (the binder)
        self.karpenter = False
        """Karpenter's NodePools are served (an autoscaler is expected to act)."""
        self._noted: tuple[decisions.CycleResult, dict[str, str], decisions.CycleResult] | None = (
            None
        )
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
        before = dict(self.planner.wants), set(self.planner.signals)
        wants = self.planner.cycle(snapshot, marks=marks, gated=gated, reservations=told)
        self._cycles += 1
        if (wants, set(self.planner.signals)) != before or self._cycles == 1:
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
        noted = dataclasses.replace(result, group_why=_Noted(result.group_why, self._notes))
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
                kind = entry.kind if entry is not None else self._kind_for(want)
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
        if self.served is None or now - self._discovered_at >= _DISCOVERY_INTERVAL:
            await self._discover()
            self._discovered_at = now
        if self._found is None:
            self._found = await self._list_all()
        if self._cycles == 0:
            return  # nothing is known to be wanted yet: leave what exists alone
        self._adopt()
        for kind, obj in self._stray:
            await self._delete_object(kind, obj)
        self._stray = []
        if self._entries:
            await self._read_back()
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

    # Discovery ------------------------------------------------------------------------------
    async def _discover(self) -> None:
        served: set[Kind] = set()
        for kind, (version, plural) in _PATHS.items():
            try:
                listing = await rest.request(self._api, method="GET", path=version, timeout=10.0)
            except errors.NotFound:
                continue
            except errors.KubeError as exc:
                logger.warning("capacity requests: discovery of %s failed: %s", version, exc)
                if self.served is not None and kind in self.served:
                    served.add(kind)  # keep what was known
                continue
            names = {r.get("name") for r in listing.get("resources") or [] if isinstance(r, dict)}
            if plural in names:
                served.add(kind)
        try:
            listing = await rest.request(
                self._api, method="GET", path=_KARPENTER_PATH, timeout=10.0
            )
            self.karpenter = any(
                isinstance(r, dict) and r.get("name") == "nodepools"
                for r in listing.get("resources") or []
            )
        except errors.NotFound:
            self.karpenter = False
        except errors.KubeError as exc:
            logger.warning("capacity requests: discovery of %s failed: %s", _KARPENTER_PATH, exc)
        if frozenset(served) != self.served:
            logger.info(
                "capacity requests: the cluster serves %s",
                ", ".join(sorted(k.value for k in served))
                or "neither ProvisioningRequest nor CapacityBuffer",
            )
        self.served = frozenset(served)

    async def _list_all(self) -> list[tuple[Kind, Object]]:
        """Berth's request objects as they are now (by label), of every served kind."""
        found: list[tuple[Kind, Object]] = []
        for kind in sorted(self.served or (), key=lambda k: k.value):
            version, plural = _PATHS[kind]
            try:
                listing = await watching.list_pages(
                    self._api, path=f"{version}/{plural}", query={"labelSelector": MANAGED_LABEL}
                )
            except errors.KubeError as exc:
                logger.warning("capacity requests: listing %s failed: %s", plural, exc)
                continue
            found.extend((kind, item) for item in listing.items)
        return found

    # Adoption and reading back ----------------------------------------------------------------
    def _adopt(self) -> None:
        """Match a new leader's leftovers to its wants (by owner uid and attempt); keep the
        others in :attr:`_found` for :meth:`_keep`'s clean-up."""
        found, self._found = self._found or [], []
        if not found:
            return
        by_uid = {want.owner.uid: key for key, want in self.planner.wants.items()}
        stray: list[tuple[Kind, Object]] = []
        grouped: dict[tuple[str, Kind, str], list[Object]] = {}
        for kind, obj in found:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            owner = by_uid.get(str(labels.get(OWNER_LABEL) or ""))
            attempt = str(labels.get(MANAGED_LABEL) or "")
            if owner is None or owner in self._entries or not attempt.isdigit():
                stray.append((kind, obj))
                continue
            grouped.setdefault((owner, kind, attempt), []).append(obj)
        for (owner, kind, attempt), objects in sorted(grouped.items()):
            if owner in self._entries:
                stray.extend((kind, o) for o in objects)
                continue
            names = tuple(sorted(str(o["metadata"]["name"]) for o in objects))
            self._entries[owner] = Entry(
                want=self.planner.wants[owner],
                kind=kind,
                attempt=int(attempt),
                requests=names,
                templates=tuple(_template_names(kind, objects)),
                counts=(1,)
                if self.planner.wants[owner].purpose is plans.Purpose.RESERVATION
                else tuple(_counts(kind, objects)),
                created=self._clock.now(),
                uids={
                    str(o["metadata"]["name"]): str(o["metadata"].get("uid") or "") for o in objects
                },
            )
            logger.info("capacity requests: adopted %s %s", kind.value, ", ".join(names))
        self._stray.extend(stray)

    async def _read_back(self) -> None:
        current = {
            (kind, f"{o['metadata'].get('namespace')}/{o['metadata']['name']}"): o
            for kind, o in await self._list_all()
        }
        now = self._clock.now()
        for entry in self._entries.values():
            namespace = entry.want.owner.namespace
            statuses = [
                (current.get((entry.kind, f"{namespace}/{n}")) or {}).get("status") or {}
                for n in entry.requests
            ]
            entry.verdict = _worst([plans.verdict(entry.kind, status) for status in statuses])
            if entry.kind is Kind.CAPACITY_BUFFER:
                entry.said = _buffers_said(entry, statuses, now=now)
            self._tell(entry, now=now)

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
                await self._scale(entry, active=want.active)
            return
        if want.purpose is plans.Purpose.RESERVATION and not want.active:
            return  # never asked while it could: nothing to keep
        await self._make(key, want, attempt=self._attempts.get(key, 0) + 1)

    def _kind_for(self, want: plans.Want) -> Kind | None:
        for kind in want.kinds:
            if self.served is not None and kind in self.served:
                return kind
        return None

    async def _make(self, key: str, want: plans.Want, *, attempt: int) -> None:
        kind = self._kind_for(want)
        if kind is None:
            return  # the note says why
        shapes = await self._shapes(want)
        if not shapes:
            return  # its pods are gone: the next cycle ends the want
        owner = want.owner
        namespace = owner.namespace
        labels = {MANAGED_LABEL: str(attempt), OWNER_LABEL: owner.uid}
        meta = {
            "namespace": namespace,
            "labels": labels,
            "annotations": {_OWNER_ANNOTATION: str(owner)},
            "ownerReferences": [
                {
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                }
            ],
        }
        templates: list[str] = []
        for i, (template, _) in enumerate(shapes):
            name = plans.object_name(owner, attempt=attempt, part=str(i))
            written = await self._writer.create(
                f"/api/v1/namespaces/{namespace}/podtemplates",
                {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {**meta, "name": name},
                    "template": template,
                },
                what=f"PodTemplate {namespace}/{name} for {owner}",
            )
            if not written.ok:
                if written.outcome is writes.Outcome.GONE:
                    logger.warning("capacity requests: namespace %s is gone", namespace)
                return  # fenced, or refused (logged): the next pass tries again
            templates.append(name)
        counts = tuple(count for _, count in shapes)
        version, plural = _PATHS[kind]
        bodies: list[Object] = []
        if kind is Kind.PROVISIONING_REQUEST:
            spec: Object = {
                "provisioningClassName": want.class_name,
                "podSets": [
                    {"podTemplateRef": {"name": t}, "count": c}
                    for t, c in zip(templates, counts, strict=True)
                ],
            }
            if want.policy is not None and want.policy.parameters:
                spec["parameters"] = dict(want.policy.parameters)
            bodies.append(
                {
                    "metadata": {**meta, "name": plans.object_name(owner, attempt=attempt)},
                    "spec": spec,
                }
            )
        else:
            for i, (t, c) in enumerate(zip(templates, counts, strict=True)):
                suffix = str(i) if len(templates) > 1 else ""
                bodies.append(
                    {
                        "metadata": {
                            **meta,
                            "name": plans.object_name(owner, attempt=attempt, part=suffix),
                        },
                        "spec": {
                            "provisioningStrategy": autoscaling.BUFFER_ACTIVE_CAPACITY,
                            "podTemplateRef": {"name": t},
                            "replicas": c if want.active else 0,
                        },
                    }
                )
        names: list[str] = []
        uids: dict[str, str] = {}
        for body in bodies:
            name = body["metadata"]["name"]
            written = await self._writer.create(
                f"{version}/namespaces/{namespace}/{plural}",
                {"apiVersion": _API_VERSION[kind], "kind": kind.value, **body},
                what=f"{kind.value} {namespace}/{name} for {owner}",
            )
            if written.outcome is writes.Outcome.GONE:
                self.served = None  # no longer served? ask again on the next pass
                return
            if not written.ok:
                return
            names.append(name)
            if written.object is not None:
                uids[name] = str((written.object.get("metadata") or {}).get("uid") or "")
        entry = Entry(
            want=want,
            kind=kind,
            attempt=attempt,
            requests=tuple(names),
            templates=tuple(templates),
            counts=counts,
            created=self._clock.now(),
            uids=uids,
            active=want.active,
        )
        self._entries[key] = entry
        self._attempts.pop(key, None)
        self.created += 1
        if kind is Kind.PROVISIONING_REQUEST:
            await self._consume(want, request=names[0])
        self._event(
            want.owner,
            type=events.NORMAL,
            reason="CapacityRequested",
            message=f"asked the autoscaler for {_what(entry)}",
        )
        entry.told = plans.State.UNANSWERED

    async def _shapes(self, want: plans.Want) -> list[tuple[Object, int]]:
        """The PodTemplates' ``template``\\ s of ``want`` with how many pods each stands for."""
        snapshot = self._snapshot
        if want.purpose is plans.Purpose.RESERVATION:
            info = snapshot.reservations.get(want.group) if snapshot is not None else None
            if info is None:
                return []
            return [(pod_template(dict(info.template)), 1)]
        groups: dict[str, list[str]] = {}
        for key in want.members:
            pod = snapshot.pods.get(key) if snapshot is not None else None
            if pod is None:
                continue
            shape = repr(
                (
                    sorted(pod.requests.items()),
                    pod.node_selector,
                    pod.required_affinity,
                    pod.tolerations,
                    pod.spread,
                    pod.pod_affinity,
                )
            )
            groups.setdefault(shape, []).append(key)
        out: list[tuple[Object, int]] = []
        for members in groups.values():
            try:
                obj = await rest.request(
                    self._api, method="GET", path=pod_edits.path(members[0]), timeout=10.0
                )
            except errors.KubeError as exc:
                logger.info("capacity requests: cannot read pod %s: %s", members[0], exc)
                continue
            out.append((pod_template(obj), len(members)))
        return out

    async def _consume(self, want: plans.Want, *, request: str) -> None:
        """Annotate the gang's pods to consume ``request``: Cluster Autoscaler then scales up
        for them only through it."""
        annotations = {
            autoscaling.CONSUME_ANNOTATION: request,
            autoscaling.CLASS_ANNOTATION: want.class_name,
        }
        await asyncio.gather(
            *(
                self._writer.patch(
                    pod_edits.path(key),
                    {"metadata": {"annotations": annotations}},
                    what=f"pod {key} consumes ProvisioningRequest {request}",
                )
                for key in want.members
            )
        )

    async def _scale(self, entry: Entry, *, active: bool) -> None:
        version, plural = _PATHS[Kind.CAPACITY_BUFFER]
        namespace = entry.want.owner.namespace
        for name, count in zip(entry.requests, entry.counts, strict=False):
            written = await self._writer.patch(
                f"{version}/namespaces/{namespace}/{plural}/{name}",
                {"spec": {"replicas": count if active else 0}},
                what=f"CapacityBuffer {namespace}/{name} replicas",
            )
            if not written.ok:
                return
        entry.active = active

    # Removing -------------------------------------------------------------------------------
    async def _remove(self, entry: Entry) -> None:
        namespace = entry.want.owner.namespace
        version, plural = _PATHS[entry.kind]
        for name in entry.requests:
            uid = entry.uids.get(name)
            path = f"{version}/namespaces/{namespace}/{plural}/{name}"
            what = f"{entry.kind.value} {namespace}/{name}"
            if uid:
                await self._writer.delete(path, uid=uid, what=what)
            else:
                await self._delete_path(path, what=what)
        for name in entry.templates:
            await self._delete_path(
                f"/api/v1/namespaces/{namespace}/podtemplates/{name}",
                what=f"PodTemplate {namespace}/{name}",
            )
        logger.info(
            "capacity requests: removed %s for %s", ", ".join(entry.requests), entry.want.owner
        )

    async def _delete_object(self, kind: Kind, obj: Object) -> None:
        metadata = obj.get("metadata") or {}
        namespace, name = metadata.get("namespace"), metadata.get("name")
        version, plural = _PATHS[kind]
        await self._writer.delete(
            f"{version}/namespaces/{namespace}/{plural}/{name}",
            uid=str(metadata.get("uid") or ""),
            what=f"{kind.value} {namespace}/{name} (no longer wanted)",
        )
        for name in _template_names(kind, [obj]):
            await self._delete_path(
                f"/api/v1/namespaces/{namespace}/podtemplates/{name}",
                what=f"PodTemplate {namespace}/{name}",
            )

    async def _delete_path(self, path: str, *, what: str) -> None:
        """Delete Berth's object at ``path`` (read first for its uid: never another's)."""
        try:
            obj = await rest.request(self._api, method="GET", path=path, timeout=10.0)
        except errors.KubeError:
            return  # gone (or unreadable: the owner's garbage collection takes it)
        metadata = obj.get("metadata") or {}
        if MANAGED_LABEL not in (metadata.get("labels") or {}):
            return
        await self._writer.delete(path, uid=str(metadata.get("uid") or ""), what=what)

    # Notes and Events -----------------------------------------------------------------------
    def _tell(self, entry: Entry, *, now: float) -> None:
        """An Event on the owner when the verdict changed (or nobody answered in time)."""
        state = entry.verdict.state
        if state is not entry.told and state is not plans.State.UNANSWERED:
            entry.told = state
            what = _what(entry)
            detail = entry.verdict.detail
            if state is plans.State.PROVISIONED:
                self._event(
                    entry.want.owner,
                    type=events.NORMAL,
                    reason="CapacityProvisioned",
                    message=f"the autoscaler provided {what}: {detail}",
                )
            elif state is plans.State.REFUSED:
                self._event(
                    entry.want.owner,
                    type=events.WARNING,
                    reason="CapacityRequestRefused",
                    message=f"the autoscaler refused {what}: {detail}",
                )
            else:
                self._event(
                    entry.want.owner,
                    type=events.NORMAL,
                    reason="CapacityRequestAccepted",
                    message=f"the autoscaler works on {what}: {detail}",
                )
        if (
            state is plans.State.UNANSWERED
            and now - entry.created >= self._answer_timeout
            and not entry.unanswered_told
        ):
            entry.unanswered_told = True
            self._event(
                entry.want.owner,
                type=events.WARNING,
                reason="CapacityRequestUnanswered",
                message=self._unanswered(entry),
            )

    def _unanswered(self, entry: Entry) -> str:
        return f"no autoscaler has answered {_what(entry)} in {self._answer_timeout:g}s: is " + (
            "Cluster Autoscaler (with ProvisioningRequests enabled) running?"
            if entry.kind is Kind.PROVISIONING_REQUEST
            else "Karpenter (with its CapacityBuffer feature gate) or Cluster Autoscaler running?"
        )

    def _update_notes(self, wants: collections.abc.Mapping[str, plans.Want]) -> None:
        now = self._clock.now()
        verdicts: dict[str, scale_up.ScaleUp] = {}
        for key, want in wants.items():
            entry = self._entries.get(key)
            if entry is None:
                if self._kind_for(want) is None and self.served is not None:
                    verdicts[want.group] = scale_up.ScaleUp(
                        scale_up.ScaleUpReason.CAPACITY_API_UNSERVED,
                        _unserved(want, self._snapshot),
                    )
                continue
            state = entry.verdict.state
            overdue = now - entry.created >= self._answer_timeout
            code = scale_up.of_request(state, overdue=overdue)
            if state is plans.State.UNANSWERED:
                message = (
                    self._unanswered(entry)
                    if overdue
                    else f"asked the autoscaler for {_what(entry)}"
                )
            elif state is plans.State.REFUSED:
                # The time to ask again, not the seconds left: the words stay the same while
                # nothing changes (a countdown would rewrite the group's status every pass).
                again = conditions.timestamp(entry.retry_at if entry.retry_at is not None else now)
                message = (
                    f"the autoscaler refused {_what(entry)}: {entry.verdict.detail}; asking again "
                    f"at {again}"
                )
            elif state is plans.State.PROVISIONED:
                message = f"the autoscaler provided {_what(entry)}"
            else:
                message = f"asked the autoscaler for {_what(entry)}: {entry.verdict.detail}"
            verdicts[want.group] = scale_up.ScaleUp(code, message)
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
                [s for uid in signalled.members.values() for s in by_pod.get(uid, ())],
                since=signalled.since,
                now=now,
                timeout=self._answer_timeout,
                autoscaled=autoscaled,
            )
            if verdict is not None:
                judged[group] = (verdict, signalled.owner)
        asking: set[str] = set()
        for key, want in wants.items():
            if want.purpose is plans.Purpose.RESERVATION:
                continue
            asking.add(want.group)
            entry = self._entries.get(key)
            found = (
                scale_up.judge_buffers(
                    list(entry.said.values()), now=now, timeout=self._answer_timeout
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
        held = (
            f"its pods wait as {self.holds.held[group].code.value}, off the autoscalers' list"
            if group in self.planner.signals
            else "it asks the autoscaler for nothing (its requests withdrawn)"
        )
        return dataclasses.replace(
            verdict, message=f"{verdict.message}; {held}, until {conditions.timestamp(until)}"
        )

    def _event(self, owner: plans.Owner, *, type: str, reason: str, message: str) -> None:
        if self._recorder is None:
            return
        ref = events.ObjectRef(
            owner.kind, owner.name, owner.namespace, owner.uid, owner.api_version
        )
        self._recorder.record(ref, type=type, reason=reason, message=message)


class _Noted(collections.abc.Mapping[str, reasons.Reason]):
    """Groups' reasons with their capacity-request notes appended (read on demand: a parked
    backlog's reasons are many, the notes few)."""

    __slots__ = ("_notes", "_why")

    def __init__(
        self,
        why: collections.abc.Mapping[str, reasons.Reason],
        notes: collections.abc.Mapping[str, str],
    ) -> None:
        self._why = why
        self._notes = notes

    def __getitem__(self, key: str) -> reasons.Reason:
        why = self._why[key]
        note = self._notes.get(key)
        if note is None:
            return why
        return dataclasses.replace(why, message=f"{why.message}; {note}")

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._why)

    def __len__(self) -> int:
        return len(self._why)


def _what(entry: Entry) -> str:
    namespace = entry.want.owner.namespace
    names = ", ".join(f"{namespace}/{n}" for n in entry.requests)
    pods = (
        "a reservation's room"
        if entry.want.purpose is plans.Purpose.RESERVATION
        else (f"{entry.pods} pod{'s' if entry.pods != 1 else ''}' capacity")
    )
    return f"{pods} with {entry.kind.value} {names}"


def _unserved(want: plans.Want, snapshot: snapshots.Snapshot | None) -> str:
    if want.purpose is plans.Purpose.QUEUE:
        return (
            f"its queue asks for a ProvisioningRequest ({want.class_name}), which this cluster "
            f"does not serve ({autoscaling.PROVISIONING_REQUEST_API_VERSION}): its pods' "
            "Unschedulable condition is the autoscalers' only signal"
        )
    if want.purpose is plans.Purpose.RESERVATION:
        return (
            f"no autoscaler to ask for its room: CapacityBuffers "
            f"({autoscaling.CAPACITY_BUFFER_API_VERSION}) are not served"
        )
    return (
        "no autoscaler API to ask for its capacity: neither ProvisioningRequests "
        f"({autoscaling.PROVISIONING_REQUEST_API_VERSION}) nor CapacityBuffers "
        f"({autoscaling.CAPACITY_BUFFER_API_VERSION}) are served"
    )


def _worst(verdicts: collections.abc.Sequence[plans.Verdict]) -> plans.Verdict:
    order = (
        plans.State.REFUSED,
        plans.State.UNANSWERED,
        plans.State.PENDING,
        plans.State.PROVISIONED,
    )
    for state in order:
        for v in verdicts:
            if v.state is state:
                return v
    return plans.Verdict(plans.State.UNANSWERED, "")


def _template_names(kind: Kind, objects: collections.abc.Iterable[Object]) -> list[str]:
    names: list[str] = []
    for obj in objects:
        spec = obj.get("spec") or {}
        if kind is Kind.PROVISIONING_REQUEST:
            names.extend(
                str((p.get("podTemplateRef") or {}).get("name"))
                for p in spec.get("podSets") or []
                if isinstance(p, dict)
            )
        else:
            ref = (spec.get("podTemplateRef") or {}).get("name")
            if ref:
                names.append(str(ref))
    return names


def _counts(kind: Kind, objects: collections.abc.Iterable[Object]) -> list[int]:
    counts: list[int] = []
    for obj in objects:
        spec = obj.get("spec") or {}
        if kind is Kind.PROVISIONING_REQUEST:
            counts.extend(int(p.get("count") or 0) for p in spec.get("podSets") or [])
        else:
            counts.append(int(spec.get("replicas") or 0))
    return counts


def _buffers_said(
    entry: Entry,
    statuses: collections.abc.Sequence[collections.abc.Mapping[str, typing.Any]],
    *,
    now: float,
) -> dict[str, scale_up.BufferSaid]:
    """Where each of a gang's buffers' virtual pods fit, as ``statuses`` say; since when,
    kept from what was read before while it stays the same."""
    namespace = entry.want.owner.namespace
    said: dict[str, scale_up.BufferSaid] = {}
    for name, count, status in zip(entry.requests, entry.counts, statuses, strict=False):
        fit = plans.fit(status)
        had = entry.said.get(name)
        said[name] = scale_up.BufferSaid(
            name=f"{namespace}/{name}",
            pods=count,
            fit=fit,
            since=had.since if had is not None and had.fit is fit else now,
            detail=plans.told(status, autoscaling.BUFFER_PROVISIONING),
        )
    return said
