"""``QueueStore``: the cache's Queues, the Namespaces they select, and what each queue is charged.

Owns each Queue as last parsed, each Namespace's labels and the default queue its label
``scheduling.berth.io/default-queue`` names, and the per-queue sums (:mod:`.usage`) moved by
each pod change — a cycle never re-sums every pod.

Queue accounting cannot be squatted: a placed pod is charged to its queue (``allocated``) only
when the queue's ``namespaceSelector`` admits the pod's namespace and Berth placed it — a pod of
Berth's scheduler (Berth binds those), a pod Berth assumed (admission mode: admitted to that
node), or one carrying Berth's ``admitted-node`` annotation naming the node it runs on and not
disowned (:meth:`QueueStore.disown`: admission saw the marker forged). Once charged so, a pod
stays charged while it lives, whatever is later written on it. Anyone else's pod with a queue
label — a foreign namespace's, one that skipped the gate, one labelled after creation — takes
room on its node like any pod and is charged to no queue; waiting pods likewise add to a
queue's demand only where its selector admits them.

Pure and synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import collections.abc
import types

from berth.api import keys
from berth.scheduler.snapshot import ids, podgroups, pods, queues, usage

__all__ = ["QueueStore"]


class QueueStore:
    """Queues by name, Namespaces' labels, and the queues' sums; :meth:`view` and
    :meth:`usage_view` give a snapshot their views."""

    def __init__(self, *, scheduler_names: frozenset[str]) -> None:
        """``scheduler_names``: the schedulers whose pods Berth binds (charged as Berth's)."""
        self._scheduler_names = scheduler_names
        self._queues: dict[str, queues.QueueInfo] = {}
        self._namespaces: dict[str, dict[str, str]] = {}
        self._namespace_queues: dict[str, str] = {}
        self._usage = usage.QueueTotals()
        # Pods Berth placed (pod key -> UID): charged to their queue while they live, and pods
        # whose admitted-node marker admission found forged (never charged through it).
        self._placed_by_berth: dict[str, str] = {}
        self._disowned: dict[str, str] = {}

    # Queues -------------------------------------------------------------------------------
    def add_queue(self, info: queues.QueueInfo, /) -> tuple[bool, bool]:
        """Add or update a Queue: whether it changed, and whether its ``namespaceSelector``
        did (every pod's charge moves again)."""
        before = self._queues.get(info.name)
        self._queues[info.name] = info
        selector_changed = (before.namespaces if before is not None else None) != info.namespaces
        return before != info, selector_changed

    def remove_queue(self, name: str, /) -> queues.QueueInfo | None:
        """Forget the Queue ``name``; the one removed, if any."""
        return self._queues.pop(ids.QueueName(name), None)

    def selectors_in_use(self) -> bool:
        """Whether any queue selects namespaces (a Namespace's labels then move charges)."""
        return any(q.namespaces is not None for q in self._queues.values())

    # Namespaces ---------------------------------------------------------------------------
    def add_namespace(self, name: str, labels: dict[str, str]) -> tuple[bool, bool]:
        """Add or update the Namespace ``name`` with ``labels``: whether its labels changed,
        and whether the default queue it names did."""
        queue = labels.get(keys.NAMESPACE_QUEUE_LABEL) or None
        before = self._namespace_queues.get(name)
        relabelled = self._namespaces.get(name) != labels
        self._namespaces[name] = labels
        if queue:
            self._namespace_queues[name] = queue
        else:
            self._namespace_queues.pop(name, None)
        return relabelled, queue != before

    def remove_namespace(self, name: str, /) -> tuple[bool, bool]:
        """Forget the Namespace ``name``: whether it was known, and whether it named a queue."""
        known = self._namespaces.pop(name, None) is not None
        return known, self._namespace_queues.pop(name, None) is not None

    def namespace_labels(self, namespace: str, /) -> collections.abc.Mapping[str, str]:
        """The labels of the Namespace ``namespace`` (empty when not seen)."""
        return types.MappingProxyType(self._namespaces.get(namespace, {}))

    def own_queue(self, namespace: str, /) -> str | None:
        """The default queue the Namespace ``namespace`` names, if it names one."""
        return self._namespace_queues.get(namespace)

    # Charges ------------------------------------------------------------------------------
    def charge(self, info: pods.PodInfo, /, *, pending: bool) -> None:
        """Move ``info``'s part in its queue's sums (``pending``: it is one of Berth's waiting
        pods; the module docstring says who is charged)."""
        queue = info.queue
        if queue is not None and not self._admits(queue, info.namespace):
            queue = None
        placed = info.node_name is not None and not info.terminal
        if placed and queue is not None and not self._berth_placed(info):
            queue = None
        self._usage.set_pod(
            info.key,
            running=(queue, info.requests) if placed and queue is not None else None,
            waiting=(queue, info.requests) if queue is not None and pending else None,
        )

    def placed(self, key: str, /, *, uid: str) -> None:
        """Berth placed the pod ``key`` (of ``uid``): charge it as Berth's unless disowned."""
        if key not in self._disowned:
            self._placed_by_berth[key] = uid

    def unplaced(self, key: str, /) -> None:
        """Berth's placement of the pod ``key`` failed."""
        self._placed_by_berth.pop(key, None)

    def disown(self, key: str, /, *, uid: str, assumed: bool) -> None:
        """The pod ``key`` (of ``uid``) carries Berth's ``admitted-node`` marker, but Berth did
        not admit it (``assumed``: Berth's own binding of it is in flight)."""
        self._disowned[key] = uid
        if self._placed_by_berth.get(key) in (uid, "") and not assumed:
            del self._placed_by_berth[key]

    def pod_gone(self, key: str, /) -> None:
        """The pod ``key`` is gone: it is charged nowhere."""
        self._usage.set_pod(key, running=None, waiting=None)
        self._placed_by_berth.pop(key, None)
        self._disowned.pop(key, None)

    def group_changed(self, key: str, view: podgroups.PodGroupInfo | None, /) -> None:
        """The group ``key``'s view is now ``view`` (``None``: there is none)."""
        if view is None:
            self._usage.set_group(key, queue=None, state=None)
        else:
            self._usage.set_group(key, queue=view.queue, state=usage.group_state(view))

    def _admits(self, queue: str, namespace: str) -> bool:
        """Whether the queue ``queue`` admits pods of ``namespace`` (a queue not known yet, or
        without a ``namespaceSelector``, admits every namespace)."""
        info = self._queues.get(ids.QueueName(queue))
        if info is None or info.namespaces is None:
            return True
        return info.namespaces.admits(self._namespaces.get(namespace, {}))

    def _berth_placed(self, info: pods.PodInfo, /) -> bool:
        """Whether Berth placed the placed pod ``info`` (remembered from the first sight on)."""
        key = info.key
        known = self._placed_by_berth.get(key)
        if known is not None and (known == info.uid or not known or not info.uid):
            return True
        if info.reserve or info.scheduler_name in self._scheduler_names:
            return True
        disowned = self._disowned.get(key)
        if disowned is not None and (disowned == info.uid or not info.uid):
            return False
        if info.annotations.get(keys.ADMITTED_NODE_ANNOTATION) == info.node_name:
            self._placed_by_berth[key] = info.uid
            return True
        return False

    # Snapshots ----------------------------------------------------------------------------
    def view(
        self,
    ) -> tuple[
        collections.abc.Mapping[str, queues.QueueInfo],
        collections.abc.Mapping[str, collections.abc.Mapping[str, str]],
    ]:
        """The queues (``default`` always among them) and the Namespaces' labels, sorted."""
        shown = dict(sorted(self._queues.items()))
        shown.setdefault(ids.QueueName(keys.DEFAULT_QUEUE), queues.default_queue())
        return (
            types.MappingProxyType(shown),
            types.MappingProxyType(dict(sorted(self._namespaces.items()))),
        )

    def usage_view(self) -> collections.abc.Mapping[str, usage.QueueUsage]:
        """The queues' sums for a snapshot."""
        return self._usage.views()
