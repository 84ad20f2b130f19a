"""The extension points: what a plugin may implement, and what the runtime promises in return.

Three plugin models meet here (docs/architecture.md, "One scheduling cycle"):

- **Kubernetes scheduling framework** points, per pod: :class:`PreEnqueuePlugin`,
  :class:`QueueSortPlugin`, :class:`PreFilterPlugin`, :class:`FilterPlugin` (and the
  :class:`StaticFilterPlugin` marker), :class:`PostFilterPlugin`, :class:`PreScorePlugin`,
  :class:`ScorePlugin` (+ :class:`ScoreExtensions`), :class:`ReservePlugin`,
  :class:`PermitPlugin`, :class:`PreBindPlugin`, :class:`BindPlugin`, :class:`PostBindPlugin`.
  Filter and Score are vectorised: they answer for every row of a ``NodeTable`` at once.
- **Session plugins** (KAI/Volcano): :class:`SessionPlugin` registers callbacks on the session.
- **Koordinator frameworkext**: phase hooks (:class:`PreFilterHook`, :class:`FilterHook`,
  :class:`ScoreHook`) and optional capabilities (:class:`ControllerProvider`,
  :class:`APIServiceProvider`).

A plugin class explicitly subclasses only the protocols it implements, so mypy checks its
signatures (the Python form of Go's ``var _ framework.FilterPlugin = &NodeName{}``). The runtime
discovers capabilities with ``isinstance`` once, when the plugins are built. Plugins are built
once per scheduler (not per cycle) and must keep no scheduling state across sessions (R8):
whatever ``on_session_open`` builds, ``on_session_close`` drops.

Who calls what: :mod:`berth.scheduler.framework.runtime` runs the per-pod points, in the
profile's plugin order; :mod:`berth.scheduler.framework.statements` runs Reserve/Unreserve and
Permit when a pod is tentatively placed, and PreBind/Bind/PostBind when a statement commits.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import typing

import numpy as np
import numpy.typing as npt

from berth.scheduler.framework import cyclestate, decisions, filtering, statuses

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import sessions
    from berth.scheduler.snapshot import nodetable, podconstraints, pods

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "APIServiceProvider",
    "Action",
    "BindPlugin",
    "ConstraintPlugin",
    "Controller",
    "ControllerProvider",
    "FilterHook",
    "FilterPlugin",
    "JSONValue",
    "Plugin",
    "PermitPlugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterHook",
    "PreFilterPlugin",
    "PreScorePlugin",
    "QueueSortPlugin",
    "ReservePlugin",
    "Route",
    "RouteRequest",
    "ScoreArray",
    "ScoreExtensions",
    "ScoreHook",
    "ScorePlugin",
    "SessionPlugin",
    "StaticFilterPlugin",
]

MAX_NODE_SCORE = 100
"""The highest score a Score plugin gives a node after normalisation."""
MIN_NODE_SCORE = 0
"""The lowest score a Score plugin gives a node after normalisation."""

ScoreArray = npt.NDArray[np.int64]
"""Scores with one entry per NodeTable row."""


@typing.runtime_checkable
class Plugin(typing.Protocol):
    """Every plugin has a name: the one it is registered and configured under."""

    name: str


# --------------------------------------------------------------------------------------------
# Per-pod extension points (Kubernetes scheduling framework), in the order they run.


@typing.runtime_checkable
class PreEnqueuePlugin(Plugin, typing.Protocol):
    def pre_enqueue(self, pod: pods.PodInfo) -> statuses.Status:
        """Whether ``pod`` may be tried at all this session.

        Called once per pending pod per session, before any ordering or filtering, by the
        action that would try the pod. ``SUCCESS``: the pod goes on. ``PENDING`` (or
        ``UNSCHEDULABLE*``): the pod is not tried this session and keeps the reasons as its
        "why pending" text. ``ERROR``: the same, and the error is logged. Must be pure.
        """
        ...


@typing.runtime_checkable
class QueueSortPlugin(Plugin, typing.Protocol):
    def less(self, a: pods.PodInfo, b: pods.PodInfo) -> bool:
        """True when ``a`` should be tried before ``b``.

        Orders the pods that bypass batch logic (no PodGroup, no queue). At most the first
        enabled QueueSort plugin is used; without one, those pods follow the session's task
        order. Ties left by ``less`` (neither is less) fall back to creation time, then UID.
        """
        ...


@typing.runtime_checkable
class PreFilterPlugin(Plugin, typing.Protocol):
    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        """Per-pod preparation before Filter: compute once what the Filter reads back.

        Called once per pod attempt, in profile order; the first non-``SUCCESS`` stops the
        attempt. ``SKIP``: this plugin's Filter is not called for this pod (the attempt goes
        on). ``UNSCHEDULABLE*``: the pod fits nowhere this attempt, with these reasons.
        ``ERROR``: likewise, logged.
        """
        ...


@typing.runtime_checkable
class FilterPlugin(Plugin, typing.Protocol):
    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        """Which rows of ``nodes`` can run ``pod``, as one boolean array over all rows.

        Called once per pod attempt unless PreFilter said ``SKIP``. The runtime ANDs every
        plugin's ``passed``; rows that fail get the filter's ``code``. Build reasons lazily
        (``explain``): they are needed only when the pod ends up unplaceable. ``nodes`` may be
        a FilterHook's modified copy. Must not modify ``nodes``.
        """
        ...


class StaticFilterPlugin(FilterPlugin):
    """Marker: this Filter's answer depends only on ``pod.signature`` and static node data.

    Static node data is what does not change within a session: names, labels, taints and the
    unschedulable flag. The runtime calls :meth:`filter` once per distinct signature per
    session and reuses the NodeFilter for every pod with that signature (and never passes
    such a filter a CycleState anyone else relies on). Subclass this explicitly; structural
    matching is not enough for a promise like this one.
    """


@typing.runtime_checkable
class PostFilterPlugin(Plugin, typing.Protocol):
    def post_filter(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        *,
        reason: str,
    ) -> statuses.Status:
        """Called once per attempt in which no row fitted ``pod``; ``reason`` says why.

        Evicting to make room is the job of the reclaim/preempt actions, not of this point:
        here a plugin may only explain. The reasons of a non-``SUCCESS`` status are appended
        to the pod's "why pending" text; ``SUCCESS`` adds nothing. Must be pure.
        """
        ...


@typing.runtime_checkable
class PreScorePlugin(Plugin, typing.Protocol):
    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        """Per-pod preparation before Score; ``feasible`` marks the rows that passed Filter.

        Called once per attempt that found at least two feasible rows. ``SKIP``: this
        plugin's Score is not called for this pod. ``ERROR``: the plugin's scores count as
        zero for this pod (logged); the attempt goes on. Other codes count as ``ERROR``.
        """
        ...


@typing.runtime_checkable
class ScoreExtensions(typing.Protocol):
    def normalize_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        scores: ScoreArray,
        feasible: filtering.BoolArray,
    ) -> ScoreArray:
        """Map the raw ``scores`` of the feasible rows into ``MIN..MAX_NODE_SCORE``.

        Called right after Score, for the same pod. Values at rows outside ``feasible`` are
        ignored (look at ``scores[feasible]`` for maxima). May modify ``scores`` in place and
        return it.
        """
        ...


@typing.runtime_checkable
class ScorePlugin(Plugin, typing.Protocol):
    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> ScoreArray:
        """An ``int64`` score for every row; only the rows in ``feasible`` matter.

        Called once per attempt with at least two feasible rows, unless PreScore said
        ``SKIP``. Computing over all rows and letting the runtime ignore the infeasible ones
        is expected (it is cheaper than gathering). After :meth:`score_extensions`'s
        normalisation the feasible scores must lie in ``MIN..MAX_NODE_SCORE``; the runtime
        multiplies them by the profile's weight, sums all plugins, and takes the highest,
        ties going to the lowest row (node-name order). An exception makes this plugin's
        scores zero for this pod (logged once). Without a normaliser the runtime only reads
        the array, so a cached read-only one may be returned as it is; a normaliser may change
        it in place, so with one, return an array of your own.
        """
        ...

    def score_extensions(self) -> ScoreExtensions | None:
        """The normaliser, or ``None`` when :meth:`score` already returns ``0..100``."""
        ...


@typing.runtime_checkable
class ReservePlugin(Plugin, typing.Protocol):
    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        """Update the plugin's session bookkeeping: ``pod`` is tentatively placed on ``node``.

        Called by ``Statement.allocate`` after the node table was updated, in profile order.
        A non-``SUCCESS`` status undoes the placement (Unreserve runs on every Reserve plugin,
        in reverse order) and the pod stays pending with the reasons.
        """
        ...

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        """Undo :meth:`reserve` for ``pod`` on ``node``.

        Called in reverse profile order when a placement is rolled back (a Reserve or Permit
        rejection, a statement rollback or discard). Must be idempotent, and may be called
        even if this plugin's :meth:`reserve` was not called for the pod. Must not raise.
        """
        ...


@typing.runtime_checkable
class PermitPlugin(Plugin, typing.Protocol):
    def permit(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> statuses.Status:
        """Whether ``pod``'s tentative placement on ``node`` may go on to binding.

        Called by ``Statement.allocate`` right after Reserve. ``SUCCESS``: allowed.
        ``WAIT``: held until its job is ready; an action commits waiting pods only together
        with their job, and undoes them when the job does not become ready in the session.
        ``UNSCHEDULABLE*``/``ERROR``: the placement is undone at once (Unreserve runs).
        """
        ...


@typing.runtime_checkable
class PreBindPlugin(Plugin, typing.Protocol):
    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        """Record the decisions that must precede binding ``pod`` (e.g. an annotation).

        Called when a statement commits, for every placed pod before any Bind of that
        statement. A non-``SUCCESS`` status discards the whole statement (its pods stay
        pending with the reasons), so a gang is never bound in part.
        """
        ...


@typing.runtime_checkable
class BindPlugin(Plugin, typing.Protocol):
    def bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        """Record the decision that binds ``pod`` to ``node`` (``decisions.BindPod``).

        Called at commit, in profile order, until one returns something other than
        ``SKIP``. ``SKIP``: not this binder's pod (the next is asked). ``SUCCESS``: bound.
        Anything else is treated like a PreBind rejection. Does no I/O: the sink does.
        """
        ...


@typing.runtime_checkable
class PostBindPlugin(Plugin, typing.Protocol):
    def post_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> None:
        """Informational: ``pod`` was bound to ``node`` in this commit. Must not raise."""
        ...


@typing.runtime_checkable
class ConstraintPlugin(Plugin, typing.Protocol):
    """A plugin implementing pod fields that constrain placement (``podconstraints.Field``).

    The runtime refuses a pod Berth binds itself (it names the profile's scheduler) when the
    pod uses a field no enabled plugin lists here: the pod waits, its reason naming the field
    and pointing to admission mode, instead of the field being silently ignored. The runtime
    reads ``understands`` at each attempt: a plugin may list a field only while the session's
    snapshot carries what it needs to implement it.
    """

    @property
    def understands(self) -> frozenset[podconstraints.Field]: ...


# --------------------------------------------------------------------------------------------
# Session plugins (KAI / Volcano).


@typing.runtime_checkable
class SessionPlugin(Plugin, typing.Protocol):
    def on_session_open(self, session: sessions.Session) -> None:
        """Register callbacks on ``session`` and compute per-session state.

        Called once per session, in profile order, before any action runs. Keep the session
        only for the session's duration (callbacks may close over it).
        """
        ...

    def on_session_close(self, session: sessions.Session) -> None:
        """Publish results (reasons, statuses) and drop everything ``on_session_open`` built.

        Called once per session after the last action, in profile order, even when an action
        failed. Must leave the plugin as it was before ``on_session_open``.
        """
        ...


# --------------------------------------------------------------------------------------------
# Phase hooks (Koordinator frameworkext): change the view before the real point runs.


@typing.runtime_checkable
class PreFilterHook(Plugin, typing.Protocol):
    def pre_filter_hook(
        self, state: cyclestate.CycleState, pod: pods.PodInfo
    ) -> pods.PodInfo | None:
        """A replacement for ``pod`` as every later point of this attempt sees it, or ``None``.

        Called first in each attempt, in profile order; each hook sees the previous hook's
        result. The replacement is used for filtering and scoring only: statements and
        decisions still name the original pod.
        """
        ...


@typing.runtime_checkable
class FilterHook(Plugin, typing.Protocol):
    def filter_hook(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> nodetable.NodeTable | None:
        """A modified copy of ``nodes`` for this pod's Filter (and Score), or ``None``.

        Called after PreFilter, in profile order. Return ``nodes.copy()`` with changes (e.g.
        a reservation handing its unused capacity back to an owner); never modify ``nodes``.
        Rows must stay the same rows.
        """
        ...


@typing.runtime_checkable
class ScoreHook(Plugin, typing.Protocol):
    def score_hook(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> nodetable.NodeTable | None:
        """A modified copy of ``nodes`` for this pod's Score, or ``None`` (same rules)."""
        ...


# --------------------------------------------------------------------------------------------
# Optional capabilities (Koordinator frameworkext): controllers and HTTP services.


@typing.runtime_checkable
class Controller(typing.Protocol):
    """A long-running loop a plugin needs while this replica leads (e.g. expiring things).

    The operator calls :meth:`run` in its own task when leadership is won and sets
    ``stop`` when it is lost or the process stops; ``run`` must then return promptly. It
    is started at most once per leadership term. Exceptions are logged by the operator.
    """

    name: str

    async def run(self, stop: asyncio.Event) -> None: ...


@typing.runtime_checkable
class ControllerProvider(Plugin, typing.Protocol):
    def new_controllers(self) -> collections.abc.Sequence[Controller]:
        """The plugin's controllers; called once, when the plugin is built."""
        ...


JSONValue: typing.TypeAlias = (
    "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
)
"""Data a route handler returns; the operator serialises it as JSON."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RouteRequest:
    """What a route handler receives: the path's ``{params}`` and the query string."""

    path_params: collections.abc.Mapping[str, str] = dataclasses.field(default_factory=dict)
    query: collections.abc.Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Route:
    """One HTTP route, served at ``/berth/v1/plugins/<Plugin>/<path>``.

    ``path`` is relative and may hold ``{name}`` parameters (``"gangs/{namespace}/{name}"``).
    ``handler`` must be quick and must not block: it reads what the plugin last published.
    A ``KeyError`` it raises becomes a 404, anything else a 500.
    """

    method: str  # "GET", "POST", ...
    path: str
    handler: collections.abc.Callable[[RouteRequest], JSONValue]


@typing.runtime_checkable
class APIServiceProvider(Plugin, typing.Protocol):
    def routes(self) -> collections.abc.Sequence[Route]:
        """The plugin's HTTP routes; called once, when the plugin is built."""
        ...


# --------------------------------------------------------------------------------------------
# Actions (KAI): what a session runs, in the profile's order.


@typing.runtime_checkable
class Action(typing.Protocol):
    """A step of every session (timelimit, allocate, backfill, reclaim, preempt)."""

    name: str

    def execute(self, session: sessions.Session) -> None:
        """Run over the open ``session``; change it only through statements (R10).

        Called once per session, in the profile's action order. Must log entering and
        leaving with the session id. An exception is a bug: the loop logs it and goes on
        with the next action.
        """
        ...
