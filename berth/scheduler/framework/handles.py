"""``ExtendedHandle``: what a plugin may reach besides its arguments (Koordinator frameworkext).

Every plugin factory receives the scheduler's one handle (see
:func:`berth.scheduler.framework.registries.plugin_factory_proxy`). Through it a plugin reads the
open session's snapshot, the session's time and the decision recorder, asks the framework where
a pod would go (:meth:`ExtendedHandle.find_node`: the filter and score plugins run on a node
table the plugin gives, as kube-scheduler's ``Handle.RunFilterPluginsWithNominatedPods`` serves
preemption), and the proxy registers its controllers and routes in the handle's registries.
Plugins must not keep the session or the snapshot beyond the session (the handle hands out the
current one).

The session attaches itself with :meth:`ExtendedHandle.attach` and detaches on close; outside a
session, :meth:`ExtendedHandle.snapshot` raises ``errors.NoSessionError``.
"""

from __future__ import annotations

import collections.abc
import typing

from berth.scheduler.framework import decisions, errors, interfaces
from berth.util import clocks

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import hooks, runtime
    from berth.scheduler.framework import placements as placements_
    from berth.scheduler.snapshot import nodetable, pods, snapshots

__all__ = ["ControllerRegistry", "ExtendedHandle", "NodeFinder", "ServiceRegistry"]


class NodeFinder(typing.Protocol):
    """What finds a node for a pod: the framework's filter and score plugins, in order."""

    def find_node(
        self,
        pod: pods.PodInfo,
        *,
        nodes: nodetable.NodeTable,
        node_scores: hooks.NodeScores | None = None,
        explain: bool = True,
    ) -> runtime.Attempt: ...


class ControllerRegistry:
    """Controllers by plugin, for the operator to start when it leads.

    A plugin's controllers are registered once: registering the same plugin again is ignored
    (first wins), as Koordinator's ``ControllersMap`` starts each plugin's controllers once.
    """

    def __init__(self) -> None:
        self._by_plugin: dict[str, tuple[interfaces.Controller, ...]] = {}

    def register(
        self, plugin: str, *, controllers: collections.abc.Sequence[interfaces.Controller]
    ) -> None:
        """Remember ``plugin``'s controllers unless it registered already."""
        self._by_plugin.setdefault(plugin, tuple(controllers))

    def controllers(self) -> list[tuple[str, interfaces.Controller]]:
        """``(plugin, controller)`` pairs, by plugin name, then in the plugin's order."""
        return [(p, c) for p in sorted(self._by_plugin) for c in self._by_plugin[p]]

    def __len__(self) -> int:
        return sum(len(cs) for cs in self._by_plugin.values())


class ServiceRegistry:
    """HTTP routes by plugin, mounted by the operator under ``/berth/v1/plugins/<Plugin>/``.

    Registering the same plugin twice is ignored (first wins); two routes of one plugin with
    the same method and path are an error.
    """

    def __init__(self) -> None:
        self._by_plugin: dict[str, tuple[interfaces.Route, ...]] = {}

    def register(self, plugin: str, *, routes: collections.abc.Sequence[interfaces.Route]) -> None:
        """Remember ``plugin``'s routes unless it registered already."""
        if plugin in self._by_plugin:
            return
        seen: set[tuple[str, str]] = set()
        for route in routes:
            key = (route.method.upper(), route.path.strip("/"))
            if key in seen:
                raise errors.RegistryError(
                    f"plugin {plugin} declares the route {key[0]} {key[1]} twice"
                )
            seen.add(key)
        self._by_plugin[plugin] = tuple(routes)

    def routes(self) -> list[tuple[str, interfaces.Route]]:
        """``(plugin, route)`` pairs, by plugin name, then in the plugin's order."""
        return [(p, r) for p in sorted(self._by_plugin) for r in self._by_plugin[p]]

    @staticmethod
    def full_path(plugin: str, route: interfaces.Route) -> str:
        """Where the operator serves ``route``: ``/berth/v1/plugins/<plugin>/<path>``."""
        return f"/berth/v1/plugins/{plugin}/{route.path.strip('/')}"


class ExtendedHandle:
    """The scheduler's services for plugins; one per scheduler, shared by all its plugins."""

    def __init__(
        self,
        *,
        clock: clocks.Clock,
        services: ServiceRegistry | None = None,
        controllers: ControllerRegistry | None = None,
    ) -> None:
        self._clock = clock
        self.services = services if services is not None else ServiceRegistry()
        """Routes of the plugins built with this handle."""
        self.controllers = controllers if controllers is not None else ControllerRegistry()
        """Controllers of the plugins built with this handle."""
        self._snapshot: snapshots.Snapshot | None = None
        self._recorder: decisions.DecisionRecorder | None = None
        self._placements: placements_.Placements | None = None
        self._finder: NodeFinder | None = None

    # For the session only -----------------------------------------------------------------
    def attach(
        self,
        snapshot: snapshots.Snapshot,
        *,
        recorder: decisions.DecisionRecorder,
        placements: placements_.Placements | None = None,
        finder: NodeFinder | None = None,
    ) -> None:
        """Make ``snapshot``, ``recorder``, ``placements`` and the framework that finds nodes
        (``finder``) the current ones (called by ``open_session``)."""
        self._snapshot = snapshot
        self._recorder = recorder
        self._placements = placements
        self._finder = finder

    def detach(self) -> None:
        """Forget the session's snapshot, recorder, placements and finder (called by
        ``close_session``)."""
        self._snapshot = None
        self._recorder = None
        self._placements = None
        self._finder = None

    # For plugins ------------------------------------------------------------------------
    def snapshot(self) -> snapshots.Snapshot:
        """The open session's snapshot (the snapshot lister); raises outside a session."""
        if self._snapshot is None:
            raise errors.NoSessionError("no session is open: there is no snapshot to read")
        return self._snapshot

    def now(self) -> float:
        """The session's time (when its snapshot was taken), else the clock's time."""
        return self._snapshot.now if self._snapshot is not None else self._clock.now()

    def recorder(self) -> decisions.DecisionRecorder:
        """The open session's decision recorder (the event recorder for decisions)."""
        if self._recorder is None:
            raise errors.NoSessionError("no session is open: there is no recorder")
        return self._recorder

    def placements(self) -> placements_.Placements:
        """The open session's pods on nodes, statements included; raises outside a session."""
        if self._placements is None:
            raise errors.NoSessionError("no session is open: there are no placements")
        return self._placements

    def find_node(
        self,
        pod: pods.PodInfo,
        *,
        nodes: nodetable.NodeTable,
        node_scores: hooks.NodeScores | None = None,
        explain: bool = True,
    ) -> runtime.Attempt:
        """Where the open session's framework would place ``pod`` on ``nodes`` (a table the
        plugin may have changed, e.g. with nodes emptied for a trial), scored by
        ``node_scores`` when given; nothing is reserved or bound. ``explain=False``: a terse
        reason when no node fits. Raises outside a session."""
        if self._finder is None:
            raise errors.NoSessionError("no session is open: there is no framework to ask")
        return self._finder.find_node(pod, nodes=nodes, node_scores=node_scores, explain=explain)

    @property
    def in_session(self) -> bool:
        """True while a session is open."""
        return self._snapshot is not None
