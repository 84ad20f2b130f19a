"""Small plugins for framework tests, independent of the in-tree ones, and a Framework builder.

Each toy does one thing visibly (counts calls, records what it saw, raises on demand) so that
tests of the runtime, sessions and statements can assert exactly what the framework did.
"""

from __future__ import annotations

import collections.abc
import typing

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    decisions,
    filtering,
    handles,
    interfaces,
    profiles,
    registries,
    runtime,
    statuses,
)
from berth.scheduler.snapshot import cache, nodetable, pods, snapshots
from berth.util import clocks
from tests.scheduler import builders


class Fit(interfaces.FilterPlugin):
    """Rows whose free capacity covers the pod's requests; reasons ``Insufficient <name>``."""

    name = "Fit"

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        vec = nodes.vector(pod.requests)
        free = nodes.free()
        short = free < vec
        passed = ~short.any(axis=1)

        def explain() -> filtering.Reasons:
            return {
                f"Insufficient {name}": short[:, col]
                for col, name in enumerate(nodes.resources)
                if short[:, col].any()
            }

        return filtering.NodeFilter(passed=passed, explain=explain)


class Labelled(interfaces.StaticFilterPlugin):
    """Static: rows whose label ``key`` equals the pod's label ``key``; counts evaluations."""

    name = "Labelled"

    def __init__(self, key: str = "zone") -> None:
        self.key = key
        self.calls = 0

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        self.calls += 1
        wanted = pod.labels.get(self.key)
        if wanted is None:
            return filtering.passing(len(nodes))
        passed = np.array([labels.get(self.key) == wanted for labels in nodes.labels])
        return filtering.NodeFilter(
            passed=passed,
            code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            reason=f"node(s) not in {self.key} {wanted}",
        )


class MostFreeCpu(interfaces.ScorePlugin):
    """Scores each row by its free cpu in whole cores (normalised to 0..100 by the maximum)."""

    name = "MostFreeCpu"

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return nodes.free()[:, nodes.column["cpu"]] // 1000

    def score_extensions(self) -> interfaces.ScoreExtensions | None:
        return _MaxNormaliser()


class _MaxNormaliser(interfaces.ScoreExtensions):
    def normalize_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        scores: interfaces.ScoreArray,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        top = int(scores[feasible].max())
        return scores * interfaces.MAX_NODE_SCORE // top if top > 0 else scores * 0


class LastRow(interfaces.ScorePlugin):
    """Prefers higher rows: score = 50 per row index (raw, capped at 100)."""

    name = "LastRow"

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        rows = np.arange(len(nodes), dtype=np.int64)
        return np.minimum(rows * 50, interfaces.MAX_NODE_SCORE)

    def score_extensions(self) -> interfaces.ScoreExtensions | None:
        return None


class Flat(interfaces.ScorePlugin):
    """Every row scores the same: leaves the choice to the tie-break."""

    name = "Flat"

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return np.full(len(nodes), 50, dtype=np.int64)

    def score_extensions(self) -> interfaces.ScoreExtensions | None:
        return None


class Binder(interfaces.BindPlugin):
    """Records a BindPod for every pod (DefaultBinder's behaviour)."""

    name = "Binder"

    def bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        recorder.record(
            decisions.BindPod(namespace=pod.namespace, name=pod.name, uid=pod.uid, node=node)
        )
        return statuses.SUCCESS


class ArrivalOrder(interfaces.QueueSortPlugin):
    """Plain pods by creation time, then UID (the order ties fall back to anyway)."""

    name = "ArrivalOrder"

    def less(self, a: pods.PodInfo, b: pods.PodInfo) -> bool:
        return (a.creation_timestamp, a.uid) < (b.creation_timestamp, b.uid)


class Boom(interfaces.FilterPlugin, interfaces.ScorePlugin, interfaces.PreEnqueuePlugin):
    """Raises at the points named in ``at`` for pods whose name starts with ``prefix``."""

    name = "Boom"

    def __init__(self, *, at: collections.abc.Container[str], prefix: str = "") -> None:
        self.at = at
        self.prefix = prefix

    def _maybe_raise(self, point: str, pod: pods.PodInfo) -> None:
        if point in self.at and pod.name.startswith(self.prefix):
            raise ValueError(f"boom in {point}")

    def pre_enqueue(self, pod: pods.PodInfo) -> statuses.Status:
        self._maybe_raise("pre_enqueue", pod)
        return statuses.SUCCESS

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        self._maybe_raise("filter", pod)
        return filtering.passing(len(nodes))

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        self._maybe_raise("score", pod)
        return np.zeros(len(nodes), dtype=np.int64)

    def score_extensions(self) -> interfaces.ScoreExtensions | None:
        return None


class Journal(interfaces.ReservePlugin, interfaces.PermitPlugin, interfaces.PreBindPlugin):
    """Writes every Reserve/Unreserve/Permit/PreBind call to ``calls``; can reject or wait."""

    name = "Journal"

    def __init__(
        self,
        *,
        reject_reserve: str = "",
        permit: statuses.Code = statuses.Code.SUCCESS,
        reject_pre_bind: str = "",
    ) -> None:
        self.calls: list[str] = []
        self.reject_reserve = reject_reserve
        self.permit_code = permit
        self.reject_pre_bind = reject_pre_bind

    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        self.calls.append(f"reserve {pod.name} {node}")
        if pod.name == self.reject_reserve:
            return statuses.new(statuses.Code.UNSCHEDULABLE, "journal says no")
        return statuses.SUCCESS

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        self.calls.append(f"unreserve {pod.name} {node}")

    def permit(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> statuses.Status:
        self.calls.append(f"permit {pod.name} {node}")
        return statuses.new(self.permit_code, f"permit {self.permit_code.value}")

    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        self.calls.append(f"pre_bind {pod.name} {node}")
        if pod.name == self.reject_pre_bind:
            return statuses.new(statuses.Code.UNSCHEDULABLE, "volume not ready")
        return statuses.SUCCESS


def registry_of(*plugins: interfaces.Plugin) -> registries.Registry:
    """A registry whose factories return the given instances."""

    def factory_for(plugin: interfaces.Plugin) -> registries.AnyFactory:
        def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> interfaces.Plugin:
            return plugin

        return registries.PluginFactory(new=new)

    return registries.Registry({p.name: factory_for(p) for p in plugins})


def framework_of(
    *plugins: interfaces.Plugin,
    weights: collections.abc.Mapping[str, int] | None = None,
    handle: handles.ExtendedHandle | None = None,
) -> runtime.Framework:
    """A Framework running ``plugins`` in the given order, completed into a usable profile: an
    :class:`ArrivalOrder` QueueSort and a :class:`Binder` are added when none is given."""
    weights = weights or {}
    if not any(isinstance(p, interfaces.QueueSortPlugin) for p in plugins):
        plugins = (*plugins, ArrivalOrder())
    if not any(isinstance(p, interfaces.BindPlugin) for p in plugins):
        plugins = (*plugins, Binder())
    profile = profiles.Profile(
        plugins=tuple(
            profiles.PluginConfig(name=p.name, weight=weights.get(p.name, 1)) for p in plugins
        )
    )
    resolved = profiles.resolve(profile, registry=registry_of(*plugins), actions={"allocate"})
    return runtime.Framework(
        resolved, handle=handle or handles.ExtendedHandle(clock=clocks.VirtualClock(builders.EPOCH))
    )


def snapshot_of(*objs: typing.Any) -> snapshots.Snapshot:
    """The snapshot of a cache loaded with ``objs`` (builders' dicts)."""
    loaded: cache.ClusterCache = builders.cache_of(*objs)
    return loaded.snapshot(builders.EPOCH)


class Selector(interfaces.StaticFilterPlugin):
    """Static: rows matching the pod's nodeSelector; counts how often it really evaluates."""

    name = "Selector"

    def __init__(self) -> None:
        self.calls = 0

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        self.calls += 1
        passed = np.ones(len(nodes), dtype=np.bool_)
        for requirement in pod.node_selector:
            passed &= nodes.requirement_mask(requirement)
        return filtering.NodeFilter(
            passed=passed,
            code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            reason="node(s) didn't match Pod's node affinity/selector",
        )


def run_allocate(
    framework: runtime.Framework, snapshot: snapshots.Snapshot
) -> decisions.CycleResult:
    """One session running the allocate action over ``snapshot``."""
    from berth.scheduler.actions import allocate
    from berth.scheduler.framework import sessions

    session = sessions.open_session(snapshot, framework=framework)
    allocate.new().execute(session)
    return sessions.close_session(session)
