"""SubGroups: roles inside a gang (``launcher`` 1, ``workers`` 8), each with its own minimum.

A PodGroup's ``spec.subGroups`` lists roles, each matching the group's pods by a label
selector. The gang runs only when every role has its ``minMember`` placed, on top of the
group's own ``minMember`` (the Gang plugin's quorum); a role's topology is the Topology
plugin's.

- ``job_valid``: bad roles are reported on the PodGroup, naming the field, and the group is
  never tried: a selector matching none of the group's pods (once the group's ``minMember``
  pods exist), a pod matching two roles. Before that, a role with fewer pods than its minimum
  waits for them (``waiting for pods of sub-group workers: 3/8 created``).
- ``job_ready`` / ``job_pipelined``: every role has its minimum placed (running or done,
  minus evictions, plus what the session placed): ``waiting for sub-group workers: 3/8``.

Nothing is registered when no pending group has roles.
"""

from __future__ import annotations

import collections.abc

from berth.scheduler.framework import (
    handles,
    interfaces,
    jobs,
    reasons,
    registries,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import podgroups, pods

__all__ = ["NAME", "SubGroups", "counts", "new"]

NAME = names.SUB_GROUPS


# Reasons (one small function each) ----------------------------------------------------------


def matches_none(role: podgroups.SubGroupInfo) -> reasons.Reason:
    """A role's selector matches none of the group's pods."""
    field = f"{role.field}.selector"
    return reasons.new(
        reasons.ReasonCode.SUB_GROUP_MATCHES_NO_POD,
        f"{field}: matches none of the group's pods",
        plugin=NAME,
        field=field,
        subGroup=role.name,
    )


def overlaps(
    role: podgroups.SubGroupInfo, other: podgroups.SubGroupInfo, pod: str
) -> reasons.Reason:
    """A pod matches two roles."""
    field = f"{role.field}.selector"
    return reasons.new(
        reasons.ReasonCode.SUB_GROUPS_OVERLAP,
        f"{field}: pod {pod} also matches {other.field} ({other.name}); "
        "a pod belongs to one sub-group",
        plugin=NAME,
        field=field,
        subGroup=role.name,
        pod=pod,
    )


def too_few_created(role: podgroups.SubGroupInfo, created: int) -> reasons.Reason:
    """A role has fewer pods than its minimum."""
    return reasons.new(
        reasons.ReasonCode.NOT_ENOUGH_PODS,
        f"waiting for pods of sub-group {role.name}: {created}/{role.min_member} created",
        plugin=NAME,
        field=f"{role.field}.minMember",
        subGroup=role.name,
    )


def below_minimum(role: podgroups.SubGroupInfo, have: int) -> reasons.Reason:
    """A role has fewer pods placed than its minimum."""
    return reasons.new(
        reasons.ReasonCode.SUB_GROUP_BELOW_MINIMUM,
        f"waiting for sub-group {role.name}: {have}/{role.min_member}",
        plugin=NAME,
        field=f"{role.field}.minMember",
        subGroup=role.name,
    )


# Counting ---------------------------------------------------------------------------------


def counts(
    group: podgroups.PodGroupInfo, members: collections.abc.Iterable[pods.PodInfo]
) -> dict[str, tuple[int, int]]:
    """Per role: (pods that exist and count, pods placed or done)."""
    out = {role.name: (0, 0) for role in group.sub_groups}
    for pod in members:
        if pod.phase == "Failed" or pod.deleting:
            continue
        for role in group.sub_groups:
            if role.matches(pod):
                created, placed = out[role.name]
                holds = pod.node_name is not None or pod.phase == "Succeeded"
                out[role.name] = (created + 1, placed + int(holds))
                break
    return out


def _problem(group: podgroups.PodGroupInfo, members: list[pods.PodInfo]) -> reasons.Reason | None:
    """Why the roles are wrong as written (module docstring), naming the field."""
    for pod in members:
        owners = [role for role in group.sub_groups if role.matches(pod)]
        if len(owners) > 1:
            return overlaps(owners[1], owners[0], pod.key)
    if group.created >= group.min_member:
        for role in group.sub_groups:
            if not any(role.matches(pod) for pod in members):
                return matches_none(role)
    return None


class SubGroups(interfaces.SessionPlugin):
    """Session plugin (job valid, ready, pipelined)."""

    name = NAME

    def on_session_open(self, session: sessions.Session) -> None:
        if not any(job.group.sub_groups for job in session.jobs.values()):
            return
        snapshot = session.snapshot
        live: dict[str, list[pods.PodInfo]] = {}
        base: dict[str, dict[str, tuple[int, int]]] = {}
        for key, job in session.jobs.items():
            if job.group.sub_groups:
                members = [p for p in snapshot.members(key) if p.phase != "Failed"]
                live[key] = members
                base[key] = counts(job.group, members)

        def valid(job: jobs.Job) -> statuses.Status:
            if not job.group.sub_groups:
                return statuses.SUCCESS
            problem = _problem(job.group, live[job.key])
            if problem is not None:
                return statuses.rejecting(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, problem)
            for role in job.group.sub_groups:
                created = base[job.key][role.name][0]
                if created < role.min_member:
                    return statuses.rejecting(statuses.Code.PENDING, too_few_created(role, created))
            return statuses.SUCCESS

        def ready(job: jobs.Job, *, pipelined: bool = False) -> statuses.Status:
            if not job.group.sub_groups:
                return statuses.SUCCESS
            extra = [*job.allocated, *(job.pipelined if pipelined else ())]
            for role in job.group.sub_groups:
                have = base[job.key][role.name][1]
                have += sum(1 for k in extra if _in_role(snapshot.pods.get(k), role))
                have -= sum(1 for k in job.evicted if _in_role(snapshot.pods.get(k), role))
                if have < role.min_member:
                    return statuses.rejecting(
                        statuses.Code.UNSCHEDULABLE, below_minimum(role, have)
                    )
            return statuses.SUCCESS

        session.hooks.job_valid.add(valid, plugin=NAME)
        session.hooks.job_ready.add(ready, plugin=NAME)
        session.hooks.job_pipelined.add(lambda job: ready(job, pipelined=True), plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        return None


def _in_role(pod: pods.PodInfo | None, role: podgroups.SubGroupInfo) -> bool:
    return pod is not None and role.matches(pod)


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> SubGroups:
    """Build the plugin."""
    return SubGroups()
