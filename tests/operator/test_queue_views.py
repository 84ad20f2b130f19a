"""What ``kubectl get bq`` and ``kubectl get bpg`` show about queues and the line in them.

We test these aspects (the operator in the test's loop, the emulator with simulated nodes,
everything read with the real ``kubectl``):

- ``kubectl get bq`` has a State column: a queue whose parent does not exist and queues in a
  cycle are ``Invalid`` with the reason, a closed queue ``Closed``, a healthy one ``Open``;
  guaranteed, allocated and fair share read as short text of the main resources; Pending and
  Running count pods (the subtree's, for a parent);
- ``kubectl get bq -o wide`` adds weight, priority, limit and the PodGroup counts;
- ``kubectl get bpg`` shows each waiting group's position in its queue's line, ``-o wide``
  how many wait and the full reason;
- the operator's visibility API agrees: ``/berth/v1/queues`` (states and counts), the line of
  a queue a page at a time (``limit``, ``continue``), a PodGroup's position and its queue's
  share; an unknown queue or group is 404 with a message, a bad page size 400;
  ``/berth/v1/overview`` and ``/dashboard`` answer;
- ``kubectl berth queue team-a`` prints the line with positions and reasons, from the
  PodGroups' status and from the operator's API alike; an unknown queue is an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import re
import subprocess
import sys
import typing

import aiohttp
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


PLUGIN = str(pathlib.Path(sys.executable).parent / "kubectl-berth")


async def plugin(emulator: testing.RunningEmulator, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env |= {"KUBECONFIG": str(emulator.kubeconfig), "COLUMNS": "200"}
    return await asyncio.to_thread(
        subprocess.run,
        [PLUGIN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def get(port: int, path: str) -> tuple[int, typing.Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as answer,
    ):
        text = await answer.text()
        is_json = answer.content_type == "application/json"
        return answer.status, json.loads(text) if is_json else text


async def test_queue_states_usage_and_the_line(emulator: testing.RunningEmulator) -> None:
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=30)
    async with running.operator_on(emulator) as port:
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

        # Weight .. running groups. The groups' counts are written after the pods' (a pass of
        # the status writer may fall between the two tables): wait for them as above.
        expected = ["2", "5", "6 cpu", "3", "2"]
        wide: dict[str, list[str]] = {}
        for _ in range(200):
            wide = rows(await table("bq", "-o", "wide"))
            if wide["team-a"][8:13] == expected:
                break
        assert wide["team-a"][8:13] == expected

        line = rows(await table("bpg", "-o", "wide"))
        assert sorted(int(line[f"wide-{i}"][6]) for i in range(3)) == [1, 2, 3]
        for i in range(3):
            assert line[f"wide-{i}"][5] == "NotEnoughResources"
            assert line[f"wide-{i}"][7] == "3"
            # minMember 1 is no gang: no "gang needs minMember 1".
            assert (
                line[f"wide-{i}"][8] == "no pod could be placed; 0/1 nodes fit: 1 Insufficient cpu"
            )

        # The same, from the operator's visibility API.
        status, body = await get(port, "/berth/v1/queues")
        assert status == 200
        by_name = {q["name"]: q for q in body["items"]}
        assert (by_name["orphan"]["state"], by_name["orphan"]["stateReason"]) == (
            "Invalid",
            "parent queue nowhere does not exist",
        )
        assert by_name["shut"]["state"] == "Closed"
        team = by_name["team-a"]
        assert (team["state"], team["pendingPods"], team["runningPods"], team["waiting"]) == (
            "Open",
            3,
            2,
            3,
        )
        ordered = sorted(range(3), key=lambda i: int(line[f"wide-{i}"][6]))
        status, first = await get(port, "/berth/v1/queues/team-a/waiting?limit=2")
        assert status == 200
        assert (first["total"], first["continue"]) == (3, "2")
        assert [(g["position"], g["name"]) for g in first["items"]] == [
            (1, f"wide-{ordered[0]}"),
            (2, f"wide-{ordered[1]}"),
        ]
        assert first["items"][0]["reason"] == (
            "no pod could be placed; 0/1 nodes fit: 1 Insufficient cpu"
        )
        status, rest = await get(port, "/berth/v1/queues/team-a/waiting?limit=2&continue=2")
        assert [(g["position"], g["name"]) for g in rest["items"]] == [(3, f"wide-{ordered[2]}")]
        assert "continue" not in rest
        status, where = await get(
            port, f"/berth/v1/namespaces/default/podgroups/wide-{ordered[1]}/position"
        )
        assert (status, where["queue"], where["position"], where["waiting"]) == (
            200,
            "team-a",
            2,
            3,
        )
        assert where["queueShare"]["allocated"] == "2 cpu"
        assert await get(port, "/berth/v1/queues/nowhere/waiting") == (
            404,
            {"error": "queue 'nowhere' does not exist"},
        )
        assert await get(port, "/berth/v1/namespaces/default/podgroups/nobody/position") == (
            404,
            {"error": "podgroup 'default/nobody' does not exist (or is not Berth's)"},
        )
        assert await get(port, "/berth/v1/queues/team-a/waiting?limit=100000") == (
            400,
            {"error": "limit must be between 1 and 500, got 100000"},
        )
        status, overview = await get(port, "/berth/v1/overview")
        assert status == 200
        assert {q["name"] for q in overview["queues"]} >= {"team-a", "orphan", "shut"}
        assert [n["name"] for n in overview["nodes"]] == ["pool0-0"]
        assert overview["resources"][0] == "cpu"
        (team_a,) = [q for q in overview["queues"] if q["name"] == "team-a"]
        amounts = team_a["amounts"]  # milli-units, the numbers the dashboard draws
        assert (amounts["allocated"]["cpu"], amounts["fairShare"]["cpu"]) == (2000, 4000)
        assert amounts["guaranteed"]["cpu"] == 4000
        status, page = await get(port, "/dashboard")
        assert status == 200 and "/berth/v1/overview" in page

        for extra in ([], ["--operator", f"http://127.0.0.1:{port}"]):
            described = await plugin(emulator, "queue", "team-a", *extra)
            assert described.returncode == 0, described.stderr
            lines = described.stdout.splitlines()
            assert lines[0] == (
                "queue team-a  Open · pods 3 pending, 2 running · allocated 2 cpu of fair share "
                "4 cpu (guaranteed 4 cpu)"
            )
            assert lines[1].split() == ["POSITION", "KIND", "NAME", "WHY", "IT", "WAITS"]
            for place, index in enumerate(ordered, start=1):
                assert re.match(
                    rf"{place}/3\s+PodGroup\s+default/wide-{index}\s+no pod could be placed; "
                    r"0/1 nodes fit: 1 Insufficient cpu$",
                    lines[1 + place],
                ), described.stdout
            assert lines[-1] == "3 waiting"
            missing = await plugin(emulator, "queue", "nowhere", *extra)
            assert missing.returncode == 1
            assert 'queue "nowhere" not found' in missing.stderr or (
                "queue 'nowhere' does not exist" in missing.stderr
            ), missing.stderr
            typo = await plugin(emulator, "queue", "team-z", *extra)
            assert typo.returncode == 1
            assert 'queue "team-z" not found (did you mean team-a?)' in typo.stderr, typo.stderr
