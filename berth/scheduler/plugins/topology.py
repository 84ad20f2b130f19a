"""Topology: a gang (or one role of it) shares one topology domain, required or preferred.

A cluster declares its topology levels in this plugin's args, broadest first, each a node
label whose values are the domains (Kueue's Topology and KAI's, without a CRD)::

    - name: Topology
      args:
        levels:
          - {name: zone, nodeLabel: topology.kubernetes.io/zone}
          - {name: block, nodeLabel: topology.berth.io/block}
          - {name: rack, nodeLabel: topology.berth.io/rack}
          - {name: host, nodeLabel: kubernetes.io/hostname}

(those four are the default). A PodGroup's ``spec.topology`` (``required: rack`` or
``preferred: rack``) and each ``spec.subGroups[i].topology`` name a level.

- **Where the gang goes** (``job_scopes``): the domains of the level whose free capacity (on
  schedulable nodes) covers what the gang still needs for quorum — in total, and per pod shape
  counting how many pods fit node by node — tightest fit first (the least capacity left over,
  relative to the cluster's, so big domains stay whole for big gangs). The allocate action
  tries the gang in each (:data:`~berth.scheduler.framework.scopes.MAX_TRIES` at most), all or
  nothing; required: the gang waits when none works, naming the level; preferred: it is then
  tried anywhere.
- **Members follow members** (a predicate): once a member of a gang (or of a role) with a
  required level is placed (earlier, or in this session), the others may go only into that
  member's domain — which also holds for actions that do not ask for a plan (backfill,
  reclaim, preempt). A role's domain is chosen by its first placed pod (inside the gang's).
- **Members keep together where they can** (a node score): with a preferred level, the nodes
  of the domain holding most of the gang's (or the role's) placed members score
  :data:`TOGETHER_SCORE` (other domains holding some, in proportion), so when no one domain
  could take them all, or later members come after the domain was chosen, a role's pods still
  share as few domains as room allows (inside the gang's) rather than following the resource
  scores across the cluster. It outweighs every default score (all the others add at most
  7800, a reservation's 4000 and GPU placement's 3100 included):
  preferring a domain means keeping to it while it has room.
- **Bad input** (``job_valid``, never tried): an unknown level, a level no node has the label
  of, a required domain larger than any that exists (the gang's quorum asks for more of a
  resource than the largest domain holds in all): the reason names the field.

Nothing is registered when no pending group asks for topology, so other work pays nothing.
"""

from __future__ import annotations

import collections.abc
import dataclasses

import numpy as np
import pydantic

from berth.api import quantities, resources
from berth.scheduler.framework import (
    filtering,
    handles,
    interfaces,
    jobs,
    reasons,
    registries,
    scopes,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import ids, nodetable, podgroups, pods, topology

__all__ = [
    "DEFAULT_LEVELS",
    "NAME",
    "TOGETHER_SCORE",
    "Level",
    "Topology",
    "TopologyArgs",
    "new",
]

NAME = names.TOPOLOGY

TOGETHER_SCORE = 100 * interfaces.MAX_NODE_SCORE
"""The score of a node in the domain a preferred level's members keep to (module docstring)."""


class Level(registries.ArgsModel):
    """One topology level: its name in PodGroups, and the node label holding its domains."""

    name: str = pydantic.Field(min_length=1)
    node_label: str = pydantic.Field(min_length=1)


DEFAULT_LEVELS = (
    Level(name="zone", node_label="topology.kubernetes.io/zone"),
    Level(name="block", node_label="topology.berth.io/block"),
    Level(name="rack", node_label="topology.berth.io/rack"),
    Level(name="host", node_label="kubernetes.io/hostname"),
)


class TopologyArgs(registries.ArgsModel):
    """Arguments of Topology."""

    levels: tuple[Level, ...] = pydantic.Field(default=DEFAULT_LEVELS, min_length=1)
    """The cluster's levels, broadest first."""

    @pydantic.model_validator(mode="after")
    def _unique(self) -> TopologyArgs:
        seen: set[str] = set()
        for level in self.levels:
            if level.name in seen:
                raise ValueError(f"level {level.name} is listed twice")
            seen.add(level.name)
        return self


# Reasons (one small function each) ----------------------------------------------------------


def unknown_level(field: str, level: str, known: collections.abc.Iterable[str]) -> reasons.Reason:
    """A PodGroup names a level the profile does not declare."""
    return reasons.new(
        reasons.ReasonCode.TOPOLOGY_LEVEL_UNKNOWN,
        f"{field}: unknown topology level {level!r} (levels: {', '.join(known)})",
        plugin=NAME,
        field=field,
        level=level,
    )


def unlabelled_level(field: str, level: Level) -> reasons.Reason:
    """No node carries the level's label."""
    return reasons.new(
        reasons.ReasonCode.TOPOLOGY_LEVEL_UNKNOWN,
        f"{field}: no node has the label {level.node_label} of topology level {level.name}",
        plugin=NAME,
        field=field,
        level=level.name,
    )


def too_large(field: str, level: str, *, resource: str, need: int, largest: int) -> reasons.Reason:
    """What must share one domain asks for more than the largest domain holds."""
    fmt = resources.format_for(resource)
    return reasons.new(
        reasons.ReasonCode.TOPOLOGY_DOMAIN_TOO_SMALL,
        f"{field}: needs {quantities.format_milli(need, fmt)} {resource} in one {level}, "
        f"the largest {level} has {quantities.format_milli(largest, fmt)}",
        plugin=NAME,
        field=field,
        level=level,
        resource=resource,
    )


def no_room(field: str, level: str, *, who: str, domains: int) -> reasons.Reason:
    """No domain of the level has room for the gang (or ``who``: one of its roles) now."""
    return reasons.new(
        reasons.ReasonCode.TOPOLOGY_UNSATISFIABLE,
        f"no {level} has room for {who} now ({field}; {domains} {level}s)",
        plugin=NAME,
        field=field,
        level=level,
    )


def none_worked(field: str, level: str, *, who: str, tried: int) -> reasons.Reason:
    """The gang (or one of its roles) was tried in the best domains and fit in none."""
    return reasons.new(
        reasons.ReasonCode.TOPOLOGY_UNSATISFIABLE,
        f"{who} fits in no single {level} ({field}; tried the {tried} best)",
        plugin=NAME,
        field=field,
        level=level,
    )


def no_domain() -> reasons.Reason:
    """A required topology found no domain with room (none of the roles' own reasons)."""
    return reasons.new(
        reasons.ReasonCode.TOPOLOGY_UNSATISFIABLE,
        "no topology domain has room for the gang now",
        plugin=NAME,
    )


def outside(level: str, value: str, field: str) -> str:
    """Rows outside the domain a gang (or role) was placed in."""
    return f"node(s) outside {level} {value} ({field})"


# The plugin -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Ask:
    """One topology request of a job: the whole gang's, or one role's."""

    request: podgroups.TopologyRequest
    level: Level
    role: podgroups.SubGroupInfo | None  # None: the whole gang

    def covers(self, pod: pods.PodInfo) -> bool:
        return self.role is None or self.role.matches(pod)

    @property
    def who(self) -> str:
        """What the ask is about, for reasons: the gang, or one role of it."""
        return "the gang" if self.role is None else f"sub-group {self.role.name}"


class Topology(interfaces.SessionPlugin):
    """Session plugin (job valid, job scopes, a node predicate)."""

    name = NAME

    def __init__(self, args: TopologyArgs) -> None:
        self._levels = {level.name: level for level in args.levels}

    def on_session_open(self, session: sessions.Session) -> None:
        asks: dict[ids.PodGroupKey, list[_Ask]] = {}
        problems: dict[ids.PodGroupKey, reasons.Reason] = {}
        for key, job in session.jobs.items():
            found, problem = self._asks(job.group)
            if problem is not None:
                problems[key] = problem
            elif found:
                asks[key] = found
        if not asks and not problems:
            return
        nodes = session.nodes
        for group_key, group_asks in list(asks.items()):
            problem = _too_large(session, session.jobs[group_key], group_asks, nodes=nodes)
            if problem is not None:
                problems[group_key] = problem
                del asks[group_key]

        def valid(job: jobs.Job) -> statuses.Status:
            problem = problems.get(job.key)
            if problem is None:
                return statuses.SUCCESS
            return statuses.rejecting(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, problem)

        def plan(job: jobs.Job) -> scopes.ScopePlan | None:
            found = asks.get(job.key)
            return _plan(session, job, found) if found else None

        def follow(pod: pods.PodInfo, table: nodetable.NodeTable) -> filtering.NodeFilter:
            job = session.job_of(pod)
            found = asks.get(job.key) if job is not None else None
            if not found or job is None:
                return filtering.passing(len(table))
            passed: filtering.BoolArray | None = None
            why: list[tuple[str, filtering.BoolArray]] = []
            for ask in found:
                if not ask.request.required or not ask.covers(pod):
                    continue
                domains = topology.domains(table, ask.level.node_label)
                anchors = _anchors(session, job, ask, table=table, domains=domains)
                if not anchors:
                    continue
                inside = domains.has & np.isin(domains.ids, sorted(anchors))
                passed = inside if passed is None else passed & inside
                value = domains.values[min(anchors)]
                why.append((outside(ask.level.name, value, ask.request.field), ~inside))
            if passed is None:
                return filtering.passing(len(table))
            explained = dict(why)
            return filtering.NodeFilter(
                passed=passed,
                explain=lambda: explained,
                reason_code=reasons.ReasonCode.TOPOLOGY_UNSATISFIABLE,
            )

        preferring = {
            key: kept
            for key, found in asks.items()
            if (kept := [a for a in found if not a.request.required])
        }

        def together(
            pod: pods.PodInfo, table: nodetable.NodeTable, feasible: filtering.BoolArray
        ) -> nodetable.IntArray:
            scores = np.zeros(len(table), dtype=np.int64)
            job = session.job_of(pod)
            found = preferring.get(job.key) if job is not None else None
            if not found or job is None:
                return scores
            for ask in found:
                if ask.covers(pod):
                    scores += _together(session, job, ask, table=table)
            return scores

        session.hooks.job_valid.add(valid, plugin=NAME)
        session.hooks.job_scopes.add(plan, plugin=NAME)
        if asks:
            session.hooks.predicates.add(follow, plugin=NAME)
        if preferring:
            session.hooks.node_order.add(together, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        return None

    def _asks(self, group: podgroups.PodGroupInfo) -> tuple[list[_Ask], reasons.Reason | None]:
        """The group's topology requests, or the first naming an unknown level."""
        wanted: list[tuple[podgroups.TopologyRequest, podgroups.SubGroupInfo | None]] = []
        if group.topology is not None:
            wanted.append((group.topology, None))
        wanted += [(g.topology, g) for g in group.sub_groups if g.topology is not None]
        out: list[_Ask] = []
        for request, role in wanted:
            level = self._levels.get(request.level)
            if level is None:
                return [], unknown_level(request.field, request.level, self._levels)
            out.append(_Ask(request=request, level=level, role=role))
        return out, None


def _anchors(
    session: sessions.Session,
    job: jobs.Job,
    ask: _Ask,
    *,
    table: nodetable.NodeTable,
    domains: topology.Domains,
) -> set[int]:
    """The domains the ask's placed pods are in (already running, or placed this session)."""
    rows = _member_rows(session, job, ask, table=table)
    return {int(domains.ids[row]) for row in rows if domains.has[row]}


def _member_rows(
    session: sessions.Session, job: jobs.Job, ask: _Ask, *, table: nodetable.NodeTable
) -> list[int]:
    """The rows of the ask's placed pods (already running, or placed this session), one per
    pod."""
    rows: list[int] = []
    for member in session.snapshot.members(job.key):
        if (
            member.node_name is None
            or member.terminal
            or member.key in job.evicted
            or not ask.covers(member)
        ):
            continue
        row = table.index.get(member.node_name)
        if row is not None:
            rows.append(row)
    for key, node in job.allocated.items():
        placed = session.snapshot.pods.get(key)
        row = table.index.get(node)
        if placed is not None and row is not None and ask.covers(placed):
            rows.append(row)
    return rows


def _together(
    session: sessions.Session, job: jobs.Job, ask: _Ask, *, table: nodetable.NodeTable
) -> nodetable.IntArray:
    """Per row, how much keeping ``ask``'s next pod with its placed members is worth: the
    domain holding most of them :data:`TOGETHER_SCORE`, others in proportion, rows outside
    every such domain nothing."""
    domains = topology.domains(table, ask.level.node_label)
    counts = np.zeros(domains.count, dtype=np.int64)
    for row in _member_rows(session, job, ask, table=table):
        if domains.has[row]:
            counts[domains.ids[row]] += 1
    scores = np.zeros(len(table), dtype=np.int64)
    most = int(counts.max(initial=0))
    if not most:
        return scores
    worth = counts * TOGETHER_SCORE // most
    scores[domains.has] = worth[domains.ids[domains.has]]
    return scores


def _pending(session: sessions.Session, job: jobs.Job, ask: _Ask) -> list[pods.PodInfo]:
    """The ask's pods still to place for quorum, in task order."""
    tasks = [p for p in session.ordered_tasks(job) if p.key not in job.allocated and ask.covers(p)]
    if ask.role is None:
        missing = job.group.min_member - job.occupied()
    else:
        placed = sum(
            1
            for m in session.snapshot.members(job.key)
            if m.node_name is not None and not m.terminal and ask.covers(m)
        )
        missing = ask.role.min_member - placed
    return tasks[: max(missing, 0)]


def _need(
    session: sessions.Session, tasks: collections.abc.Sequence[pods.PodInfo]
) -> nodetable.IntArray:
    total = np.zeros(len(session.nodes.resources), dtype=np.int64)
    for pod in tasks:
        total += session.vector(pod)
    return total


def _too_large(
    session: sessions.Session, job: jobs.Job, asks: list[_Ask], *, nodes: nodetable.NodeTable
) -> reasons.Reason | None:
    """Why a required ask can never be met as the cluster stands (its field named)."""
    usable = ~nodes.unschedulable
    for ask in asks:
        if not ask.request.required:
            continue
        domains = topology.domains(nodes, ask.level.node_label)
        if not domains.count:
            return unlabelled_level(ask.request.field, ask.level)
        need = _need(session, _pending(session, job, ask))
        for col in np.flatnonzero(need):
            if nodes.resources[col] == resources.PODS:
                continue
            largest = int(domains.totals(nodes.allocatable[:, col], rows=usable).max())
            if largest < need[col]:
                return too_large(
                    ask.request.field,
                    ask.level.name,
                    resource=nodes.resources[col],
                    need=int(need[col]),
                    largest=largest,
                )
    return None


def _plan(session: sessions.Session, job: jobs.Job, asks: list[_Ask]) -> scopes.ScopePlan | None:
    """Where to try the job: the gang's domains at its level, tightest fit first, and inside
    each, every role's (module docstring); None when nothing is left to choose."""
    nodes = session.nodes
    gang = next((a for a in asks if a.role is None), None)
    roles = [a for a in asks if a.role is not None and not _anchored(session, job, a)]
    gang_parts: list[scopes.Part | None] = [None]
    required = any(a.request.required for a in [*roles, *([gang] if gang else [])])
    reason: reasons.Reason | None = None
    if gang is not None:
        domains = topology.domains(nodes, gang.level.node_label)
        field, level = gang.request.field, gang.level.name
        anchors = _anchors(session, job, gang, table=nodes, domains=domains)
        if anchors and gang.request.required:
            ranked: list[int] = []  # members follow members (the predicate)
            gang = None
        elif anchors:
            ranked = sorted(anchors)
        else:
            ranked = _ranked(session, domains, _pending(session, job, gang), within=None)
            if not ranked:
                if gang.request.required:
                    return _waiting(no_room(field, level, who=gang.who, domains=domains.count))
                gang = None  # preferred: anywhere
        if gang is not None:
            gang_parts = [
                scopes.Part(
                    applies=_everyone,
                    rows=domains.has & (domains.ids == d),
                    outside=outside(level, domains.values[d], field),
                    outside_code=reasons.ReasonCode.TOPOLOGY_UNSATISFIABLE,
                )
                for d in ranked[: scopes.MAX_TRIES]
            ]
    if gang is None and not roles:
        return None
    tries: list[scopes.Scope] = []
    for gang_part in gang_parts:
        within = gang_part.rows if gang_part is not None else None
        choices: list[tuple[_Ask, list[scopes.Part]]] = []
        for ask in roles:
            parts = _role_parts(session, job, ask, within=within)
            if not parts and ask.request.required:
                reason = reason or no_room(
                    ask.request.field, ask.level.name, who=ask.who, domains=_count(nodes, ask)
                )
                choices = []
                break
            choices.append((ask, parts))
        else:
            base = [gang_part] if gang_part is not None else []
            # The k-th try gives every role its k-th best domain (or its last one).
            depth = max((len(parts) for _, parts in choices), default=1)
            for k in range(max(depth, 1)):
                picked = [parts[min(k, len(parts) - 1)] for _, parts in choices if parts]
                tries.append(scopes.Scope(parts=(*base, *picked)))
                if len(tries) >= scopes.MAX_TRIES or gang_part is not None:
                    break
        if len(tries) >= scopes.MAX_TRIES:
            break
    if not tries:
        if required:
            return _waiting(reason or no_domain())
        return None
    candidates = [a for a in (gang, *roles) if a is not None]
    named = next((a for a in candidates if a.request.required), candidates[0])
    return scopes.ScopePlan(
        scopes=tuple(tries),
        required=required,
        reason=none_worked(named.request.field, named.level.name, who=named.who, tried=len(tries)),
    )


def _everyone(pod: pods.PodInfo) -> bool:
    return True


def _waiting(reason: reasons.Reason) -> scopes.ScopePlan:
    return scopes.ScopePlan(scopes=(), required=True, reason=reason)


def _count(nodes: nodetable.NodeTable, ask: _Ask) -> int:
    return topology.domains(nodes, ask.level.node_label).count


def _anchored(session: sessions.Session, job: jobs.Job, ask: _Ask) -> bool:
    domains = topology.domains(session.nodes, ask.level.node_label)
    return bool(_anchors(session, job, ask, table=session.nodes, domains=domains))


def _role_parts(
    session: sessions.Session, job: jobs.Job, ask: _Ask, *, within: filtering.BoolArray | None
) -> list[scopes.Part]:
    """The role's domains (inside ``within``) that could hold its pods, best first."""
    domains = topology.domains(session.nodes, ask.level.node_label)
    tasks = _pending(session, job, ask)
    if not tasks:
        return []
    ranked = _ranked(session, domains, tasks, within=within)
    role = ask.role
    assert role is not None
    rows_within = domains.has if within is None else domains.has & within
    return [
        scopes.Part(
            applies=role.matches,
            rows=rows_within & (domains.ids == d),
            outside=outside(ask.level.name, domains.values[d], ask.request.field),
            outside_code=reasons.ReasonCode.TOPOLOGY_UNSATISFIABLE,
        )
        for d in ranked[: scopes.MAX_TRIES]
    ]


def _ranked(
    session: sessions.Session,
    domains: topology.Domains,
    tasks: collections.abc.Sequence[pods.PodInfo],
    *,
    within: filtering.BoolArray | None,
) -> list[int]:
    """Domains whose free capacity (inside ``within``) could hold ``tasks``, tightest fit
    first (ties by value)."""
    nodes = session.nodes
    if not domains.count:
        return []
    usable = ~nodes.unschedulable
    if within is not None:
        usable = usable & within
    free = np.clip(nodes.free(), 0, None)
    need = _need(session, tasks)
    cols = [int(c) for c in np.flatnonzero(need)]
    fits = np.ones(domains.count, dtype=np.bool_)
    left = np.zeros(domains.count, dtype=np.float64)
    capacity = nodes.allocatable[~nodes.unschedulable].sum(axis=0)
    for col in cols:
        room = domains.totals(free[:, col], rows=usable)
        fits &= room >= need[col]
        left += (room - need[col]) / max(int(capacity[col]), 1)
    shapes: dict[bytes, tuple[nodetable.IntArray, int]] = {}
    for pod in tasks:
        vec = session.vector(pod)
        key = vec.tobytes()
        shapes[key] = (vec, shapes[key][1] + 1 if key in shapes else 1)
    for vec, count in shapes.values():
        used = [int(c) for c in np.flatnonzero(vec)]
        if not used:
            continue
        per_row = np.min(np.stack([free[:, c] // vec[c] for c in used]), axis=0)
        fits &= domains.totals(per_row, rows=usable) >= count
    order = sorted((float(left[d]), domains.values[d], d) for d in np.flatnonzero(fits).tolist())
    return [d for _, _, d in order]


def new(args: TopologyArgs, handle: handles.ExtendedHandle) -> Topology:
    """Build the plugin."""
    return Topology(args)
