"""What ``kubectl get bq`` and ``kubectl get bpg`` show about queues and the line in them.

We test these aspects (the operator in the test's loop, the emulator with simulated nodes,
everything read with the real ``kubectl``):

- ``kubectl get bq`` has a State column: a queue whose parent does not exist and queues in a
  cycle are ``Invalid`` with the reason, a closed queue ``Closed``, a healthy one ``Open``;
  guaranteed, allocated and fair share read as short text of the main resources; Pending and
  Running count pods (the subtree's, for a parent);
- ``kubectl get bq -o wide`` adds weight, priority, limit and the PodGroup counts;
- ``kubectl get bpg`` shows each waiting group's position in its queue's line, ``-o wide``
  how many wait and the full reason.
"""

from __future__ import annotations

import re

import pytest

from berth.emulator import testing
from tests.operator import running
from tests.operator.running import kubectl

pytestmark = pytest.mark.slow

QUEUES = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: research}
spec: {guaranteed: {cpu: "8", memory: 32Gi}}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: team-a}
spec: {parent: research, guaranteed: {cpu: "4"}, limit: {cpu: "6"}, weight: 2, priority: 5}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: orphan}
spec: {parent: nowhere}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: loop-a}
spec: {parent: loop-b}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: loop-b}
spec: {parent: loop-a}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: shut}
spec: {state: Closed}
"""


def pod(name: str, *, cpu: str, group: str | None = None, queue: str = "team-a") -> str:
    label = (
        f"scheduling.berth.io/pod-group: {group}"
        if group
        else f"scheduling.berth.io/queue: {queue}"
    )
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{{label}}}}}
spec:
  schedulerName: berth-scheduler
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def group(name: str) -> str:
    return f"""
---
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: 1, queue: team-a}}
"""


WORK = (
    pod("small-0", cpu="1")
    + pod("small-1", cpu="1")
    + "".join(group(f"wide-{i}") + pod(f"wide-{i}-0", cpu="3", group=f"wide-{i}") for i in range(3))
)


def rows(table: str) -> dict[str, list[str]]:
    """The table's rows by name, cells split on runs of two or more spaces."""
    lines = table.strip().splitlines()
    return {line.split()[0]: re.split(r"\s{2,}", line.strip()) for line in lines[1:]}


async def test_queue_states_usage_and_the_line(emulator: testing.RunningEmulator) -> None:
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=30)
    async with running.operator_on(emulator):
        await kubectl(emulator, "apply", "-f", "-", input=QUEUES)
        await kubectl(emulator, "apply", "-f", "-", input=WORK)

        async def table(*args: str) -> str:
            return await kubectl(emulator, "get", *args)

        shown = ""

        async def settled() -> bool:
            nonlocal shown
            shown = await table("bq")
            return re.search(r"^team-a\s+Open\s.*\s3\s+2\s", shown, re.M) is not None

        for _ in range(200):
            if await settled():
                break
        queues = rows(shown)
        header = re.split(r"\s{2,}", shown.splitlines()[0].strip())
        assert header == [
            "NAME",
            "STATE",
            "PARENT",
            "GUARANTEED",
            "ALLOCATED",
            "FAIRSHARE",
            "PENDING",
            "RUNNING",
            "REASON",
            "AGE",
        ]
        assert queues["orphan"][1:3] == ["Invalid", "nowhere"]
        assert queues["orphan"][-2] == "parent queue nowhere does not exist"
        assert queues["loop-a"][1] == "Invalid"
        assert queues["loop-a"][-2] == "queue hierarchy has a cycle: loop-a -> loop-b -> loop-a"
        assert queues["shut"][1] == "Closed"
        assert queues["shut"][-2] == "spec.state is Closed: no new work is admitted"
        # Two 1-cpu pods run; three 3-cpu groups wait (the node has 4 cpu, 2 are used).
        assert queues["team-a"][:8] == [
            "team-a",
            "Open",
            "research",
            "4 cpu",
            "2 cpu",
            "4 cpu",
            "3",
            "2",
        ]
        assert queues["research"][:7] == [
            "research",
            "Open",
            "8 cpu, 32Gi mem",
            "2 cpu",
            "4 cpu",
            "3",
            "2",
        ]

        wide = rows(await table("bq", "-o", "wide"))
        assert wide["team-a"][8:13] == ["2", "5", "6 cpu", "3", "2"]  # weight .. running groups

        line = rows(await table("bpg", "-o", "wide"))
        assert sorted(int(line[f"wide-{i}"][6]) for i in range(3)) == [1, 2, 3]
        for i in range(3):
            assert line[f"wide-{i}"][5] == "NotEnoughResources"
            assert line[f"wide-{i}"][7] == "3"
            assert line[f"wide-{i}"][8] == (
                "gang needs minMember 1, only 0 could be placed; 0/1 nodes fit: 1 Insufficient cpu"
            )
