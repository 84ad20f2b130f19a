"""QueueAccess: a queue's ``namespaceSelector`` keeps other namespaces' work out.

We test that a pod of a namespace the queue does not admit waits with the code
``NamespaceNotAdmitted`` (queue and namespace in the details) while a pod of an admitted
namespace in the same queue runs.
"""

from __future__ import annotations

import typing

from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_a_namespace_the_queue_does_not_admit_waits_with_its_code() -> None:
    team_a = b.queue("team-a")
    team_a["spec"]["namespaceSelector"] = {"matchLabels": {"team": "a"}}
    objects = [
        b.node("n1"),
        team_a,
        namespace("ml", team="b"),
        namespace("web", team="a"),
        b.pod("sneaky", namespace="ml", queue="team-a"),
        b.pod("welcome", namespace="web", queue="team-a"),
    ]
    bound, _, groups = harness.cycle(*objects)
    assert bound == {"web/welcome": "n1"}
    pod_codes, group_codes = harness.reason_codes(*objects)
    assert pod_codes["ml/sneaky"] == "NamespaceNotAdmitted"
    reason = "queue team-a does not admit namespace ml (namespaceSelector team=a)"
    assert groups["ml/pod:sneaky"] == reason
    assert group_codes["ml/pod:sneaky"] == "NamespaceNotAdmitted"
