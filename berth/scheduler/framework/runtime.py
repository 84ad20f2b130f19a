"""The framework runner: a profile's plugins, built once, and the runners of every extension point.

:class:`Framework` builds the enabled plugins through their (proxied) factories, sorts them by
extension point once, and runs the points for sessions and statements:

- :meth:`Framework.find_node` is one pod's scheduling attempt: PreFilterHook → PreFilter →
  FilterHook → Filter (every plugin's mask ANDed; a StaticFilterPlugin's NodeFilter cached per
  pod signature for the session) → the session's predicates → PostFilter when nothing fits →
  PreScore → ScoreHook → Score (normalised, weighted, summed with the session's node-order
  functions) → the highest total, ties to the lowest row.
- Reserve/Unreserve, Permit, PreBind, Bind, PostBind, run by statements.
- PreEnqueue and QueueSort, run by actions; ``on_session_open``/``on_session_close``.

An exception escaping a plugin is a bug: it becomes an ``ERROR`` status carrying the plugin's
name, the first one per plugin per session is logged (with its traceback), and the cycle goes
on. A PreScore or Score error fails that pod's attempt (it is not placed on a partly scored
table). A profile without exactly one QueueSort plugin and at least one Bind plugin is refused
when the Framework is built (``ProfileError``). One session at a time uses a Framework
(:meth:`begin_session`/:meth:`end_session`).

Setting ``debug_top_n`` to N > 0 at run time (the operator's ``POST /debug/flags/s``) makes
every scored attempt emit a markdown table of its top N nodes, one column per score plugin
(weighted) plus the total, through ``score_table_sink`` (the ``berth.scheduler.scores`` log
by default).
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import functools
import logging
import time
import typing

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    decisions,
    errors,
    filtering,
    handles,
    hooks,
    interfaces,
    profiles,
    reasons,
    registries,
    statuses,
)

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import placements, sessions
    from berth.scheduler.snapshot import nodetable, podconstraints, pods, snapshots

__all__ = ["Attempt", "Framework", "format_score_table"]

logger = logging.getLogger(__name__)
score_logger = logging.getLogger("berth.scheduler.scores")

_LOWEST = np.iinfo(np.int64).min
REPORT_WINDOW = 300.0
"""Seconds between two log lines of the same plugin error (the cycle's result lists it every
time; the log once per window)."""
_LOGGED_LIMIT = 1024  # distinct error lines remembered before old ones are dropped
_perf = time.perf_counter
TIMING_SAMPLE = 10
"""Scheduling attempts per one whose plugins are timed (the first of each session is): a
session's per-plugin seconds in attempts are the timed ones' scaled up. kube-scheduler samples
its plugin metrics alike (10 %): timing every plugin call cost a tenth of an attempt."""
_NO_NODE_FITS = statuses.new(statuses.Code.UNSCHEDULABLE, "no node fits")
"""What an attempt that need not explain says when no node fits."""


class Attempt:
    """The outcome of one pod's attempt: a row (with the cycle state to reserve with), or not.

    ``status`` is ``SUCCESS`` with a row; otherwise it says why no row fits, as the pod's
    "why pending" text (``status.message()``).
    """

    __slots__ = ("pod", "row", "state", "status")

    def __init__(
        self,
        pod: pods.PodInfo,
        *,
        row: int | None,
        state: cyclestate.CycleState,
        status: statuses.Status = statuses.SUCCESS,
    ) -> None:
        self.pod = pod
        self.row = row
        self.state = state
        self.status = status

    def __repr__(self) -> str:
        return f"Attempt({self.pod.key!r}, row={self.row}, status={self.status.code.name})"


def _check_shape(built: collections.abc.Sequence[interfaces.Plugin], *, source: str) -> None:
    """Refuse a profile that cannot order or bind pods: exactly one QueueSort plugin (two
    would disagree on the order) and at least one Bind plugin."""
    problems: list[str] = []
    sorters = [p.name for p in built if isinstance(p, interfaces.QueueSortPlugin)]
    if len(sorters) != 1:
        found = ", ".join(sorters) if sorters else "none"
        problems.append(f"exactly one QueueSort plugin must be enabled (found: {found})")
    if not any(isinstance(p, interfaces.BindPlugin) for p in built):
        problems.append("at least one Bind plugin must be enabled (found: none)")
    if problems:
        raise errors.ProfileError(f"profile {source!r} is not usable:\n  " + "\n  ".join(problems))


def format_score_table(
    pod: pods.PodInfo,
    *,
    names: collections.abc.Sequence[str],
    columns: collections.abc.Sequence[tuple[str, np.ndarray[typing.Any, np.dtype[np.int64]]]],
    total: np.ndarray[typing.Any, np.dtype[np.int64]],
    feasible: filtering.BoolArray,
    top: int,
) -> str:
    """The debug score table: the ``top`` feasible rows by total (ties to the lower row).

    One column per score source (already weighted) and the total, as markdown.
    """
    rows = np.flatnonzero(feasible)
    order = rows[np.lexsort((rows, -total[rows]))][:top]
    header = ["node", *(title for title, _ in columns), "total"]
    lines = [
        f"{pod.key}: top {len(order)} of {len(rows)} feasible nodes",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---", *["---:"] * (len(header) - 1)]) + "|",
    ]
    for row in order:
        cells = [names[row], *(str(int(values[row])) for _, values in columns), str(total[row])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _log_score_table(pod: str, text: str) -> None:
    score_logger.info("%s", text)


class Framework:
    """A profile's plugins and the runners of every extension point; see the module docstring."""

    def __init__(
        self, profile: profiles.ResolvedProfile, *, handle: handles.ExtendedHandle
    ) -> None:
        self.profile = profile
        self.handle = handle
        built: list[interfaces.Plugin] = []
        weights: dict[str, int] = {}
        for configured in profile.plugins:
            factory = registries.plugin_factory_proxy(configured.factory)
            plugin = factory.build(configured.args, handle=handle)
            if plugin.name != configured.name:
                raise errors.FrameworkError(
                    f"the factory registered as {configured.name} built a plugin named"
                    f" {plugin.name}"
                )
            built.append(plugin)
            weights[plugin.name] = configured.weight
        self.plugins: tuple[interfaces.Plugin, ...] = tuple(built)
        """Every enabled plugin, in profile order."""

        _check_shape(built, source=profile.scheduler_name)
        self._pre_enqueue = [p for p in built if isinstance(p, interfaces.PreEnqueuePlugin)]
        sorters = [p for p in built if isinstance(p, interfaces.QueueSortPlugin)]
        self.queue_sort: interfaces.QueueSortPlugin = sorters[0]
        """The QueueSort plugin ordering plain pods (a profile enables exactly one)."""
        self._pre_filter_hooks = [p for p in built if isinstance(p, interfaces.PreFilterHook)]
        self._pre_filter = [p for p in built if isinstance(p, interfaces.PreFilterPlugin)]
        self._filter_hooks = [p for p in built if isinstance(p, interfaces.FilterHook)]
        self._filters = [
            (p, isinstance(p, interfaces.StaticFilterPlugin))
            for p in [p for p in built if isinstance(p, interfaces.FilterPlugin)]
        ]
        self._post_filter = [p for p in built if isinstance(p, interfaces.PostFilterPlugin)]
        self._pre_score = [p for p in built if isinstance(p, interfaces.PreScorePlugin)]
        self._score_hooks = [p for p in built if isinstance(p, interfaces.ScoreHook)]
        self._scorers = [
            (p, weights[p.name], p.score_extensions())
            for p in [p for p in built if isinstance(p, interfaces.ScorePlugin)]
        ]
        self._reserve = [p for p in built if isinstance(p, interfaces.ReservePlugin)]
        self._permit = [p for p in built if isinstance(p, interfaces.PermitPlugin)]
        self._pre_bind = [p for p in built if isinstance(p, interfaces.PreBindPlugin)]
        self._bind = [p for p in built if isinstance(p, interfaces.BindPlugin)]
        self._post_bind = [p for p in built if isinstance(p, interfaces.PostBindPlugin)]
        self._session_plugins = [p for p in built if isinstance(p, interfaces.SessionPlugin)]
        self._constraint_plugins = [p for p in built if isinstance(p, interfaces.ConstraintPlugin)]

        self.debug_top_n = 0
        """When above 0, each scored attempt emits its top-N score table (set at run time)."""
        self.score_table_sink: collections.abc.Callable[[str, str], None] = _log_score_table
        """Where score tables go, with the key of the pod scored (the
        ``berth.scheduler.scores`` log by default)."""
        self.filter_sink: (
            collections.abc.Callable[
                [pods.PodInfo, nodetable.NodeTable, tuple[tuple[str, filtering.NodeFilter], ...]],
                None,
            ]
            | None
        ) = None
        """When set, told every attempt that got past PreFilter: the pod and the nodes as
        filtered, and each ``(plugin, NodeFilter)`` in evaluation order (Filter plugins, then
        the session's predicates) — per-node verdicts for ``kubectl berth why``. None: off."""
        self._static_masks: dict[tuple[str, typing.Hashable], filtering.NodeFilter] = {}
        self._reported: set[str] = set()
        self._logged: dict[str, float] = {}  # error line -> when it was last logged
        self._errors: list[str] = []
        self._seconds: collections.defaultdict[str, float] = collections.defaultdict(float)
        # Plugin seconds in timed attempts, and the attempts of the session, timed or not.
        self._sampled: collections.defaultdict[str, float] = collections.defaultdict(float)
        self._attempts = 0
        self._placements: placements.Carried | None = None

    # Session lifecycle -----------------------------------------------------------------------
    def begin_session(self) -> None:
        """Start a session: empty caches, no errors reported yet, timings at zero."""
        self._static_masks = {}
        self._reported = set()
        self._errors = []
        self._seconds = collections.defaultdict(float)
        self._sampled = collections.defaultdict(float)
        self._attempts = 0

    def keep_placements(self, carried: placements.Carried | None, /) -> None:
        """Keep what a closed session counted of the placed pods for the next one."""
        self._placements = carried

    def passed_over(self, snapshot: snapshots.Snapshot, /) -> None:
        """No session ran over ``snapshot``: what the last one counted still serves the next
        (:meth:`placements.Carried.passed_over`)."""
        if self._placements is not None:
            self._placements = self._placements.passed_over(snapshot)

    def take_placements(self) -> placements.Carried | None:
        """What the last closed session counted (once: a second session opened without one
        closing in between counts afresh)."""
        carried, self._placements = self._placements, None
        return carried

    def end_session(self) -> tuple[tuple[str, ...], dict[str, float]]:
        """End the session: the error lines and per-plugin seconds (those of scheduling
        attempts estimated from a sample: :data:`TIMING_SAMPLE`); caches are dropped."""
        seconds = self._seconds
        if self._attempts:
            timed = -(-self._attempts // TIMING_SAMPLE)
            for name, sampled in self._sampled.items():
                seconds[name] += sampled * self._attempts / timed
        result = tuple(self._errors), dict(sorted(seconds.items()))
        self.begin_session()
        return result

    def report(self, plugin: str, exc: BaseException) -> None:
        """A plugin raised: remember one line for it this session; log each distinct error
        once per :data:`REPORT_WINDOW` (a bad object failing every cycle is one line, not one
        per cycle)."""
        if plugin in self._reported:
            return
        self._reported.add(plugin)
        line = f"plugin {plugin} raised {type(exc).__name__}: {exc}"
        self._errors.append(line)
        now = time.monotonic()
        last = self._logged.get(line)
        if last is not None and now - last < REPORT_WINDOW:
            logger.debug("%s (again)", line)
            return
        if len(self._logged) >= _LOGGED_LIMIT:
            self._logged = {k: t for k, t in self._logged.items() if now - t < REPORT_WINDOW}
        self._logged[line] = now
        logger.error("%s (logged once per %gs)", line, REPORT_WINDOW, exc_info=exc)

    def _error(self, plugin: str, exc: BaseException) -> statuses.Status:
        self.report(plugin, exc)
        return statuses.Status.from_exception(exc, plugin=plugin)

    def run_session_open(self, session: sessions.Session) -> None:
        """``on_session_open`` of every session plugin, in profile order."""
        for plugin in self._session_plugins:
            started = _perf()
            try:
                plugin.on_session_open(session)
            except Exception as exc:
                self.report(plugin.name, exc)
                # Fail closed: its checks (limits, quorum) are missing for everyone now, so
                # nothing is placed rather than everything placed unchecked.
                session.hooks.block(
                    None,
                    f"placement held: plugin {plugin.name} failed to open the session "
                    f"({type(exc).__name__}: {exc})",
                )
            self._seconds[plugin.name] += _perf() - started

    def run_session_close(self, session: sessions.Session) -> None:
        """``on_session_close`` of every session plugin, in profile order (each one runs)."""
        for plugin in self._session_plugins:
            started = _perf()
            try:
                plugin.on_session_close(session)
            except Exception as exc:
                self.report(plugin.name, exc)
            self._seconds[plugin.name] += _perf() - started

    # Queueing points -------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: pods.PodInfo) -> statuses.Status:
        """PreEnqueue: the first non-``SUCCESS`` status (with its plugin), else ``SUCCESS``."""
        for plugin in self._pre_enqueue:
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as exc:
                return self._error(plugin.name, exc)
            if not status.is_success():
                return status.with_plugin(plugin.name)
        return statuses.SUCCESS

    def sort_plain(self, items: collections.abc.Iterable[pods.PodInfo]) -> list[pods.PodInfo]:
        """Plain pods in QueueSort order (ties by creation time, then UID)."""
        sorter = self.queue_sort

        def compare(a: pods.PodInfo, b: pods.PodInfo) -> int:
            try:
                if sorter.less(a, b):
                    return -1
                if sorter.less(b, a):
                    return 1
            except Exception as exc:
                self.report(sorter.name, exc)
            ka, kb = (a.creation_timestamp, a.uid), (b.creation_timestamp, b.uid)
            return -1 if ka < kb else (1 if kb < ka else 0)

        return sorted(items, key=functools.cmp_to_key(compare))

    # The scheduling attempt ------------------------------------------------------------------
    def find_node(
        self,
        pod: pods.PodInfo,
        *,
        nodes: nodetable.NodeTable,
        predicates: hooks.NodePredicates | None = None,
        node_scores: hooks.NodeScores | None = None,
        explain: bool = True,
    ) -> Attempt:
        """One attempt to place ``pod`` on ``nodes``; see the module docstring for the steps.
        ``explain=False``: a caller that drops the reason when no node fits (a trial
        placement) gets a terse one, without counting which filter rejected each node."""
        state = cyclestate.CycleState()
        timed = self._attempts % TIMING_SAMPLE == 0
        self._attempts += 1
        seconds = self._sampled
        if pod.invalid is not None:
            status = statuses.new(
                statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                pod.invalid,
                reason_code=reasons.ReasonCode.INVALID,
            )
            return Attempt(pod, row=None, state=state, status=status)
        if pod.uses:
            refused = self.refusal(pod)
            if refused is not None:
                return Attempt(pod, row=None, state=state, status=refused)
        view_pod = pod
        for hook in self._pre_filter_hooks:
            try:
                replaced = hook.pre_filter_hook(state, view_pod)
            except Exception as exc:
                return Attempt(pod, row=None, state=state, status=self._error(hook.name, exc))
            if replaced is not None:
                view_pod = replaced
        for plugin in self._pre_filter:
            started = _perf() if timed else 0.0
            try:
                status = plugin.pre_filter(state, view_pod, nodes)
            except Exception as exc:
                status = self._error(plugin.name, exc)
            if timed:
                seconds[plugin.name] += _perf() - started
            if status.code is statuses.Code.SUCCESS:
                continue
            if status.code is statuses.Code.SKIP:
                state.skip_filter_plugins.add(plugin.name)
                continue
            return Attempt(pod, row=None, state=state, status=status.with_plugin(plugin.name))
        view = nodes
        for filter_hook in self._filter_hooks:
            try:
                replaced_view = filter_hook.filter_hook(state, view_pod, view)
            except Exception as exc:
                return Attempt(
                    pod, row=None, state=state, status=self._error(filter_hook.name, exc)
                )
            if replaced_view is not None:
                view = replaced_view

        results: list[tuple[str, filtering.NodeFilter]] = []
        mask: filtering.BoolArray | None = None
        for filter_plugin, static in self._filters:
            name = filter_plugin.name
            if name in state.skip_filter_plugins:
                continue
            started = _perf() if timed else 0.0
            node_filter: filtering.NodeFilter | None
            if static:
                cache_key = (name, view_pod.signature)
                node_filter = self._static_masks.get(cache_key)
                if node_filter is None:
                    try:
                        node_filter = filter_plugin.filter(state, view_pod, view)
                    except Exception as exc:
                        return Attempt(pod, row=None, state=state, status=self._error(name, exc))
                    self._static_masks[cache_key] = node_filter
            else:
                try:
                    node_filter = filter_plugin.filter(state, view_pod, view)
                except Exception as exc:
                    return Attempt(pod, row=None, state=state, status=self._error(name, exc))
            if timed:
                seconds[name] += _perf() - started
            results.append((name, node_filter))
            mask = node_filter.passed if mask is None else mask & node_filter.passed
        if predicates is not None and len(predicates):
            for name, node_filter in predicates.evaluate(view_pod, view):
                results.append((name, node_filter))
                mask = node_filter.passed if mask is None else mask & node_filter.passed
        if self.filter_sink is not None:
            self.filter_sink(view_pod, view, tuple(results))
        rows = len(view)
        if mask is None:
            mask = np.ones(rows, dtype=np.bool_)
        feasible_count = int(np.count_nonzero(mask))
        if feasible_count == 0:
            if not explain:
                return Attempt(pod, row=None, state=state, status=_NO_NODE_FITS)
            status = filtering.unplaceable(results, rows=rows)
            status = self._run_post_filter(state, view_pod, view, status=status)
            return Attempt(pod, row=None, state=state, status=status)
        if feasible_count == 1 and self.debug_top_n <= 0:
            return Attempt(pod, row=int(np.argmax(mask)), state=state)
        row = self._best_row(
            state,
            view_pod,
            view,
            mask=mask,
            every_row=feasible_count == rows,
            node_scores=node_scores,
            timed=timed,
        )
        if isinstance(row, statuses.Status):
            return Attempt(pod, row=None, state=state, status=row)
        return Attempt(pod, row=row, state=state)

    def static_rows(self, pod: pods.PodInfo, *, nodes: nodetable.NodeTable) -> filtering.BoolArray:
        """The rows of ``nodes`` the static Filter plugins let ``pod`` use (its signature's
        node selector, affinity, tolerations...): where it could ever run while no node
        changes. Outside a session (the parking lot, between sessions): nothing is cached."""
        mask = np.ones(len(nodes), dtype=np.bool_)
        for filter_plugin, static in self._filters:
            if not static:
                continue
            try:
                passed = filter_plugin.filter(cyclestate.CycleState(), pod, nodes).passed
            except Exception as exc:
                self.report(filter_plugin.name, exc)
                continue  # a failing filter rules nothing out here; find_node reports it
            mask &= passed
        return mask

    @property
    def understood(self) -> frozenset[podconstraints.Field]:
        """The constraint fields some enabled plugin implements now (others are refused);
        asked afresh each time, since a plugin may implement a field only while the cluster
        view carries what it needs."""
        return frozenset().union(*(p.understands for p in self._constraint_plugins))

    def refusal(self, pod: pods.PodInfo) -> statuses.Status | None:
        """Why ``pod`` may not be placed by this profile: it uses constraint fields no enabled
        plugin implements (``None`` when it may). Only for pods Berth binds itself: an
        admission-mode pod is bound by kube-scheduler, whose plugins check those fields."""
        if pod.scheduler_name != self.profile.scheduler_name:
            return None
        unknown = pod.uses - self.understood
        if not unknown:
            return None
        fields = ", ".join(sorted(unknown))
        return statuses.new(
            statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"Berth's scheduler mode does not implement {fields}: it will not place this pod"
            " while ignoring the field; run it in admission mode (no schedulerName, a queue"
            " or group label), where kube-scheduler places it",
        )

    def _run_post_filter(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        *,
        status: statuses.Status,
    ) -> statuses.Status:
        texts = list(status.reasons)
        for plugin in self._post_filter:
            try:
                extra = plugin.post_filter(state, pod, nodes, reason=status.message())
            except Exception as exc:
                extra = self._error(plugin.name, exc)
            if not extra.is_success():
                texts.extend(extra.reasons)
        if len(texts) == len(status.reasons):
            return status
        return dataclasses.replace(status, reasons=tuple(texts))

    def _best_row(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        *,
        mask: filtering.BoolArray,
        every_row: bool,
        node_scores: hooks.NodeScores | None,
        timed: bool,
    ) -> int | statuses.Status:
        """The best feasible row, or the ``ERROR`` status of a PreScore or Score plugin that
        failed (the attempt fails: the pod is not placed on a partly scored table).
        ``timed``: the plugins' seconds count in the session's sample."""
        seconds = self._sampled
        for plugin in self._pre_score:
            started = _perf() if timed else 0.0
            try:
                status = plugin.pre_score(state, pod, nodes, mask)
            except Exception as exc:
                status = self._error(plugin.name, exc)
            if timed:
                seconds[plugin.name] += _perf() - started
            if status.code is statuses.Code.ERROR:
                # A node picked without one of the profile's scores is a different placement
                # than the profile asks for: the attempt fails with the error instead.
                return status
            if not status.is_success():
                state.skip_score_plugins.add(plugin.name)  # SKIP (or a refusal): no Score
        view = nodes
        for hook in self._score_hooks:
            try:
                replaced = hook.score_hook(state, pod, view, mask)
            except Exception as exc:
                self.report(hook.name, exc)
                replaced = None
            if replaced is not None:
                view = replaced
        debug = self.debug_top_n > 0
        columns: list[tuple[str, np.ndarray[typing.Any, np.dtype[np.int64]]]] = []
        total = np.zeros(len(view), dtype=np.int64)
        for scorer, weight, extensions in self._scorers:
            name = scorer.name
            if name in state.skip_score_plugins:
                continue
            started = _perf() if timed else 0.0
            try:
                scores = scorer.score(state, pod, view, mask)
                if extensions is not None:
                    scores = extensions.normalize_score(state, pod, scores, mask)
            except Exception as exc:
                return self._error(name, exc)  # as for PreScore: no placement without it
            if weight != 1:
                scores = scores * weight
            total += scores
            if timed:
                seconds[name] += _perf() - started
            if debug:
                columns.append((name, np.asarray(scores, dtype=np.int64)))
        if node_scores is not None and len(node_scores):
            before = total.copy() if debug else total
            node_scores.add_to(total, pod=pod, nodes=view, feasible=mask)
            if debug:
                columns.append(("node order", total - before))
        # argmax returns the first maximum: ties go to the lowest row (node-name order).
        row = int(np.argmax(total if every_row else np.where(mask, total, _LOWEST)))
        if debug:
            text = format_score_table(
                pod,
                names=view.names,
                columns=columns,
                total=total,
                feasible=mask,
                top=self.debug_top_n,
            )
            self.score_table_sink(pod.key, text)
        return row

    # Reserve, Permit, binding cycle ------------------------------------------------------------
    def run_reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        """Reserve on every plugin; on the first rejection, Unreserve all and return it."""
        for plugin in self._reserve:
            try:
                status = plugin.reserve(state, pod, node)
            except Exception as exc:
                status = self._error(plugin.name, exc)
            if not status.is_success():
                self.run_unreserve(state, pod, node)
                return status.with_plugin(plugin.name)
        return statuses.SUCCESS

    def run_unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        """Unreserve on every Reserve plugin, in reverse order (each one runs)."""
        for plugin in reversed(self._reserve):
            try:
                plugin.unreserve(state, pod, node)
            except Exception as exc:
                self.report(plugin.name, exc)

    def run_permit(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        """Permit: the first rejection or error wins; else ``WAIT`` if any waits; else success."""
        waiting: statuses.Status | None = None
        for plugin in self._permit:
            try:
                status = plugin.permit(state, pod, node)
            except Exception as exc:
                status = self._error(plugin.name, exc)
            if status.is_success():
                continue
            if status.is_wait():
                waiting = waiting or status.with_plugin(plugin.name)
                continue
            return status.with_plugin(plugin.name)
        return waiting or statuses.SUCCESS

    def run_pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        """PreBind: the first non-``SUCCESS`` status stops (and is returned)."""
        for plugin in self._pre_bind:
            try:
                status = plugin.pre_bind(state, pod, node, recorder=recorder)
            except Exception as exc:
                status = self._error(plugin.name, exc)
            if not status.is_success():
                return status.with_plugin(plugin.name)
        return statuses.SUCCESS

    def run_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        """Bind: the first binder not answering ``SKIP`` decides; none at all is an error."""
        for plugin in self._bind:
            try:
                status = plugin.bind(state, pod, node, recorder=recorder)
            except Exception as exc:
                status = self._error(plugin.name, exc)
            if status.is_skip():
                continue
            return status if status.is_success() else status.with_plugin(plugin.name)
        return statuses.new(statuses.Code.ERROR, f"no bind plugin handled pod {pod.key}")

    def run_post_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> None:
        """PostBind on every plugin (each one runs)."""
        for plugin in self._post_bind:
            try:
                plugin.post_bind(state, pod, node, recorder=recorder)
            except Exception as exc:
                self.report(plugin.name, exc)
