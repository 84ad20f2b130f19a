"""The shape of a derived gang and the error a workload's unreadable spec raises.

Every deriver (:mod:`.batch`, :mod:`.kubeflow`, ...) returns a :class:`Gang` or raises
:class:`OwnerSpecError` naming the field that is wrong; :mod:`.plans` turns the error into a
reason on the pod.
"""

from __future__ import annotations

import collections.abc
import dataclasses

__all__ = ["Gang", "OwnerSpecError"]


class OwnerSpecError(ValueError):
    """A workload's spec Berth cannot read (a missing or malformed field, a version it does not
    know); the message names the field and what is wrong with it."""


@dataclasses.dataclass(frozen=True)
class Gang:
    """How many of a workload's pods must start together, and what else its spec says."""

    min_member: int
    """Pods placed all or nothing (at least 1)."""
    why: str
    """How ``min_member`` was computed, for the PodGroup's ``derived-from`` annotation."""
    min_resources: collections.abc.Mapping[str, str] | None = None
    """Resources (quantity strings) that must be free for the whole workload at once."""
    queue: str | None = None
    """A queue the workload's own spec names (Kubeflow's ``schedulingPolicy.queue``)."""
    priority_class_name: str | None = None
    """A PriorityClass the workload's own spec names."""
    replica: str | None = None
    """The part of the workload this pod's gang is, when a workload makes several gangs (a
    LeaderWorkerSet's group index, a JobSet's later stage): part of the group's name."""

    def __post_init__(self) -> None:
        if self.min_member < 1:
            raise ValueError(f"min_member must be at least 1, not {self.min_member}")
