"""The chart's admission webhooks select the pods of other schedulers' gangs (helm install).

In admission mode kube-scheduler places every pod the webhook does not gate, so a pod of a gang
that is not gated starts alone. Pods name their gang by keys the chart's objectSelectors see
(Berth's labels, the scheduler-plugins label) and by keys they cannot see (Volcano's
annotation, Kubernetes' ``spec.schedulingGroup`` and ``spec.workloadRef``), which a
``matchConditions`` CEL expression selects. We test these aspects:

- with the interop on (the default), the chart registers the scheduler-plugins label and the
  CEL condition, and the condition (evaluated with cel-python) is true exactly for pods naming
  a gang by one of those keys;
- with the interop off, neither is registered;
- updates are sent (the ``queue-label`` webhook) exactly when they add, change or remove the
  queue label (its condition evaluated with cel-python).
"""

from __future__ import annotations

import json
import typing

import celpy
import pytest

from berth.api import keys
from berth.emulator import testing
from tests.packaging import charts

pytestmark = pytest.mark.timeout(60)

Obj = dict[str, typing.Any]


async def _webhooks(emulator: testing.RunningEmulator, values: Obj) -> dict[str, Obj]:
    await charts.install(
        emulator.kubeconfig,
        release="adm",
        namespace="adm-system",
        values={"mode": "admission", **values},
    )
    found = emulator.kubectl(
        "get", "mutatingwebhookconfiguration", "adm-berth-admission", "-o", "json"
    )
    return {hook["name"].split(".")[0]: hook for hook in json.loads(found.stdout)["webhooks"]}


def _matches(expression: str, pod: Obj) -> bool:
    environment = celpy.Environment()
    program = environment.program(environment.compile(expression))
    return bool(program.evaluate({"object": celpy.json_to_cel(pod)}))


def _pod(annotations: dict[str, str] | None = None, **spec: typing.Any) -> Obj:
    return {
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


async def test_interop_keys_are_selected_for_admission(emulator: testing.RunningEmulator) -> None:
    hooks = await _webhooks(emulator, {})
    assert set(hooks) == {
        "group",
        "queue",
        "scheduler-plugins-group",
        "namespace",
        "queue-label",
        "interop-keys",
    }
    assert hooks["scheduler-plugins-group"]["objectSelector"]["matchExpressions"][0] == {
        "key": keys.INTEROP_POD_GROUP_LABEL,
        "operator": "Exists",
    }
    (condition,) = hooks["interop-keys"]["matchConditions"]
    expression = condition["expression"]
    selected = {
        "volcano-annotation": _pod({keys.INTEROP_POD_GROUP_ANNOTATION: "g"}),
        "scheduling-group": _pod(schedulingGroup={"podGroupName": "g"}),
        "workload-ref": _pod(workloadRef={"name": "w", "podGroup": "g"}),
    }
    left = {
        "plain": _pod(),
        "other-annotation": _pod({"app": "web"}),
        "no-annotations": {"metadata": {"name": "p"}, "spec": {"containers": []}},
    }
    assert {n for n, p in {**selected, **left}.items() if _matches(expression, p)} == set(selected)
    assert hooks["interop-keys"]["clientConfig"]["service"]["path"] == "/admission/pods"


async def test_interop_off_registers_no_interop_hooks(emulator: testing.RunningEmulator) -> None:
    off = {"enabled": False}
    interop = {"schedulerPlugins": off, "volcano": off, "workloadAPI": off}
    hooks = await _webhooks(emulator, {"interop": interop})
    assert set(hooks) == {"group", "queue", "namespace", "queue-label"}


def _labelled(labels: dict[str, str] | None) -> Obj:
    meta: Obj = {"name": "p"} if labels is None else {"name": "p", "labels": labels}
    return {"metadata": meta, "spec": {"containers": []}}


async def test_updates_are_sent_only_when_they_change_the_queue_label(
    emulator: testing.RunningEmulator,
) -> None:
    hooks = await _webhooks(emulator, {})
    hook = hooks["queue-label"]
    assert hook["rules"][0]["operations"] == ["UPDATE"]
    assert hook["clientConfig"]["service"]["path"] == "/admission/pods/queue-access"
    (condition,) = hook["matchConditions"]
    environment = celpy.Environment()
    program = environment.program(environment.compile(condition["expression"]))

    def sent(old: dict[str, str] | None, new: dict[str, str] | None) -> bool:
        bound = {
            "object": celpy.json_to_cel(_labelled(new)),
            "oldObject": celpy.json_to_cel(_labelled(old)),
        }
        return bool(program.evaluate(bound))

    queue = keys.QUEUE_LABEL
    assert sent(None, {queue: "q"})  # added after creation
    assert sent({"app": "a"}, {"app": "a", queue: "q"})
    assert sent({queue: "p"}, {queue: "q"})  # changed
    assert sent({queue: "q"}, {})  # removed
    assert not sent({queue: "q"}, {queue: "q", "app": "b"})  # another label changed
    assert not sent({"app": "a"}, {"app": "b"})
    assert not sent(None, None)
