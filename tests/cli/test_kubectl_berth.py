"""``kubectl berth``: the kubectl-berth plugin (``queues``, ``why``).

Aspects:
- targets: ``POD``, ``pod/NAME``, ``podgroup/NAME`` and kubectl's other spellings; bad ones;
- node verdicts: each node is attributed to the first filter that rejected it, with that
  filter's reasons, counted as the why-pending text counts them;
- the queue tree: hierarchy through ``spec.parent``, the implicit ``default`` queue, a missing
  parent, a parent cycle and an unreadable object are shown, not hidden; JSON form;
- ``--config``: a profile file or the operator's config file (settings keys left out), a
  schedulerName alone renames the default profile, a bad profile is one line;
- errors: a details-less 404 names the missing resource type (Berth's CRDs for Berth's);
  usage errors (bad ``--top``, unknown kind) exit 2 in one line, before any cluster is asked;
- with the real ``kubectl`` (the venv's bin on PATH) against the emulator seeded with CRDs,
  simulated nodes, queues with status, a waiting gang and a bound pod: ``queues`` prints the
  tree with values and ``-o json``; ``why podgroup/NAME`` prints the condition, the latest
  FailedScheduling Event, the dry run, every node's verdict and the score table (exact lines);
  ``why POD`` on the bound pod shows where it would go and how the nodes score, and ``why``
  on a group whose pods are all placed offers them again; ``why`` writes nothing; an unknown
  pod or group is kubectl's NotFound with exit 1; missing CRDs are named; the group of
  commands without a command prints its help.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import typing
from collections.abc import Iterator

import click
import kubernetes
import numpy as np
import pytest
import yaml

from berth.cli import explaining, kubectl_berth, kubectl_common, queue_trees
from berth.emulator import testing
from berth.kube.transport import errors as kube_errors
from berth.scheduler.framework import filtering, statuses

REPO = pathlib.Path(__file__).resolve().parents[2]
GROUP = "scheduling.berth.io"
VERSION = "v1alpha1"


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        kubectl_berth.main(args)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


# Targets ------------------------------------------------------------------------------------

TARGETS = {
    "bare-name-is-a-pod": ("web-0", kubectl_berth.Target("Pod", "web-0")),
    "pod-slash": ("pod/web-0", kubectl_berth.Target("Pod", "web-0")),
    "po-short": ("po/web-0", kubectl_berth.Target("Pod", "web-0")),
    "podgroup": ("podgroup/train", kubectl_berth.Target("PodGroup", "train")),
    "bpg-short-name": ("bpg/train", kubectl_berth.Target("PodGroup", "train")),
    "qualified": (f"podgroups.{GROUP}/train", kubectl_berth.Target("PodGroup", "train")),
    "kind-case-insensitive": ("PodGroup/train", kubectl_berth.Target("PodGroup", "train")),
}


@pytest.mark.parametrize(("text", "expected"), TARGETS.values(), ids=TARGETS.keys())
def test_targets_in_kubectl_spellings(text: str, expected: kubectl_berth.Target) -> None:
    assert kubectl_berth.parse_target(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("deploy/web", "'deploy' is not a kind why explains: give POD, pod/NAME or podgroup/NAME"),
        ("pod/Web", "'Web' is not a valid name"),
        ("podgroup/", "'' is not a valid name"),
    ],
    ids=["unknown-kind", "upper-case-name", "empty-name"],
)
def test_bad_targets_are_rejected(text: str, message: str) -> None:
    with pytest.raises(click.BadParameter, match="^" + message.replace("(", r"\(")):
        kubectl_berth.parse_target(text)


# Node verdicts --------------------------------------------------------------------------------


def mask(*bits: int) -> np.ndarray[typing.Any, np.dtype[np.bool_]]:
    return np.array([bool(b) for b in bits], dtype=np.bool_)


def test_each_node_is_attributed_to_the_first_filter_that_rejected_it() -> None:
    names = ["a", "b", "c", "d"]
    results = [
        (
            "TaintToleration",
            filtering.NodeFilter(passed=mask(1, 1, 0, 1), reason="untolerated taint {x: y}"),
        ),
        (
            "NodeResourcesFit",
            filtering.NodeFilter(
                passed=mask(1, 0, 0, 0),
                explain=lambda: {
                    "Insufficient cpu": mask(0, 1, 1, 0),
                    "Insufficient memory": mask(0, 1, 0, 0),
                },
            ),
        ),
    ]
    verdicts = explaining.node_verdicts(names, results)
    assert verdicts == (
        explaining.NodeVerdict("a"),
        explaining.NodeVerdict(
            "b", "NodeResourcesFit", ("Insufficient cpu", "Insufficient memory")
        ),
        explaining.NodeVerdict("c", "TaintToleration", ("untolerated taint {x: y}",)),
        explaining.NodeVerdict("d", "NodeResourcesFit", ("rejected by NodeResourcesFit",)),
    )
    # The same attribution as the why-pending text's counts.
    summary = filtering.unplaceable(results, rows=4)
    assert summary.message() == (
        "1/4 nodes fit: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 rejected by NodeResourcesFit, 1 untolerated taint {x: y}"
    )
    assert summary.code is statuses.Code.UNSCHEDULABLE


# Queue trees ----------------------------------------------------------------------------------


def queue(name: str, **spec: typing.Any) -> dict[str, typing.Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def names(trees: typing.Sequence[queue_trees.QueueNode], depth: int = 0) -> list[str]:
    out: list[str] = []
    for node in trees:
        out.append("  " * depth + node.name + (f" ({node.problem})" if node.problem else ""))
        out += names(node.children, depth + 1)
    return out


def test_queue_tree_follows_parents_and_shows_every_queue() -> None:
    trees = queue_trees.build(
        [
            queue("team-b", parent="research"),
            queue("research", guaranteed={"cpu": "16"}),
            queue("team-a", parent="research", weight=3),
            queue("lost", parent="gone"),
            queue("x", parent="y"),
            queue("y", parent="x"),
            queue("broken", weight=0),
        ]
    )
    assert names(trees) == [
        "broken (cannot be read: spec.weight: Input should be greater than or equal to 1)",
        "default",
        "lost (parent queue gone does not exist)",
        "research",
        "  team-a",
        "  team-b",
        "x (in a parent cycle (parent y))",
        "  y",
    ]
    default = next(t for t in trees if t.name == "default")
    assert default.implicit


def test_queue_tree_as_json_keeps_status_values_and_nests_children() -> None:
    research = queue("research", guaranteed={"cpu": "16"})
    research["status"] = {
        "fairShare": {"cpu": "16"},
        "allocated": {"cpu": "2500m"},
        "pending": 1,
        "running": 2,
        "conditions": [{"type": "Valid", "status": "True", "reason": "Valid"}],
    }
    data = queue_trees.to_json(
        queue_trees.build([research, queue("team-a", parent="research"), queue("default")])
    )
    assert [q["name"] for q in data["queues"]] == ["default", "research"]
    top = data["queues"][1]
    assert top["guaranteed"] == {"cpu": "16"}
    assert (top["fairShare"], top["allocated"], top["requested"]) == (
        {"cpu": "16"},
        {"cpu": "2500m"},
        None,
    )
    assert (top["pending"], top["running"]) == (1, 2)
    assert top["conditions"] == [{"type": "Valid", "status": "True", "reason": "Valid"}]
    assert [c["name"] for c in top["children"]] == ["team-a"]
    assert "implicit" not in data["queues"][0]


# Profiles ---------------------------------------------------------------------------------------

PROFILES = {
    "no-file-default-profile": (None, None, "berth-scheduler", "BalancedAllocation"),
    "scheduler-name-flag": (None, "batch", "batch", "BalancedAllocation"),
    "operator-config-with-settings": (
        "logLevel: debug\nschedulerName: gpu\nactions: [allocate]\n"
        "plugins:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n"
        "  - name: DefaultBinder\n",
        None,
        "gpu",
        "NodeResourcesFit",
    ),
    "scheduler-name-alone-renames-default": (
        "schedulerName: other\nlogLevel: info\n",
        None,
        "other",
        "BalancedAllocation",
    ),
}


@pytest.mark.parametrize(
    ("text", "flag", "scheduler_name", "scorer"), PROFILES.values(), ids=PROFILES.keys()
)
def test_profile_from_config_file_or_default(
    text: str | None,
    flag: str | None,
    scheduler_name: str,
    scorer: str,
    tmp_path: pathlib.Path,
) -> None:
    path = None
    if text is not None:
        path = tmp_path / "profile.yaml"
        path.write_text(text)
    profile = kubectl_berth.load_profile(path, scheduler_name=flag)
    assert profile.scheduler_name == scheduler_name
    assert scorer in [p.name for p in profile.enabled()]


def test_a_bad_profile_is_one_line(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("plugins:\n  - name: Gang\n    weight: 0\n")
    with pytest.raises(click.ClickException) as raised:
        kubectl_berth.load_profile(path, scheduler_name=None)
    message = raised.value.format_message()
    assert "\n" not in message
    assert message.startswith(f"--config: {path} is not a valid profile: plugins[0].weight")


# Error lines ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("what", "details", "line"),
    [
        (
            f"GET /apis/{GROUP}/{VERSION}/queues",
            None,
            "error: the server doesn't have a resource type \"queues\": install Berth's CRDs "
            "(the Helm chart, or kubectl apply -f crds/)",
        ),
        (
            f"POST /apis/{GROUP}/{VERSION}/namespaces/ns/reservations",
            None,
            "error: the server doesn't have a resource type \"reservations\": install Berth's "
            "CRDs (the Helm chart, or kubectl apply -f crds/)",
        ),
        (
            "GET /apis/scheduling.k8s.io/v1/priorityclasses",
            None,
            'error: the server doesn\'t have a resource type "priorityclasses"',
        ),
        (
            "GET /api/v1/namespaces/ns/pods/web",
            {"name": "web", "kind": "pods"},
            'Error from server (NotFound): pods "web" not found',
        ),
    ],
    ids=["berth-collection", "berth-namespaced", "core-collection", "named-object"],
)
def test_not_found_lines(what: str, details: dict[str, str] | None, line: str) -> None:
    body: dict[str, typing.Any] = {"reason": "NotFound", "message": 'pods "web" not found'}
    if details is not None:
        body["details"] = details
    exc = kube_errors.from_status(404, body=body, what=what)
    assert kubectl_common.api_error_line(exc) == line


@pytest.mark.parametrize(
    ("args", "start", "where"),
    [
        (["why", "web", "--top", "0"], "error: Invalid value for '--top'", "kubectl berth why"),
        (["why", "web", "--top", "x"], "error: Invalid value for '--top'", "kubectl berth why"),
        (
            ["why", "deploy/web"],
            "error: Invalid value for 'POD|podgroup/NAME': 'deploy' is not a kind",
            "kubectl berth why",
        ),
        (["why"], "error: Missing argument 'POD|podgroup/NAME'", "kubectl berth why"),
        (["queues", "-o", "wide"], "error: Invalid value for '-o'", "kubectl berth queues"),
        (["nodes"], "error: No such command 'nodes'", "kubectl berth"),
    ],
    ids=["top-zero", "top-not-a-number", "unknown-kind", "no-target", "bad-output", "unknown"],
)
def test_usage_errors_are_one_line_with_exit_2(
    args: list[str],
    start: str,
    where: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))  # never reached
    code, out, err = run_main(args, capsys)
    assert (code, out) == (2, "")
    assert err.startswith(start)
    assert err.endswith(f" (see '{where} --help')\n")
    assert err.count("\n") == 1


def test_no_kubeconfig_is_one_line_with_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, out, err = run_main(["queues"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("error: no kubeconfig found")
    assert err.count("\n") == 1


# Real kubectl against a seeded emulator ---------------------------------------------------------
#
# Nodes: a-0 (4 cpu, 8Gi), b-0 (2 cpu, 4Gi), c-0 (8 cpu, 16Gi, tainted dedicated=gpu). The pod
# "web" (1 cpu) is bound to a-0. The gang "big" (minMember 3, 2 cpu per pod; priorities order its
# pods big-0, big-1, big-2) gets big-0 onto a-0 and big-1 onto b-0, and then nothing fits big-2.

POOLS = [
    "1x cpu=4,memory=8Gi name=a",
    "1x cpu=2,memory=4Gi name=b",
    "1x cpu=8,memory=16Gi taint=dedicated=gpu:NoSchedule name=c",
]
WHY_PENDING = (
    "gang needs minMember 3, only 2 could be placed; "
    "0/3 nodes fit: 2 Insufficient cpu, 1 untolerated taint {dedicated: gpu}"
)


class Kubectl(typing.Protocol):
    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]: ...


def kubectl_with_plugin(emulator: testing.RunningEmulator) -> Kubectl:
    """The real kubectl, the venv's bin (where the plugin is) on PATH, 120 columns."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        environment = emulator.env()
        bin_dir = str(pathlib.Path(sys.executable).parent)
        environment["PATH"] = bin_dir + os.pathsep + environment.get("PATH", "")
        environment["COLUMNS"] = "120"
        return subprocess.run(
            [testing.kubectl_binary(), *args],
            capture_output=True,
            text=True,
            env=environment,
            timeout=60,
            check=False,
        )

    return run


def pod(name: str, *, cpu: str, **extra: typing.Any) -> dict[str, typing.Any]:
    labels = extra.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.37",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                }
            ],
            **extra,
        },
    }


def seed(emulator: testing.RunningEmulator) -> None:
    """CRDs, nodes, queues (with the status the queue controller would write), the gang with
    its Scheduled condition and Events, and the bound pod — through the Python client."""
    api = kubernetes.config.new_client_from_config(config_file=str(emulator.kubeconfig))
    try:
        extensions = kubernetes.client.ApiextensionsV1Api(api)
        for path in sorted((REPO / "crds").glob("*.yaml")):
            extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        emulator.start_kubelets(POOLS, speedup=100.0, start_delay=0.0)
        scheduling = kubernetes.client.SchedulingV1Api(api)
        for name, value in (("first", 300), ("second", 200), ("third", 100)):
            scheduling.create_priority_class(
                {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": name}, "value": value}
            )  # fmt: skip
        custom = kubernetes.client.CustomObjectsApi(api)
        research = queue("research", guaranteed={"cpu": "4"})
        team_a = queue(
            "team-a", parent="research", guaranteed={"cpu": "2", "memory": "4Gi"},
            limit={"cpu": "12"}, weight=3, priority=10,
        )  # fmt: skip
        for obj, status in (
            (research, {"fairShare": {"cpu": "14"}, "allocated": {"cpu": "1", "memory": "1Gi"},
                        "children": ["team-a"], "pending": 1, "running": 0, "state": "Open",
                        "pendingPods": 3, "runningPods": 1}),
            (team_a, {"fairShare": {"cpu": "12", "memory": "4Gi"},
                      "allocated": {"cpu": "1", "memory": "1Gi"},
                      "requested": {"cpu": "6", "memory": "3Gi"}, "pending": 1, "running": 0,
                      "state": "Open", "pendingPods": 3, "runningPods": 1,
                      "conditions": [{"type": "Valid", "status": "True", "reason": "Valid",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        ):  # fmt: skip
            custom.create_cluster_custom_object(GROUP, VERSION, "queues", obj)
            custom.patch_cluster_custom_object_status(
                GROUP, VERSION, "queues", obj["metadata"]["name"], {"status": status}
            )
        group = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": "big"},
            "spec": {"minMember": 3, "queue": "team-a"},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", group)
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", "podgroups", "big",
            {"status": {"phase": "Pending", "conditions": [
                {"type": "Scheduled", "status": "False", "reason": "NotEnoughResources",
                 "message": WHY_PENDING, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        )  # fmt: skip
        solo = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": "solo"},
            "spec": {"minMember": 1},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", solo)
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespaced_pod("default", pod("web", cpu="1", nodeName="a-0"))
        # A placed group of one on the tainted node, which it tolerates (the gang does not).
        core.create_namespaced_pod(
            "default",
            pod(
                "solo-0",
                cpu="1",
                labels={f"{GROUP}/pod-group": "solo"},
                nodeName="c-0",
                tolerations=[{"key": "dedicated", "operator": "Exists"}],
            ),
        )
        for index, priority in enumerate(("first", "second", "third")):
            core.create_namespaced_pod(
                "default",
                pod(
                    f"big-{index}",
                    cpu="2",
                    labels={f"{GROUP}/pod-group": "big"},
                    priorityClassName=priority,
                ),
            )
        for name, kind, when, count in (
            ("big.1", "PodGroup", "2026-01-01T00:05:00Z", 3),
            ("big-2.1", "Pod", "2026-01-01T00:01:00Z", 1),
        ):
            core.create_namespaced_event(
                "default",
                {
                    "apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": name, "namespace": "default"},
                    "involvedObject": {"kind": kind, "name": name.split(".")[0],
                                       "namespace": "default"},
                    "reason": "FailedScheduling", "type": "Warning", "message": WHY_PENDING,
                    "firstTimestamp": when, "lastTimestamp": when, "count": count,
                },
            )  # fmt: skip
    finally:
        api.close()
    emulator.kubectl("wait", "pod/web", "--for=jsonpath={.status.phase}=Running", "--timeout=20s")


@pytest.fixture(scope="module")
def cluster(module_emulator: testing.RunningEmulator) -> Iterator[testing.RunningEmulator]:
    seed(module_emulator)
    yield module_emulator


@pytest.fixture(scope="module")
def kubectl_berth_run(cluster: testing.RunningEmulator) -> Kubectl:
    return kubectl_with_plugin(cluster)


def writes(cluster: testing.RunningEmulator) -> int:
    return sum(n for (method, _), n in cluster.server.requests_by_path.items() if method != "GET")


def test_queues_shows_the_tree_with_values(kubectl_berth_run: Kubectl) -> None:
    result = kubectl_berth_run("berth", "queues")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "queues",
        "├── default  implicit (no Queue object): weight 1 · priority 0 · Open",
        "└── research  weight 1 · priority 0 · Open · pods 3 pending, 1 running · podgroups 1 "
        "pending, 0 running",
        "    guaranteed  cpu 4",
        "    limit       -",
        "    fair share  cpu 14",
        "    allocated   cpu 1, memory 1Gi",
        "    requested   -",
        "    cpu         █░░░░░░░░░░░░░░░░░░░  1 of fair share 14 (guaranteed 4)",
        "    memory      ████████████████████  1Gi of fair share 0 (guaranteed 0)",
        "    └── team-a  weight 3 · priority 10 · Open · pods 3 pending, 1 running · podgroups 1 "
        "pending, 0 running",
        "        guaranteed  cpu 2, memory 4Gi",
        "        limit       cpu 12",
        "        fair share  cpu 12, memory 4Gi",
        "        allocated   cpu 1, memory 1Gi",
        "        requested   cpu 6, memory 3Gi",
        "        cpu         ██░░░░░░░░░░░░░░░░░░  1 of fair share 12 (guaranteed 2)",
        "        memory      █████░░░░░░░░░░░░░░░  1Gi of fair share 4Gi (guaranteed 4Gi)",
        "        conditions  Valid=True (Valid)",
    ]


def in_process(
    cluster: testing.RunningEmulator,
    args: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[int, str, str]:
    """The plugin's ``main`` in this process (no kubectl: faster), against ``cluster``."""
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    monkeypatch.setenv("COLUMNS", "120")
    return run_main(args, capsys)


def test_queues_as_json(
    cluster: testing.RunningEmulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = in_process(cluster, ["queues", "-o", "json"], capsys, monkeypatch)
    assert (code, err) == (0, "")
    data = json.loads(out)
    research = data["queues"][1]
    team_a = research["children"][0]
    assert (team_a["name"], team_a["weight"], team_a["priority"]) == ("team-a", 3, 10)
    assert team_a["limit"] == {"cpu": "12"}
    assert team_a["requested"] == {"cpu": "6", "memory": "3Gi"}


def test_why_a_waiting_gang_gives_its_reason_and_every_node(
    cluster: testing.RunningEmulator, kubectl_berth_run: Kubectl
) -> None:
    before = writes(cluster)
    result = kubectl_berth_run("berth", "why", "podgroup/big", "--top", "3")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "PodGroup default/big: queue team-a, minMember 3, phase Pending",
        f"  Scheduled=False (NotEnoughResources): {WHY_PENDING}",
        f"  last FailedScheduling event: 2026-01-01T00:05:00Z on PodGroup big (x3): {WHY_PENDING}",
        "",
        "Dry run of berth-scheduler over 3 nodes (nothing is written):",
        f"  group default/big: {WHY_PENDING}",
        "  default/big-0  pending: waits for its group (on its own it fits: best node a-0)",
        "  default/big-1  pending: waits for its group (on its own it fits: best node b-0)",
        "  default/big-2  pending: 0/3 nodes fit: 2 Insufficient cpu, 1 untolerated taint "
        "{dedicated: gpu}",
        "",
        "Nodes for default/big-2 (allocate):",
        "  NODE  VERDICT                             PLUGIN",
        "  a-0   Insufficient cpu                    NodeResourcesFit",
        "  b-0   Insufficient cpu                    NodeResourcesFit",
        "  c-0   untolerated taint {dedicated: gpu}  TaintToleration",
        "  0/3 nodes fit: 2 Insufficient cpu, 1 untolerated taint {dedicated: gpu}",
        "",
        "Scores for default/big-0 (allocate):",
        "  default/big-0: top 2 of 2 feasible nodes",
        "  | node | NodeResourcesFit | BalancedAllocation | total |",
        "  |---|---:|---:|---:|",
        "  | a-0 | 50 | 75 | 125 |",
        "  | b-0 | 37 | 62 | 99 |",
    ]
    assert writes(cluster) == before  # read-only


def test_why_a_bound_pod_shows_where_it_would_go_and_how_nodes_score(
    cluster: testing.RunningEmulator, kubectl_berth_run: Kubectl
) -> None:
    before = writes(cluster)
    result = kubectl_berth_run("berth", "why", "solo-0", "--top", "1")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "Pod default/solo-0: bound to c-0, phase Running, scheduler berth-scheduler",
        "  PodGroup default/solo: no Scheduled condition yet (is Berth's operator running?)",
        "  no FailedScheduling events",
    ]
    assert "  default/solo-0  bound to c-0; offered again now, it would go to c-0" in lines
    scores = lines[lines.index("Scores for default/solo-0 (allocate):") + 1 :]
    assert scores[0] == "  default/solo-0: top 1 of 3 feasible nodes"
    assert scores[3].startswith("  | c-0 |")
    assert len(scores) == 4
    assert writes(cluster) == before


def test_why_a_bound_plain_pod_is_offered_again_in_its_queue(
    cluster: testing.RunningEmulator, kubectl_berth_run: Kubectl
) -> None:
    # "web" names no group or queue: like the operator, the dry run charges it to the queue
    # default, which comes after team-a (priority 10). Offered again, the room it frees on a-0
    # lets the gang "big" start whole first, and web would wait.
    result = kubectl_berth_run("berth", "why", "web", "--top", "1")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "Pod default/web: bound to a-0, phase Running, scheduler berth-scheduler",
        "  no FailedScheduling events",
    ]
    verdict = "0/3 nodes fit: 2 Insufficient cpu, 1 untolerated taint {dedicated: gpu}"
    assert f"  default/web  bound to a-0; offered again now, it would stay pending: {verdict}" in (
        lines
    )
    nodes = lines[lines.index("Nodes for default/web (allocate):") + 1 :]
    assert [row.split()[:2] for row in nodes[1:4]] == [
        ["a-0", "Insufficient"],
        ["b-0", "Insufficient"],
        ["c-0", "untolerated"],
    ]


def test_why_a_gang_member_names_its_group_and_own_events(
    cluster: testing.RunningEmulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = ["why", "pod/big-2", "-n", "default"]
    code, out, err = in_process(cluster, args, capsys, monkeypatch)
    assert (code, err) == (0, "")
    assert out.splitlines()[:3] == [
        "Pod default/big-2: not bound, phase Pending, scheduler berth-scheduler",
        f"  PodGroup default/big: Scheduled=False (NotEnoughResources): {WHY_PENDING}",
        f"  last FailedScheduling event: 2026-01-01T00:01:00Z on Pod big-2: {WHY_PENDING}",
    ]


def test_why_a_placed_group_offers_its_pods_again(
    cluster: testing.RunningEmulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = in_process(cluster, ["why", "podgroup/solo"], capsys, monkeypatch)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "PodGroup default/solo: queue default, minMember 1, phase Pending"
    assert lines[1] == "  no Scheduled condition yet (is Berth's operator running?)"
    assert "  default/solo-0  bound to c-0; offered again now, it would go to c-0" in lines
    assert "Scores for default/solo-0 (allocate):" in lines


def test_a_group_of_commands_without_one_prints_its_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main([], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("Usage: kubectl berth [OPTIONS] COMMAND [ARGS]...")
    assert "kubectl berth why podgroup/train" in out


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["why", "nope"], 'Error from server (NotFound): pods "nope" not found'),
        (
            ["why", "podgroup/nope"],
            f'Error from server (NotFound): podgroups.{GROUP} "nope" not found',
        ),
        (["why", "web", "-n", "elsewhere"], 'Error from server (NotFound): pods "web" not found'),
    ],
    ids=["unknown-pod", "unknown-group", "other-namespace"],
)
def test_unknown_targets_read_as_kubectl_not_found(
    cluster: testing.RunningEmulator,
    args: list[str],
    line: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert in_process(cluster, args, capsys, monkeypatch) == (1, "", line + "\n")


def test_bad_top_through_kubectl_exits_2(kubectl_berth_run: Kubectl) -> None:
    result = kubectl_berth_run("berth", "why", "web", "--top", "-1")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: Invalid value for '--top'")
    assert result.stderr.count("\n") == 1


def test_missing_crds_are_named(emulator: testing.RunningEmulator) -> None:
    result = kubectl_with_plugin(emulator)("berth", "queues")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "error: the server doesn't have a resource type \"queues\": install Berth's CRDs "
        "(the Helm chart, or kubectl apply -f crds/)\n"
    )
