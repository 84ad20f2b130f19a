"""Why a pod or PodGroup waits, or why it went where it did: a read-only dry-run session.

``kubectl berth why`` (:mod:`berth.cli.kubectl_berth`) lists the cluster
(:func:`berth.kube.transport.listing.read_cluster`) and hands it here. :func:`dry_run` builds the
scheduler's :class:`~berth.scheduler.snapshot.cache.ClusterCache` from it the way the operator's
informers do, and runs one session of the same scheduler (:class:`berth.scheduler.loop.
Scheduler`, the default profile or the user's) over it. Nothing is written anywhere: the
session's decisions are read, never applied.

While the session runs, the framework's ``filter_sink`` and ``score_table_sink`` report each
attempt of the pods asked about: every node's verdict (the first plugin, in profile order, that
rejected it, and why — the attribution of the why-pending text, :func:`berth.scheduler.
framework.filtering.unplaceable`) and the top-N score table. The profile's actions are wrapped
so that each attempt is labelled with the action that made it (attempts the plugins make on
their own while the session opens are not the scheduler's verdict and are left out). A last
action, ``probe``, attempts the pods no action tried (their group waits for pods, its queue is
closed, ...) once on their own, so that the nodes' verdicts are known for them too, and reads
where the session placed them.

A bound pod asked about is offered to the session as if it were pending again (its own usage
freed), which shows where the scheduler would put it now and how that node scores; so are all
the pods of a PodGroup asked about when none of them waits.
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
import dataclasses
import logging
import typing

import numpy as np

from berth.api import core, keys
from berth.api import objects as api_objects
from berth.kube.transport import listing
from berth.scheduler import loop
from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.framework import (
    filtering,
    interfaces,
    profiles,
    registries,
    sessions,
)
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import nodetable, pods

__all__ = [
    "PROBE",
    "Attempt",
    "DryRun",
    "Member",
    "NodeVerdict",
    "dry_run",
    "node_verdicts",
    "object_key",
    "quiet_logs",
]

PROBE = "probe"
"""Name of the last action: it attempts the pods asked about that no action tried."""


@dataclasses.dataclass(frozen=True)
class NodeVerdict:
    """One node for one attempt: passed every filter (``plugin`` None), or the first plugin
    that rejected it and that plugin's reasons for this node."""

    node: str
    plugin: str | None = None
    reasons: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.plugin is None


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One scheduling attempt of a pod in the dry run, past PreFilter."""

    pod: str  # namespace/name
    action: str  # the action that made it, or PROBE
    verdicts: tuple[NodeVerdict, ...]
    summary: str  # "1/3 nodes fit: 2 Insufficient cpu", as the why-pending text counts them
    score_table: str | None = None  # markdown, best node first; None when no node fits

    @property
    def feasible(self) -> int:
        return sum(1 for v in self.verdicts if v.fits)

    @property
    def best_node(self) -> str | None:
        """The node the attempt chose: the score table's first row (ties to the lower row,
        as the framework breaks them)."""
        if self.score_table is None:
            return None
        lines = self.score_table.splitlines()
        return lines[3].split("|")[1].strip() if len(lines) > 3 else None


@dataclasses.dataclass(frozen=True)
class Member:
    """A pod asked about (or a member of the group asked about) and its dry-run outcome."""

    key: str
    group: str | None  # its PodGroup (namespace/name), or its implicit group of one
    bound_to: str | None  # the node it is bound to in the cluster, if any
    phase: str  # in the cluster
    placed_on: str | None = None  # where the session bound it
    nominated_to: str | None = None  # where the session nominated it (room freeing up)
    reason: str | None = None  # why the session left it pending (the message)
    follows_group: bool = False  # its reason is its group's (it did not fail on its own)


@dataclasses.dataclass(frozen=True)
class DryRun:
    """The outcome of :func:`dry_run` for the pods asked about."""

    scheduler_name: str
    nodes: int
    members: tuple[Member, ...]
    attempts: tuple[Attempt, ...]  # in the order they were made
    group_reasons: collections.abc.Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Why the session left each group of the members pending, by group key."""
    errors: tuple[str, ...] = ()  # plugins that raised, one line each
    skipped: tuple[str, ...] = ()  # objects the cache could not read

    def attempts_of(self, key: str) -> list[Attempt]:
        return [a for a in self.attempts if a.pod == key]


def node_verdicts(
    names: collections.abc.Sequence[str],
    results: collections.abc.Sequence[tuple[str, filtering.NodeFilter]],
) -> tuple[NodeVerdict, ...]:
    """Every node's verdict: attributed to the first filter (in evaluation order) that
    rejected it, with that filter's reasons for the node (``rejected by <plugin>`` when its
    reasons do not cover the node), exactly as :func:`~berth.scheduler.framework.filtering.
    unplaceable` counts them."""
    rows = len(names)
    remaining = np.ones(rows, dtype=np.bool_)
    plugin_of: dict[int, str] = {}
    reasons_of: dict[int, list[str]] = {}
    for plugin, node_filter in results:
        failed = remaining & ~node_filter.passed
        if not failed.any():
            continue
        hits = list(node_filter.reasons().items())
        for row in np.flatnonzero(failed).tolist():
            plugin_of[row] = plugin
            reasons_of[row] = [reason for reason, rows_ in hits if rows_[row]] or [
                f"rejected by {plugin}"
            ]
        remaining &= node_filter.passed
    return tuple(
        NodeVerdict(names[row], plugin_of.get(row), tuple(reasons_of.get(row, ())))
        for row in range(rows)
    )


class _Recorder:
    """Collects the attempts of the target pods while actions run (see the module docstring)."""

    def __init__(self, targets: collections.abc.Set[str]) -> None:
        self.targets = targets
        self.action: str | None = None
        self.attempts: list[Attempt] = []
        self.placed: dict[str, str] = {}
        self.nominated: dict[str, str] = {}

    def filters(
        self,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        results: tuple[tuple[str, filtering.NodeFilter], ...],
    ) -> None:
        if self.action is None or pod.key not in self.targets:
            return
        summary = filtering.unplaceable(results, rows=len(nodes)).message()
        verdicts = node_verdicts(nodes.names, results)
        self.attempts.append(Attempt(pod.key, self.action, verdicts, summary))

    def score_table(self, pod: str, text: str) -> None:
        last = self.attempts[-1] if self.attempts and self.action is not None else None
        if last is not None and last.score_table is None and pod == last.pod:
            self.attempts[-1] = dataclasses.replace(last, score_table=text)


class _Labelled:
    """An action that labels the attempts made while it runs with its name."""

    def __init__(self, action: interfaces.Action, *, recorder: _Recorder) -> None:
        self.name = action.name
        self._action = action
        self._recorder = recorder

    def execute(self, session: sessions.Session) -> None:
        self._recorder.action = self.name
        try:
            self._action.execute(session)
        finally:
            self._recorder.action = None


class _Probe:
    """The last action: attempt the target pods no action tried; read where they went."""

    name = PROBE

    def __init__(self, *, recorder: _Recorder) -> None:
        self._recorder = recorder

    def execute(self, session: sessions.Session) -> None:
        recorder = self._recorder
        tried = {a.pod for a in recorder.attempts}
        recorder.action = PROBE
        try:
            waiting = (*session.snapshot.pending, *session.snapshot.gated)
            for pod in waiting:
                untried = pod.key not in tried and pod.key not in session.placed
                if pod.key in recorder.targets and untried:
                    session.place(pod)
        finally:
            recorder.action = None
        recorder.placed = {k: n for k, n in session.placed.items() if k in recorder.targets}
        for job in session.jobs.values():
            for key, node in job.pipelined.items():
                if key in recorder.targets:
                    recorder.nominated[key] = node


_FINISHED = frozenset({"Succeeded", "Failed"})


def _as_pending(pod: core.Pod, *, scheduler: str) -> core.Pod:
    """``pod`` as the scheduler would see it waiting: unbound, Pending, the scheduler's own."""
    copied = copy.deepcopy(pod)
    spec = copied.setdefault("spec", {})
    spec.pop("nodeName", None)
    spec["schedulerName"] = scheduler
    copied["status"] = {"phase": "Pending"}
    return copied


def object_key(obj: api_objects.KubeObject) -> str:
    """``namespace/name`` of a namespaced object as the API sent it."""
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or ''}"


@contextlib.contextmanager
def quiet_logs(*, quiet: bool) -> collections.abc.Iterator[None]:
    """Keep the scheduler's log lines (plugin errors come back in :attr:`DryRun.errors`) off
    the terminal while ``quiet``; restored afterwards."""
    if not quiet:
        yield
        return
    logger = logging.getLogger("berth")
    handler = logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = propagate
        logger.removeHandler(handler)


def dry_run(
    objects: listing.ClusterObjects,
    *,
    pod_keys: collections.abc.Collection[str] = (),
    group_key: str | None = None,
    profile: profiles.Profile,
    registry: registries.Registry,
    clock: clocks.Clock,
    top: int,
) -> DryRun:
    """One session over ``objects`` explaining the pods ``pod_keys`` and the members of the
    PodGroup ``group_key`` (``namespace/name``); ``top`` rows per score table.

    Raises :class:`~berth.scheduler.framework.errors.ProfileError` for an unusable profile.
    """
    scheduler_name = profile.scheduler_name
    raw = {object_key(pod): pod for pod in objects.pods}
    bound: dict[str, str] = {}
    phases: dict[str, str] = {}
    for key, pod in raw.items():
        node = (pod.get("spec") or {}).get("nodeName")
        if isinstance(node, str) and node:
            bound[key] = node
        phases[key] = str((pod.get("status") or {}).get("phase") or "Pending")
    # As the operator does by default (setting admit_plain_pods): a pod naming no group or
    # queue is charged to its namespace's default queue, else ``default``.
    cache = cluster_cache.ClusterCache(
        scheduler_names=(scheduler_name,), plain_pods_queue=keys.DEFAULT_QUEUE
    )
    skipped = listing.fill_cache(cache, objects, scheduler_names={scheduler_name})

    def offer_again(keys: collections.abc.Iterable[str]) -> None:
        """Offer these pods to the session as if they were waiting now (their usage freed)."""
        for key in keys:
            if key in raw and phases[key] not in _FINISHED:
                cache.update_pod(_as_pending(raw[key], scheduler=scheduler_name))

    offer_again(pod_keys)
    snapshot = cache.snapshot(clock.now())
    members = {k for k in pod_keys if k in snapshot.pods}
    if group_key is not None:
        in_group = {k for k, p in snapshot.pods.items() if p.pod_group == group_key}
        waiting = {p.key for p in (*snapshot.pending, *snapshot.gated)}
        if in_group and not in_group & waiting:
            # Every pod of the group is placed: where would the group go now, and why?
            offer_again(sorted(in_group))
            snapshot = cache.snapshot(clock.now())
        members |= in_group

    recorder = _Recorder(frozenset(members))
    available = tuple(_Labelled(a, recorder=recorder) for a in actions_registry.default_actions())
    explaining = profile.model_copy(update={"actions": (*profile.actions, PROBE)})
    scheduler = loop.Scheduler(
        explaining,
        registry=registry,
        clock=clock,
        actions=(*available, _Probe(recorder=recorder)),
    )
    scheduler.debug_top_n = top
    scheduler.framework.score_table_sink = recorder.score_table
    scheduler.framework.filter_sink = recorder.filters
    result = scheduler.run_session(snapshot)

    outcomes = []
    groups = {group_key} if group_key is not None else set()
    for key in sorted(members):
        info = snapshot.pods[key]
        why = result.pod_why.get(key)
        if info.pod_group is not None:
            groups.add(info.pod_group)
        outcomes.append(
            Member(
                key=key,
                group=info.pod_group,
                bound_to=bound.get(key),
                phase=phases.get(key, "Pending"),
                placed_on=recorder.placed.get(key),
                nominated_to=recorder.nominated.get(key),
                reason=why.message if why is not None else None,
                follows_group=why is not None and why.details.get("group") == info.pod_group,
            )
        )
    return DryRun(
        scheduler_name=scheduler_name,
        nodes=len(snapshot.nodes),
        members=tuple(outcomes),
        attempts=tuple(recorder.attempts),
        group_reasons={
            g: result.group_why[g].message for g in sorted(groups) if g in result.group_why
        },
        errors=result.errors,
        skipped=tuple(skipped),
    )
