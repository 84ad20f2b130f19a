"""A stand-in for kube-scheduler: binds the pods of the default scheduler on the emulator.

The emulator runs no kube-scheduler. ``berth up`` starts this binder beside the simulated
kubelets so that pods which name no scheduler (or ``default-scheduler``) are bound as
kube-scheduler binds the simplest of them — which is what admission mode needs: Berth pins an
admitted pod to its node (required node affinity ``matchFields metadata.name In [node]``) and
removes its gate, and kube-scheduler binds it there.

For each such pod that is unbound, ungated and not being deleted, in creation order, the binder
takes the first node (by name) that passes kube-scheduler's basic filters — the pod's
``nodeName``-free ``nodeSelector``, its required node affinity (``matchExpressions`` and
``matchFields metadata.name``), the node's ``NoSchedule``/``NoExecute`` taints it does not
tolerate, ``spec.unschedulable``, and room for its requests beside the pods bound there — and
binds it. A pod no node passes gets ``PodScheduled=False`` with reason ``Unschedulable`` and a
message in kube-scheduler's words (``0/4 nodes are available: 4 Insufficient cpu.``), which is
what admission mode watches for to reject an allocation.

It is not kube-scheduler: no scoring, no pod (anti-)affinity or topology spread, no
preemption, no queue with back-off. docs/emulator.md lists it among the emulator's differences.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import typing

from berth.api import core, objects, quantities
from berth.emulator import errors, kubelets, patches, rest, storage
from berth.emulator.pods import as_pod
from berth.util import wakeups

__all__ = ["DEFAULT_SCHEDULER", "Binder"]

DEFAULT_SCHEDULER = "default-scheduler"
_DONE = ("Succeeded", "Failed")
_HARD_EFFECTS = ("NoSchedule", "NoExecute")
_NODE_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}


def _expression_matches(expression: core.NodeSelectorRequirement, value: str | None) -> bool:
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or ()]
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if value is None or len(values) != 1:
        return False
    try:
        number, bound = int(value), int(values[0])
    except ValueError:
        return False
    return number > bound if operator == "Gt" else number < bound


def _term_matches(term: core.NodeSelectorTerm, node: core.Node) -> bool:
    """A NodeSelectorTerm: every expression and field requirement holds (an empty term
    matches nothing, as kube-scheduler has it)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = objects.part(node["metadata"].get("labels"))
    for expression in expressions:
        if expression.get("operator") not in _NODE_OPERATORS:
            return False
        if not _expression_matches(expression, labels.get(str(expression.get("key")))):
            return False
    for field in fields:
        if field.get("key") != "metadata.name":
            return False
        if not _expression_matches(field, str(node["metadata"]["name"])):
            return False
    return True


def _tolerates(pod: core.Pod, taint: core.Taint) -> bool:
    for listed in objects.part(pod.get("spec")).get("tolerations") or ():
        toleration = objects.part(listed)
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        if not key:
            if toleration.get("operator") == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists":
            return True
        if str(toleration.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def _why_not(
    pod: core.Pod, node: core.Node, wanted: typing.Mapping[str, int], used: typing.Mapping[str, int]
) -> str:
    """Why ``node`` cannot take ``pod`` in kube-scheduler's words ("" when it can): the first
    filter that fails, in the default profile's order."""
    spec, node_spec = objects.part(pod.get("spec")), objects.part(node.get("spec"))
    if node_spec.get("unschedulable"):
        return "node(s) were unschedulable"
    for listed in node_spec.get("taints") or ():
        taint = objects.part(listed)
        if taint.get("effect") in _HARD_EFFECTS and not _tolerates(pod, taint):
            return "node(s) had untolerated taint(s)"
    labels = objects.part(node["metadata"].get("labels"))
    selector = objects.part(spec.get("nodeSelector"))
    if any(labels.get(k) != v for k, v in selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    required = objects.part(
        objects.part(objects.part(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    terms = required.get("nodeSelectorTerms")
    if terms is not None and not any(_term_matches(objects.part(t), node) for t in terms):
        return "node(s) didn't match Pod's node affinity/selector"
    allocatable = {
        name: quantities.parse_milli(value)
        for name, value in objects.part(objects.part(node.get("status")).get("allocatable")).items()
    }
    for name, amount in sorted(wanted.items()):
        if used.get(name, 0) + amount > allocatable.get(name, 0):
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return ""


class Binder:
    """Binds the default scheduler's pods (see the module docstring); start with :meth:`start`."""

    def __init__(self, api: rest.Api) -> None:
        self.api = api
        self._task: asyncio.Task[None] | None = None
        self._watchers: list[storage.Watcher] = []
        self._wake = wakeups.Wakeup()

    async def start(self) -> None:
        for plural in ("pods", "nodes"):
            key = self.api.resource("v1", plural).key
            self._watchers.append(self.api.storage.subscribe(key=key, namespace=None))
        self._task = asyncio.create_task(self._run(), name="stand-in kube-scheduler")
        self._wake.wake()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for watcher in self._watchers:
            self.api.storage.unsubscribe(watcher)
        self._watchers = []

    async def _run(self) -> None:
        drains = [asyncio.create_task(self._drain(w)) for w in self._watchers]
        try:
            while True:
                await self._wake.sleep()
                self.schedule()
        finally:
            for drain in drains:
                drain.cancel()

    async def _drain(self, watcher: storage.Watcher) -> None:
        while (await watcher.queue.get()) is not None:
            self._wake.wake()

    def schedule(self) -> int:
        """One pass over the pods waiting for the default scheduler; how many it bound."""
        pods_resource = self.api.resource("v1", "pods")
        nodes = sorted(
            map(kubelets.as_node, self.api.storage.list(self.api.resource("v1", "nodes").key)),
            key=lambda n: str(n["metadata"]["name"]),
        )
        used: dict[str, collections.Counter[str]] = {
            str(n["metadata"]["name"]): collections.Counter() for n in nodes
        }
        waiting: list[core.Pod] = []
        for pod in map(as_pod, self.api.storage.list(pods_resource.key)):
            spec, status = objects.part(pod.get("spec")), objects.part(pod.get("status"))
            bound = spec.get("nodeName")
            if bound:
                if bound in used and status.get("phase") not in _DONE:
                    with contextlib.suppress(ValueError):
                        used[str(bound)].update(kubelets.pod_requests(pod))
                continue
            if (
                spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
                and not spec.get("schedulingGates")
                and not pod["metadata"].get("deletionTimestamp")
            ):
                waiting.append(pod)
        waiting.sort(
            key=lambda p: (str(p["metadata"].get("creationTimestamp")), p["metadata"]["name"])
        )
        placed = 0
        for pod in waiting:
            try:
                wanted = kubelets.pod_requests(pod)
            except ValueError as exc:
                self._unschedulable(pod, f"0/{len(nodes)} nodes are available: {exc}.")
                continue
            verdicts: collections.Counter[str] = collections.Counter()
            target = None
            for node in nodes:
                name = str(node["metadata"]["name"])
                why = _why_not(pod, node, wanted, used[name])
                if not why:
                    target = name
                    break
                verdicts[why] += 1
            if target is None:
                detail = ", ".join(f"{n} {why}" for why, n in sorted(verdicts.items()))
                self._unschedulable(
                    pod,
                    f"0/{len(nodes)} nodes are available: {detail}."
                    if detail
                    else f"0/{len(nodes)} nodes are available.",
                )
                continue
            if self._bind(pod, target):
                used[target].update(wanted)
                placed += 1
        return placed

    def _bind(self, pod: core.Pod, node: str) -> bool:
        meta = pod["metadata"]
        binding: core.Binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "uid": meta.get("uid", "")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.api.bind(namespace=meta["namespace"], name=meta["name"], binding=binding)
        except errors.StatusError:
            return False  # changed or gone meanwhile: the next pass sees it as it is now
        return True

    def _unschedulable(self, pod: core.Pod, message: str) -> None:
        """Say so on the pod as kube-scheduler does (once per message)."""
        for existing in objects.part(pod.get("status")).get("conditions") or ():
            if (
                objects.part(existing).get("type") == "PodScheduled"
                and existing.get("reason") == "Unschedulable"
                and existing.get("message") == message
            ):
                return
        condition: core.PodCondition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": self.api.timestamp(),
        }
        meta = pod["metadata"]
        with contextlib.suppress(errors.StatusError):
            self.api.patch(
                self.api.resource("v1", "pods"),
                {"status": {"conditions": [condition]}},
                namespace=meta["namespace"],
                name=meta["name"],
                patch_type=patches.STRATEGIC_MERGE_PATCH,
                subresource="status",
            )
