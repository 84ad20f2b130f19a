"""The text ``kubectl berth why`` prints: what the cluster says, then what a dry run shows.

Three parts, each plain aligned text (greppable, stable for scripts and tests):

1. What the API says: the target (a pod's node, phase and scheduler; a PodGroup's queue,
   ``minMember`` and phase), the PodGroup's ``Scheduled`` condition (the scheduler's reason,
   written by the PodGroup controller), and the latest ``FailedScheduling`` Event about the
   pod, or about the group and its pods.
2. The dry run (:mod:`berth.cli.explaining`): the group's reason and one line per pod — where
   the session would bind it, or why it stays pending.
3. For the pod whose attempt decides (the first that found no node; else the first tried):
   every node's verdict — ``fits``, or the reasons of the first plugin that rejected it — with
   the counts line of the why-pending text, then the debug score table of the top-N nodes.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime

from berth.api import core, meta
from berth.cli import explaining

__all__ = ["Facts", "latest_failed_scheduling", "render"]

FAILED_SCHEDULING = "FailedScheduling"


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the API server says about the target (see the module docstring)."""

    kind: str  # "Pod" or "PodGroup"
    key: str  # namespace/name
    summary: str  # "bound to a-0, phase Running, scheduler berth-scheduler"
    condition: str | None = None  # "Scheduled=False (NotEnoughResources): ..."
    condition_of: str | None = None  # the PodGroup the condition is of, when the target is a pod
    event: str | None = None  # the latest FailedScheduling Event, one line


def _timestamp(event: core.Event) -> datetime.datetime | None:
    """When the Event last happened (None when it says nowhere)."""
    metadata = event.get("metadata") or {}
    for value in (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        metadata.get("creationTimestamp"),
    ):
        if isinstance(value, str) and value:
            try:
                return meta.parse_timestamp(value)
            except ValueError:
                continue
    return None


def _written_order(event: core.Event) -> int:
    """The Event's resourceVersion as a number (-1 when it is not one): later writes are
    higher on the API servers Berth runs against (etcd revisions, the emulator's counter)."""
    version = str((event.get("metadata") or {}).get("resourceVersion") or "")
    return int(version) if version.isdigit() else -1


_NEVER = datetime.datetime.min.replace(tzinfo=datetime.UTC)


def latest_failed_scheduling(
    events: collections.abc.Iterable[core.Event],
    *,
    about: collections.abc.Collection[tuple[str, str]],
) -> str | None:
    """The latest ``FailedScheduling`` Event about one of ``about`` (``(kind, name)`` pairs in
    the events' namespace), as one line: when, about what, how often, and its message."""
    found: list[tuple[datetime.datetime, int, core.Event]] = []
    for event in events:
        involved = event.get("involvedObject") or {}
        subject = (str(involved.get("kind") or ""), str(involved.get("name") or ""))
        if event.get("reason") == FAILED_SCHEDULING and subject in about:
            found.append((_timestamp(event) or _NEVER, _written_order(event), event))
    if not found:
        return None
    # Timestamps have whole seconds: within one second, the Event written last is the latest.
    when, _, event = max(found, key=lambda item: (item[0], item[1]))
    involved = event.get("involvedObject") or {}
    count = event.get("count")
    times = f" (x{count})" if isinstance(count, int) and count > 1 else ""
    message = " ".join(str(event.get("message") or "").split())
    stamp = meta.format_timestamp(when) if when != _NEVER else "at an unknown time"
    what = f"{involved.get('kind')} {involved.get('name')}"
    return f"{stamp} on {what}{times}: {message}"


def _outcome(member: explaining.Member, *, run: explaining.DryRun) -> str:
    if member.placed_on is not None:
        if member.bound_to is not None:
            return (
                f"bound to {member.bound_to}; offered again now, it would go to {member.placed_on}"
            )
        return f"would be bound to {member.placed_on}"
    if member.nominated_to is not None:
        return f"would be nominated to {member.nominated_to} (room is freeing up there)"
    if member.phase in ("Succeeded", "Failed"):
        return f"finished ({member.phase}): nothing to schedule"
    if member.reason is None:
        if member.bound_to is not None:
            return f"bound to {member.bound_to} ({member.phase})"
        return "not considered by the scheduler"
    prefix = "pending"
    if member.bound_to is not None:
        prefix = f"bound to {member.bound_to}; offered again now, it would stay pending"
    if member.follows_group:
        # Its own attempt went fine (or was not made): the group's reason above holds it.
        attempt = next(iter(run.attempts_of(member.key)), None)
        if attempt is None:
            return f"{prefix}: waits for its group"
        if attempt.best_node is not None:
            return (
                f"{prefix}: waits for its group (on its own it fits: best node {attempt.best_node})"
            )
        return f"{prefix}: waits for its group (on its own: {attempt.summary})"
    return f"{prefix}: {member.reason}"


def _decisive(run: explaining.DryRun) -> explaining.Attempt | None:
    """The attempt that explains the outcome: the first failed attempt of the first pod (by
    name) with one — the pods of a gang share a shape, so one stands for them, and by name
    the choice is stable from run to run —; else the first attempt of the first pod."""
    failed = [a for a in run.attempts if a.feasible == 0]
    candidates = failed or list(run.attempts)
    if not candidates:
        return None
    first_pod = min(a.pod for a in candidates)
    return next(a for a in candidates if a.pod == first_pod)


def _columns(rows: collections.abc.Sequence[tuple[str, ...]], *, indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _nodes(attempt: explaining.Attempt) -> list[str]:
    rows = [("NODE", "VERDICT", "PLUGIN")]
    for verdict in attempt.verdicts:
        if verdict.fits:
            rows.append((verdict.node, "fits", ""))
        else:
            rows.append((verdict.node, ", ".join(verdict.reasons), verdict.plugin or ""))
    lines = [f"Nodes for {attempt.pod} ({attempt.action}):"]
    if len(rows) == 1:
        lines.append("  no nodes in the cluster")
    else:
        lines += _columns(rows)
    lines.append(f"  {attempt.summary}")
    return lines


def render(facts: Facts, run: explaining.DryRun | None) -> str:
    """The whole report (see the module docstring)."""
    lines = [f"{facts.kind} {facts.key}: {facts.summary}"]
    if facts.condition is not None:
        of = f"PodGroup {facts.condition_of}: " if facts.condition_of else ""
        lines.append(f"  {of}{facts.condition}")
    lines.append(
        f"  last FailedScheduling event: {facts.event}"
        if facts.event is not None
        else "  no FailedScheduling events"
    )
    if run is None:
        return "\n".join(lines)
    lines += ["", f"Dry run of {run.scheduler_name} over {run.nodes} nodes (nothing is written):"]
    for group, reason in run.group_reasons.items():
        lines.append(f"  group {group}: {reason}")
    if run.members:
        lines += _columns([(m.key, _outcome(m, run=run)) for m in run.members])
    else:
        lines.append("  no pods to schedule")
    decisive = _decisive(run)
    if decisive is not None:
        lines += ["", *_nodes(decisive)]
        scored = decisive if decisive.score_table is not None else None
        scored = scored or next((a for a in run.attempts if a.score_table is not None), None)
        if scored is not None and scored.score_table is not None:
            lines += ["", f"Scores for {scored.pod} ({scored.action}):"]
            lines += [f"  {line}" for line in scored.score_table.splitlines()]
    elif run.members and any(m.reason for m in run.members):
        lines += ["", "No node was tried: the reasons above stop the pods before the filters."]
    for skipped in run.skipped:
        lines.append(f"warning: {skipped}")
    for error in run.errors:
        lines.append(f"warning: {error}")
    return "\n".join(lines)
