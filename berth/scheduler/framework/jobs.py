"""``Job``: a PodGroup as one session schedules it (KAI's JobInfo); ``Event``: what changed.

A job wraps the snapshot's :class:`~berth.scheduler.snapshot.podgroups.PodGroupInfo` (a real
PodGroup, or the implicit group of one a pod with a queue forms) with what changes while the
session runs: which of its pods the session placed, pipelined or evicted. Statements keep it
current; the Gang plugin reads it to say whether the job is ready. Built by
:func:`berth.scheduler.framework.sessions.open_session` from ``Snapshot.pending``.
"""

from __future__ import annotations

import dataclasses
import typing

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import ids, podgroups, pods

__all__ = ["Event", "Job"]


class Job:
    """One group's scheduling state in a session (mutated only by statements)."""

    __slots__ = (
        "allocated",
        "committed",
        "evicted",
        "group",
        "pending",
        "pipelined",
        "queued_at",
    )

    def __init__(self, group: podgroups.PodGroupInfo, *, pending: list[pods.PodInfo]) -> None:
        self.group = group
        """The snapshot's view of the group (static for the session)."""
        self.pending = pending
        """Its pods waiting for a node, to be tried this session, by key."""
        self.allocated: dict[ids.PodKey, str] = {}
        """Pods this session placed (tentatively or committed) -> node."""
        self.committed: set[ids.PodKey] = set()
        """Those of ``allocated`` whose statement committed."""
        self.pipelined: dict[ids.PodKey, str] = {}
        """Pods this session nominated to a node that is still freeing up."""
        self.evicted: set[ids.PodKey] = set()
        """Placed pods of this job that the session evicts."""
        self.queued_at = group.creation_timestamp
        """When the job joined its queue as far as order goes: its creation, unless a plugin
        sent it to the back (the Gang plugin, for a group retried after its timeout)."""

    @property
    def key(self) -> ids.PodGroupKey:
        return self.group.key

    @property
    def queue(self) -> ids.QueueName:
        return self.group.queue

    @property
    def priority(self) -> int:
        return self.group.priority

    @property
    def creation_timestamp(self) -> float:
        return self.group.creation_timestamp

    @property
    def uid(self) -> str:
        return self.group.uid

    def occupied(self) -> int:
        """Members holding (or about to hold) a node: already placed or done, minus the
        evicted, plus those this session placed. What quorum (minMember) is counted against."""
        return self.group.placed + self.group.succeeded - len(self.evicted) + len(self.allocated)

    def __repr__(self) -> str:
        return f"Job({self.key!r}, pending={len(self.pending)}, allocated={len(self.allocated)})"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """What allocate/deallocate handlers receive: ``pod`` gained or lost ``node`` in a session.

    Allocate: placed, pipelined, or an eviction undone. Deallocate: evicted, or a placement
    or pipelining undone.
    """

    pod: pods.PodInfo
    node: str
    job: Job | None  # None for a plain pod
