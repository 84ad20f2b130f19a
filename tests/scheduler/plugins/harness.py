"""Running one plugin, or a whole default-profile cycle, on clusters built from API dicts.

Plugin tables call a plugin's extension points directly on a snapshot's node table and read
the answer by node name (``passing``, ``why``, ``scores``); scenario tables run full cycles on
the simulator's in-memory cluster through the real loop (``cycle``).
"""

from __future__ import annotations

import typing

import numpy as np

from berth.scheduler import loop
from berth.scheduler.framework import cyclestate, filtering, interfaces, profiles
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import nodetable, pods, snapshots
from berth.sim import cluster
from berth.util import clocks
from tests.scheduler import builders as b

Obj = dict[str, typing.Any]


def snapshot(*objs: Obj) -> snapshots.Snapshot:
    """A snapshot of a fresh cache holding ``objs``."""
    return b.cache_of(*objs).snapshot(b.EPOCH)


def info(**fields: typing.Any) -> pods.PodInfo:
    """The PodInfo of ``builders.pod("p", **fields)``."""
    return pods.pod_info(b.pod(str(fields.pop("name", "p")), **fields))


def run_filter(
    plugin: interfaces.FilterPlugin, pod: pods.PodInfo, nodes: nodetable.NodeTable
) -> filtering.NodeFilter:
    """The plugin's PreFilter (when it has one and it succeeds) then Filter."""
    state = cyclestate.CycleState()
    if isinstance(plugin, interfaces.PreFilterPlugin):
        status = plugin.pre_filter(state, pod, nodes)
        assert status.is_success(), status
    return plugin.filter(state, pod, nodes)


def passing(
    plugin: interfaces.FilterPlugin, pod: pods.PodInfo, nodes: nodetable.NodeTable
) -> list[str]:
    """Names of the nodes the filter lets ``pod`` onto."""
    node_filter = run_filter(plugin, pod, nodes)
    return [nodes.names[row] for row in np.flatnonzero(node_filter.passed)]


def why(plugin: interfaces.FilterPlugin, pod: pods.PodInfo, nodes: nodetable.NodeTable) -> str:
    """The "why pending" message had this filter been the only one."""
    node_filter = run_filter(plugin, pod, nodes)
    return filtering.unplaceable([(plugin.name, node_filter)], rows=len(nodes)).message()


def scores(
    plugin: interfaces.ScorePlugin,
    pod: pods.PodInfo,
    nodes: nodetable.NodeTable,
    *,
    feasible: list[str] | None = None,
) -> dict[str, int]:
    """Normalised scores by node name, over ``feasible`` nodes (default: all)."""
    mask = np.ones(len(nodes), dtype=np.bool_)
    if feasible is not None:
        mask = np.array([name in feasible for name in nodes.names], dtype=np.bool_)
    state = cyclestate.CycleState()
    raw = plugin.score(state, pod, nodes, mask)
    extensions = plugin.score_extensions()
    if extensions is not None:
        raw = extensions.normalize_score(state, pod, raw, mask)
    return {nodes.names[row]: int(raw[row]) for row in np.flatnonzero(mask)}


def scheduler(profile: profiles.Profile | None = None, *, clock: clocks.Clock) -> loop.Scheduler:
    """A scheduler with the in-tree registry and ``profile`` (the default one)."""
    return loop.Scheduler(
        profile or registry.default_profile(), registry=registry.in_tree_registry(), clock=clock
    )


def in_memory(*objs: Obj, clock: clocks.VirtualClock) -> cluster.InMemoryCluster:
    """An in-memory cluster holding ``objs``."""
    sim = cluster.InMemoryCluster(clock=clock)
    for obj in objs:
        sim.put(obj)
    return sim


def cycle(
    *objs: Obj, profile: profiles.Profile | None = None
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """One cycle over ``objs``: (pod -> node, pod reasons, group reasons).

    The profile defaults to :func:`profile_with` (the default plugins, ``allocate`` only):
    these tables are about placement, not about what evicting actions would add later.
    """
    clock = clocks.VirtualClock(b.EPOCH)
    sim = in_memory(*objs, clock=clock)
    result = scheduler(profile or profile_with(), clock=clock).run_once(sim, sim)
    return result.bindings(), dict(result.pod_reasons), dict(result.group_reasons)


def reason_codes(
    *objs: Obj, profile: profiles.Profile | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """One cycle over ``objs`` (as :func:`cycle`): the reason codes of the pods and of the
    groups left waiting."""
    clock = clocks.VirtualClock(b.EPOCH)
    sim = in_memory(*objs, clock=clock)
    result = scheduler(profile or profile_with(), clock=clock).run_once(sim, sim)
    return (
        {key: why.code.value for key, why in result.pod_why.items()},
        {key: why.code.value for key, why in result.group_why.items()},
    )


def profile_with(
    *extra: str,
    without: tuple[str, ...] = (),
    args: dict[str, dict[str, typing.Any]] | None = None,
    actions: tuple[str, ...] = ("allocate",),
) -> profiles.Profile:
    """The default profile's plugins (with their args) plus ``extra`` (before DefaultBinder),
    minus ``without``, with ``args`` by plugin name replacing theirs, running ``actions``."""
    base = registry.default_profile()
    names = [p.name for p in base.plugins if p.name not in without]
    binder = names.pop()
    base_args = {p.name: p.args for p in base.plugins}
    return profiles.parse(
        {
            "schedulerName": base.scheduler_name,
            "actions": list(actions),
            "plugins": [
                {"name": n, "args": (args or {}).get(n, base_args.get(n, {}))}
                for n in [*names, *extra, binder]
            ],
        }
    )
