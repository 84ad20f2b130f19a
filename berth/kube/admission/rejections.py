"""Admission mode's memory of kube-scheduler's refusals: nodes to avoid, backoff, send-backs.

When kube-scheduler will not bind a pod Berth pinned to a node (it reports it ``Unschedulable``,
binds it elsewhere, or leaves it unbound past the bind timeout), :meth:`Rejections.remember`
records three things:

- **The node**, for the pod and for its PodGroup, with the node's mark
  (:class:`~berth.kube.admission.refusals.NodeMark`: what of the node the refusal rested on, as
  Berth saw it). :meth:`Rejections.avoiding` narrows the pod's required node affinity (a
  ``matchFields metadata.name NotIn`` requirement in every term) so that the next cycle pins it, and
  every member of its gang, elsewhere: what made kube-scheduler refuse (a taint or cordon Berth's
  view missed, a device it could not allocate, a port or volume conflict only kube-scheduler
  sees) would refuse them there again. The node is forgotten when *the cause may have gone*
  (:meth:`Rejections.forget_changed`: a taint removed, a device freed, the node changed —
  kube-scheduler's own queueing hints), else ``ttl`` seconds after the last refusal there.
- **A per-pod exponential backoff**, as kube-scheduler's backoff queue: after its n-th refusal
  the pod (and its gang) is not offered for admission again before ``initial * 2**(n-1)``
  seconds (at most ``maximum``), unless the cause goes first (then at once). A pod bound where
  Berth put it starts again from no refusal.
- **When the pod may be sent back.** Kubernetes forbids adding a scheduling gate back, so a
  refused pod goes back to wait by being deleted (evicted, or recreated by Berth); no pod is
  deleted more than once per ``resend`` seconds (:meth:`Rejections.send_back_at`): a pod
  refused again sooner stays pinned and ungated until then (kube-scheduler may still bind it
  there if the cause goes).

The memory is bounded: entries go ``ttl`` seconds after their last refusal, when their pod or
group leaves the cluster, and the oldest first beyond ``limit`` pods or groups. Pure and
synchronous; the caller passes the clock's time.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses

from berth.kube.admission import refusals
from berth.scheduler.snapshot import pods, selectors

__all__ = [
    "DEFAULT_INITIAL_BACKOFF",
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_BACKOFF",
    "DEFAULT_RESEND",
    "DEFAULT_TTL",
    "Rejections",
]

DEFAULT_TTL = 600.0
"""Seconds a rejected node is avoided after its last rejection (when its cause is not seen
to go first)."""
DEFAULT_LIMIT = 10_000
"""Pods and groups remembered at most (each side)."""
DEFAULT_INITIAL_BACKOFF = 5.0
"""Seconds a pod waits after its first refusal before it is offered again."""
DEFAULT_MAX_BACKOFF = 300.0
"""The longest a pod waits after a refusal before it is offered again."""
DEFAULT_RESEND = 60.0
"""Seconds at least between two deletions (send-backs) of one pod."""


@dataclasses.dataclass
class _Entry:
    nodes: dict[str, refusals.NodeMark | None]  # node -> its mark when refused there
    until: float  # forgotten then (ttl after the last refusal)
    count: int = 0  # refusals since the pod (or group) was last bound where Berth put it
    retry_at: float = 0.0  # not offered for admission before
    last: refusals.Refusal | None = None


class Rejections:
    """Refused nodes, backoff and send-backs per pod and per group; see the module docstring."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        limit: int = DEFAULT_LIMIT,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        resend: float = DEFAULT_RESEND,
    ) -> None:
        self.ttl = ttl
        self.limit = limit
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.resend = resend
        self._pods: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._groups: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._sent: collections.OrderedDict[str, float] = collections.OrderedDict()

    def backoff(self, refused: int) -> float:
        """Seconds a pod waits after its ``refused``-th refusal."""
        return min(self.initial_backoff * 2.0 ** max(refused - 1, 0), self.max_backoff)

    def remember(
        self,
        key: str,
        *,
        group: str | None,
        node: str,
        now: float,
        refusal: refusals.Refusal | None = None,
    ) -> float:
        """kube-scheduler refused pod ``key`` (of ``group``) pinned to ``node`` at ``now``
        (``refusal``: why, and the node's mark); the time it may be offered again."""
        mark = refusal.mark if refusal is not None else None
        retry = self._add(self._pods, key, node=node, mark=mark, now=now, refusal=refusal)
        if group is not None:
            retry = max(
                retry,
                self._add(self._groups, group, node=node, mark=mark, now=now, refusal=refusal),
            )
        return retry

    def _add(
        self,
        into: collections.OrderedDict[str, _Entry],
        key: str,
        *,
        node: str,
        mark: refusals.NodeMark | None,
        now: float,
        refusal: refusals.Refusal | None,
    ) -> float:
        entry = into.pop(key, None)
        if entry is None or entry.until <= now:
            entry = _Entry({}, now)
        entry.nodes[node] = mark
        entry.until = now + self.ttl
        entry.count += 1
        entry.retry_at = now + self.backoff(entry.count)
        entry.last = refusal
        into[key] = entry  # last: the newest
        while len(into) > self.limit:
            into.popitem(last=False)
        return entry.retry_at

    def bound(self, key: str) -> None:
        """Pod ``key`` was bound where Berth put it: its backoff starts again (the nodes it
        was refused on stay avoided by its gang until their causes go)."""
        entry = self._pods.get(key)
        if entry is not None:
            entry.count = 0
            entry.retry_at = 0.0

    def forget_changed(
        self,
        mark_of: collections.abc.Callable[[str], refusals.NodeMark | None],
        *,
        now: float,
    ) -> list[str]:
        """Forget every refused node whose cause may have gone (:func:`~.refusals.cause_gone`
        between its mark then and ``mark_of(node)`` now), and end the backoff of the pods and
        groups refused there; the pod and group keys that forgot a node."""
        current: dict[str, refusals.NodeMark | None] = {}
        forgot: list[str] = []
        for into in (self._pods, self._groups):
            for key, entry in list(into.items()):
                if entry.until <= now:
                    del into[key]
                    continue
                gone = []
                for node, then in entry.nodes.items():
                    if then is None:
                        continue
                    if node not in current:
                        current[node] = mark_of(node)
                    if refusals.cause_gone(then, current[node]):
                        gone.append(node)
                if gone:
                    for node in gone:
                        del entry.nodes[node]
                    entry.retry_at = min(entry.retry_at, now)
                    forgot.append(key)
                    if not entry.nodes:
                        entry.last = None
        return forgot

    def forget_pod(self, key: str) -> None:
        """The pod left the cluster."""
        self._pods.pop(key, None)
        self._sent.pop(key, None)

    def forget_group(self, key: str) -> None:
        """The group left the cluster."""
        self._groups.pop(key, None)

    def send_back_at(self, key: str, *, now: float) -> float:
        """When pod ``key`` may be deleted to send it back (``now``, or ``resend`` seconds
        after its last send-back)."""
        last = self._sent.get(key)
        return now if last is None else max(now, last + self.resend)

    def sent_back(self, key: str, *, now: float) -> None:
        """Pod ``key`` was deleted at ``now`` to send it back."""
        self._sent.pop(key, None)
        self._sent[key] = now
        while len(self._sent) > self.limit:
            self._sent.popitem(last=False)

    def retry_at(self, key: str, *, group: str | None, now: float) -> float | None:
        """When pod ``key`` of ``group`` may be offered for admission again, if later than
        ``now`` (else None)."""
        found = [
            entry.retry_at
            for into, name in ((self._pods, key), (self._groups, group))
            if name is not None
            for entry in (into.get(name),)
            if entry is not None and entry.until > now
        ]
        latest = max(found, default=now)
        return latest if latest > now else None

    def refused(self, key: str, *, group: str | None) -> tuple[int, refusals.Refusal | None]:
        """How often pod ``key`` (or its group) was refused since last bound, and the latest
        refusal still remembered."""
        count = 0
        last: refusals.Refusal | None = None
        for into, name in ((self._pods, key), (self._groups, group)):
            entry = into.get(name) if name is not None else None
            if entry is not None:
                count = max(count, entry.count)
                last = last or entry.last
        return count, last

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
            found |= entry.nodes.keys()
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
