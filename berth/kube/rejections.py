"""Admission mode's memory of the nodes kube-scheduler rejected pinned pods on.

When kube-scheduler will not bind a pod Berth pinned to a node (it reports it ``Unschedulable``,
binds it elsewhere, or leaves it unbound past the bind timeout), that node is remembered for
the pod and for its PodGroup, and :meth:`Rejections.avoiding` narrows the pod's required node
affinity (a ``matchFields metadata.name NotIn`` requirement in every term) so that the next
cycle pins it, and every member of its gang, elsewhere: what made kube-scheduler refuse (a
taint or cordon Berth's view missed, a port or volume conflict only the kubelet's scheduler
sees) would refuse them there again. A pod all of whose feasible nodes were rejected waits
with the node-affinity reason until the memory fades.

The memory is bounded: an entry is forgotten ``ttl`` seconds after the last rejection it
records (the node may have been fixed), when its pod or group leaves the cluster, and the oldest
entries go first beyond ``limit`` pods or groups. Pure and synchronous; the caller passes the
clock's time.
"""

from __future__ import annotations

import collections
import dataclasses

from berth.scheduler.snapshot import pods, selectors

__all__ = ["DEFAULT_LIMIT", "DEFAULT_TTL", "Rejections"]

DEFAULT_TTL = 600.0
"""Seconds a rejected node is avoided after its last rejection."""
DEFAULT_LIMIT = 10_000
"""Pods and groups remembered at most (each side)."""


@dataclasses.dataclass
class _Entry:
    nodes: set[str]
    until: float


class Rejections:
    """Rejected nodes per pod and per group; see the module docstring."""

    def __init__(self, *, ttl: float = DEFAULT_TTL, limit: int = DEFAULT_LIMIT) -> None:
        self.ttl = ttl
        self.limit = limit
        self._pods: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._groups: collections.OrderedDict[str, _Entry] = collections.OrderedDict()

    def remember(self, key: str, *, group: str | None, node: str, now: float) -> None:
        """kube-scheduler rejected pod ``key`` (of ``group``) pinned to ``node`` at ``now``."""
        self._add(self._pods, key, node=node, now=now)
        if group is not None:
            self._add(self._groups, group, node=node, now=now)

    def _add(
        self, into: collections.OrderedDict[str, _Entry], key: str, *, node: str, now: float
    ) -> None:
        entry = into.pop(key, None)
        if entry is None or entry.until <= now:
            entry = _Entry(set(), now)
        entry.nodes.add(node)
        entry.until = now + self.ttl
        into[key] = entry  # last: the newest
        while len(into) > self.limit:
            into.popitem(last=False)

    def forget_pod(self, key: str) -> None:
        """The pod left the cluster."""
        self._pods.pop(key, None)

    def forget_group(self, key: str) -> None:
        """The group left the cluster."""
        self._groups.pop(key, None)

    def nodes(self, pod: pods.PodInfo, *, now: float) -> frozenset[str]:
        """The nodes ``pod`` is not to be pinned to at ``now`` (its own and its group's)."""
        return self.nodes_of(pod.key, group=pod.pod_group, now=now)

    def nodes_of(self, key: str, *, group: str | None, now: float | None = None) -> frozenset[str]:
        """The nodes pod ``key`` of ``group`` is not to be pinned to at ``now`` (``None``:
        whatever has not been found expired yet)."""
        found: set[str] = set()
        for into, name in ((self._pods, key), (self._groups, group)):
            if name is None:
                continue
            entry = into.get(name)
            if entry is None:
                continue
            if now is not None and entry.until <= now:
                del into[name]
                continue
            found |= entry.nodes
        return frozenset(found)

    def avoiding(self, pod: pods.PodInfo, *, now: float) -> pods.PodInfo:
        """``pod`` with its required node affinity excluding the nodes it was rejected on
        (``pod`` itself when there are none)."""
        rejected = self.nodes(pod, now=now)
        if not rejected:
            return pod
        away = selectors.Requirement(
            key=selectors.METADATA_NAME, operator=selectors.NOT_IN, values=tuple(sorted(rejected))
        )
        terms = pod.required_affinity
        if terms is None:
            narrowed: tuple[selectors.SelectorTerm, ...] = (selectors.SelectorTerm(fields=(away,)),)
        else:
            # A term with no requirements matches no node: it stays empty.
            narrowed = tuple(
                term if term.empty else dataclasses.replace(term, fields=(*term.fields, away))
                for term in terms
            )
        return dataclasses.replace(pod, required_affinity=narrowed)
