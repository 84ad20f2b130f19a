"""What docs/*.md say a command prints or shows is checked by tests, claim by claim.

We test these aspects:

- every passage of docs/*.md that names a command (``berth ...``, ``kubectl ...``, ``helm ...``,
  ``hack/...``) and says what it prints, shows, lists, reports or answers, and every block of
  output (a ``console`` or ``text`` block, or a bare one), is in :data:`CLAIMS`: either with the
  tests that check what it says, each of which exists, or with why it states no command's
  output (a measurement with its command, a description of code); so a passage cannot be added
  or reworded without saying which test checks it (the README's table is checked the same way,
  by ``tests/docs/test_readme_using_it.py``);
- the claims no other test checks, run here as a user would: docs/workloads.md's ``kubectl get
  bpg`` of a Job that waits, the header and the row as the page prints them, and the group's
  ``derived-from`` annotation.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re
import shlex

import pytest

from tests.workloads import cluster
from tests.workloads.test_berth_up import Namespace, job_object, job_pods, pod

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HERE = "tests/docs/test_doc_claims.py"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A passage of ``doc`` (found by ``says``, whitespace aside) and the tests that check it;
    no tests, then ``why`` it states no command's output."""

    doc: str
    says: str
    tests: tuple[str, ...] = ()
    why: str = ""


_MEASURED = "a measurement: numbers from one run, with the command that produced them"
_DESIGN = "describes code or design, no command's output"
_DIAGRAM = "a diagram of the code, no command's output"

CLAIMS = (
    # admission.md
    Claim(
        "admission.md",
        "Both print which pods the webhook gates and how to opt a namespace in",
        (
            "tests/cli/test_up.py::test_up_in_admission_mode_gates_and_the_stand_in_binder_binds_what_berth_admits",
            "tests/realcluster/test_up_real.py::test_up_real_from_a_fresh_install_in_admission_mode_writes_the_kubeconfig_asked",
            "tests/realcluster/test_up_real.py::test_up_real_gating_every_namespace_shows_the_default_queues_usage",
        ),
    ),
    Claim(
        "admission.md",
        "With `all`, every pod of every namespace but `kube-system`",
        (
            "tests/packaging/test_chart_install.py::test_admission_of_all_namespaces_gates_every_namespace_not_labelled_disabled",
            "tests/realcluster/test_workloads.py::test_every_namespace_is_gated_with_the_chart_value_and_a_plain_job_starts_whole",
            "tests/workloads/test_berth_up.py::test_admission_of_every_namespace_gates_a_plain_job_whole",
            "tests/cli/test_up_webhooks.py::test_the_embedded_clusters_webhooks_are_the_charts",
        ),
    ),
    Claim(
        "admission.md",
        "the pod gets an `AdmissionBypassed` Warning, and is charged to no queue",
        (
            "tests/realcluster/test_queue_squatting.py::test_squatters_are_charged_nowhere_and_the_tenant_keeps_its_limit",
        ),
    ),
    # architecture.md
    Claim("architecture.md", "the `berth` console script, kubectl plugins", why=_DIAGRAM),
    Claim("architecture.md", "kube.informers.cluster_informers.ClusterInformers", why=_DIAGRAM),
    Claim("architecture.md", "|-- Lease renewals (operator/leadership.py)", why=_DIAGRAM),
    Claim("architecture.md", "is one process with one asyncio event loop", why=_DESIGN),
    Claim("architecture.md", "travels unchanged from the plugin that rejects", why=_DESIGN),
    Claim("architecture.md", "Consumers decide on the code", why=_DESIGN),
    Claim("architecture.md", "Nothing parses a message", why=_DESIGN),
    Claim("architecture.md", "**Where they live, and why there.**", why=_DESIGN),
    Claim("architecture.md", "parked job, the parking lot; a job *wakes*", why=_DESIGN),
    # autoscaling.md
    Claim(
        "autoscaling.md",
        "then each pod's `FailedScheduling` Event",
        (
            "tests/cli/test_up.py::test_up_keeps_its_kubeconfig_in_the_state_directory_and_describe_shows_why",
            "tests/scheduler/autoscaling/test_pending_decision.py",
        ),
    ),
    Claim(
        "autoscaling.md",
        "**Leaving whole nodes empty.**",
        (
            "tests/sim/test_examples.py::test_packing_leaves_whole_nodes_for_an_autoscaler_to_remove",
        ),
    ),
    Claim(
        "autoscaling.md",
        "queue a's preemptionDelay 2m0s ends in 1m50s",
        (
            "tests/scheduler/autoscaling/test_preemption_window.py::test_inside_the_window_nothing_is_evicted_and_nodes_are_asked_for",
        ),
    ),
    Claim(
        "autoscaling.md",
        "**What is said.** Berth lists its requests every few seconds",
        (
            "tests/kube/test_capacity_requests.py::test_group_reasons_carry_the_notes",
            "tests/kube/test_capacity_requests.py::test_a_gated_gang_asks_with_a_buffer_until_it_is_placed",
        ),
    ),
    Claim(
        "autoscaling.md",
        "asked the autoscaler for 6 pods' capacity with CapacityBuffer",
        (
            "tests/kube/test_capacity_requests.py::test_a_gated_gang_asks_with_a_buffer_until_it_is_placed",
            "tests/kube/test_capacity_requests.py::test_group_reasons_carry_the_notes",
        ),
    ),
    Claim(
        "autoscaling.md",
        "What the autoscaler did for a group waiting for capacity is said on the group as data",
        (
            "tests/status/test_scale_up.py",
            "tests/status/test_podgroups.py::test_a_waiting_group_says_what_the_autoscaler_did_and_a_placed_one_not",
            "tests/kube/test_capacity_requests.py::test_karpenter_unable_to_fit_a_member_is_said_on_the_group",
            "tests/kube/test_capacity_requests.py::test_no_autoscaler_acting_is_said_after_the_timeout_then_its_plan",
            "tests/kube/test_capacity_requests.py::test_a_provisioning_request_refused_is_said_and_asked_again",
        ),
    ),
    Claim(
        "autoscaling.md",
        "Karpenter cannot place 2 of its 2 waiting pods on any node",
        (
            "tests/realcluster/test_autoscaling.py::test_a_gang_no_node_shape_fits_buys_nothing_and_is_told_why",
            "tests/kube/test_capacity_requests.py::test_karpenter_unable_to_fit_a_member_is_said_on_the_group",
        ),
    ),
    Claim(
        "autoscaling.md",
        "The settings (`berth run`, `BERTH_AUTOSCALING__*`)",
        why="names settings and the RBAC they need, no command's output",
    ),
    Claim(
        "autoscaling.md",
        "`kubectl get capacitybuffers -A` shows Berth's buffer",
        (
            "tests/realcluster/test_autoscaling.py::test_a_reservation_grows_the_cluster_and_keeps_its_node_while_it_holds_it",
            "tests/kube/test_capacity_requests.py::test_a_reservation_buffer_lives_with_the_reservation",
        ),
    ),
    # emulator.md
    Claim(
        "emulator.md",
        "# creates/s, binds/s, watch events/s (JSON)",
        (
            "tests/emulator/test_cli.py::test_bench_prints_one_json_object",
            "tests/emulator/test_cli.py::test_standalone_server_with_nodes",
        ),
    ),
    Claim(
        "emulator.md", "No authentication or authorization (every request is allowed)", why=_DESIGN
    ),
    Claim(
        "emulator.md",
        "label and field selectors, Table output, kubectl's protobuf bodies",
        (
            "tests/conformance/test_api_behaviour.py::test_table_output_and_protobuf_bodies",
            "tests/conformance/test_api_behaviour.py::test_a_gated_pod_is_created_pod_scheduled_false_scheduling_gated",
            "tests/conformance/test_api_behaviour.py::test_apply_of_a_list_with_validation",
            "tests/conformance/test_api_behaviour.py::test_job_table_columns",
        ),
    ),
    Claim(
        "emulator.md",
        "sees a bad item refused naming its field",
        ("tests/conformance/test_api_behaviour.py::test_apply_of_a_list_with_validation",),
    ),
    Claim(
        "emulator.md",
        "Job columns (STATUS, COMPLETIONS, DURATION, AGE; CONTAINERS, IMAGES, SELECTOR wide)",
        ("tests/conformance/test_api_behaviour.py::test_job_table_columns",),
    ),
    # fair-share.md
    Claim(
        "fair-share.md",
        "`kubectl berth queues` and the Queue's `status.fairShare` show it",
        (
            "tests/cli/test_kubectl_berth.py::test_queues_shows_the_tree_with_values",
            "tests/operator/test_queue_views.py::test_queue_states_usage_and_the_line",
        ),
    ),
    Claim(
        "fair-share.md",
        "`berth sim` reports, per queue, the allocation over time against the fair share",
        (
            "tests/cli/test_sim.py::test_a_scenario_runs_to_a_json_report_and_a_plot",
            "tests/sim/test_examples.py::test_fair_share_reclaim_reaches_the_weighted_split_within_ten_minutes",
        ),
    ),
    Claim(
        "fair-share.md",
        "a job's `evictedFor` in the report lists why each eviction was",
        (
            "tests/sim/test_max_execution_time.py::test_a_gang_past_its_queues_limit_is_evicted_whole_and_runs_again",
            "tests/sim/test_max_execution_time.py::test_a_group_asking_to_fail_is_failed_and_its_room_goes_to_the_next_job",
        ),
    ),
    # gpu.md
    Claim(
        "gpu.md",
        "races Berth, kube-scheduler and a null scheduler on scheduler_perf's",
        why=_MEASURED,
    ),
    Claim(
        "gpu.md",
        "`berth bench gpu-sharing --seeds 3` (one JSON object",
        (
            "tests/cli/test_bench.py::test_gpu_sharing_prints_one_object_per_run",
            "tests/sim/test_gpu_sharing_sim.py::test_the_bench_compares_policies_on_the_same_arrivals",
        ),
    ),
    Claim(
        "gpu.md",
        "places as before within a tenth of a point",
        ("tests/sim/test_gpu_trace.py::test_the_whole_trace_gives_what_the_readme_says",),
    ),
    Claim(
        "gpu.md",
        "gives each simulated node 8 devices of a fake driver",
        (
            "tests/emulator/test_kubelets.py::test_pools_with_devices_publish_a_fake_drivers_slices",
            "tests/cli/test_up_dra.py::test_a_gang_waits_for_every_members_devices_then_starts_whole",
        ),
    ),
    Claim(
        "gpu.md",
        "devices for resourceclaim default/train-3-gpu-x7k2p",
        (
            "tests/cli/test_up_dra.py::test_a_gang_waits_for_every_members_devices_then_starts_whole",
            "tests/scheduler/plugins/test_dynamic_resources_batch.py::test_a_gang_with_room_for_three_of_four_allocates_nothing_then_all_when_a_node_comes",
        ),
    ),
    Claim(
        "gpu.md",
        "`queue team-gpu at limit for deviceclass/gpu.nvidia.com (4/4)`",
        (
            "tests/cli/test_up_dra.py::test_queue_quota_counts_devices_of_a_class_and_a_shared_claim_once",
            "tests/scheduler/plugins/test_dynamic_resources_batch.py::test_queue_limit_counts_devices_per_class",
        ),
    ),
    # performance.md
    Claim(
        "performance.md",
        "So the allocator was not where Berth's stream CPU goes on the real plane.",
        why=_DESIGN,
    ),
    Claim(
        "performance.md", "--nodes 300 --standing 0,3000 --plot docs/e2e-real.png", why=_MEASURED
    ),
    Claim(
        "performance.md",
        "# 20 000 pods: created, bound, running (60 000 events)",
        ("tests/cli/test_bench.py::test_pod_events_times_each_kind_of_event",),
    ),
    Claim(
        "performance.md",
        "It replays the three watch events each pod of the `basic` shape brings",
        ("tests/cli/test_bench.py::test_pod_events_times_each_kind_of_event",),
    ),
    Claim(
        "performance.md",
        "The in-process benches (`berth bench basic|gang|cycle`, JSON)",
        ("tests/cli/test_bench.py::test_bench_prints_one_json_object",),
    ),
    Claim("performance.md", "the must-shows at full size", why=_MEASURED),
    Claim(
        "performance.md",
        "- `berth bench e2e --real` at its defaults (1000 nodes; `basic` scaled",
        why=_MEASURED,
    ),
    Claim("performance.md", "**CPU: a write storm, bounded in part.**", why=_MEASURED),
    Claim(
        "performance.md",
        "Berth runs its default profile, or the file `--berth-config` names",
        (
            "tests/bench/test_peers.py::test_the_berth_config_reaches_berth_run_and_the_report",
            "tests/bench/test_peers.py::test_a_berth_config_berth_run_would_refuse_is_refused_before_any_cluster",
        ),
    ),
    Claim("performance.md", "**Not shown beyond noise.** Berth's stream medians", why=_MEASURED),
    # real-cluster.md
    Claim(
        "real-cluster.md",
        "`bash hack/build-k8s --print kueue` prints that directory",
        ("tests/bench/test_kueue_files.py::test_build_script_answers_about_extras_from_the_cache",),
    ),
    Claim(
        "real-cluster.md",
        "`berth up --real` prints each step of its start-up",
        (
            "tests/realcluster/test_up_real.py::test_up_real_gating_every_namespace_shows_the_default_queues_usage",
        ),
    ),
    Claim(
        "real-cluster.md",
        "adds Karpenter v1.15 (its core with the KWOK provider)",
        (
            "tests/realcluster/test_karpenter.py::test_karpenter_adds_nodes_for_pods_that_fit_none_and_removes_them_after",
        ),
    ),
    Claim(
        "real-cluster.md",
        "real-cluster/admin.kubeconfig  # as it prints",
        (
            "tests/realcluster/test_up_real.py::test_up_real_runs_the_examples_then_stops_everything",
        ),
    ),
    Claim(
        "real-cluster.md",
        "else says how to provide them",
        ("tests/realcluster/test_processes.py::test_missing_binaries_say_how_to_provide_them",),
    ),
    Claim(
        "real-cluster.md",
        "A failed test shows the last lines of every component's log",
        why=_DESIGN,
    ),
    # scheduler.md
    Claim(
        "scheduler.md", "the `Scheduler` keeps jobs a session left pending untouched", why=_DESIGN
    ),
    Claim("scheduler.md", "Parking is on in the operator", why=_DESIGN),
    Claim(
        "scheduler.md",
        "`berth bench backlog` measures it: 1000 full nodes, 50 000 pending",
        (
            "tests/cli/test_bench.py::test_backlog_times_a_cycle_unchanged_after_a_pod_ended_and_after_a_job_came",
        ),
    ),
    # workloads.md
    Claim(
        "workloads.md",
        "so `kubectl get bpg` shows it with",
        (
            f"{HERE}::test_a_waiting_job_reads_as_the_workloads_page_prints_it",
            "tests/workloads/test_berth_up.py::test_job_with_parallelism_4_starts_whole_or_not_at_all",
        ),
    ),
    Claim(
        "workloads.md",
        "$ kubectl get bpg",
        (f"{HERE}::test_a_waiting_job_reads_as_the_workloads_page_prints_it",),
    ),
    Claim(
        "workloads.md",
        "`kubectl get bpg` lists one group per stage",
        (
            "tests/workloads/test_berth_up.py::test_group_derived_from_the_owner",
            "tests/workloads/test_plans.py::test_a_later_stage_says_what_it_waits_for_as_docs_workloads_md_shows",
        ),
    ),
    Claim(
        "workloads.md",
        "`kubectl get bpg` shows it with its reason;",
        (
            "tests/workloads/test_interop.py::test_workload_pod_groups_are_mirrored_as_the_pods_name_them",
            "tests/realcluster/test_workloads.py::test_other_schedulers_gang_is_gated_in_admission_mode",
        ),
    ),
    Claim(
        "workloads.md",
        "`berth/workloads/` (pure: owner objects",
        why="names where the code and tests are",
    ),
)

_COMMAND = re.compile(r"`(?:berth|kubectl|helm|bash hack/|hack/)(?: [^`]*)?`")
_OUTPUT = re.compile(
    r"\b(prints?|printed|shows?|shown|says|lists?|listed|reports?|gives|answers|output|"
    r"columns?|JSON|tables?)\b",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^```(\w*)")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _passages(text: str) -> list[str]:
    """Paragraphs, list items, table rows and fenced blocks of a Markdown text."""
    out: list[str] = []
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            if fenced:
                out.append("\n".join([*lines, line]))
                lines, fenced = [], False
            else:
                if lines:
                    out.append("\n".join(lines))
                lines, fenced = [line], True
            continue
        if fenced:
            lines.append(line)
        elif not line.strip() or re.match(r"(\||#|\s*[-*] |\s*\d+\. )", line):
            if lines:
                out.append("\n".join(lines))
            lines = [line] if line.strip() else []
        else:
            lines.append(line)
    if lines:
        out.append("\n".join(lines))
    return out


def _about_output(passage: str) -> bool:
    fence = _FENCE.match(passage)
    if fence:
        if fence.group(1) in ("", "console", "text"):
            return True  # a block of what something printed
        commands = re.search(r"^(\$ )?(berth|kubectl) ", passage, re.MULTILINE)
        return bool(commands and _OUTPUT.search(passage))
    return bool(_COMMAND.search(passage) and _OUTPUT.search(passage))


def _claimed() -> list[tuple[str, str]]:
    return [
        (doc.name, passage)
        for doc in sorted(DOCS.glob("*.md"))
        for passage in _passages(doc.read_text())
        if _about_output(passage)
    ]


def _defines(path: pathlib.Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
        for node in tree.body
    )


def test_every_passage_about_a_commands_output_is_in_the_table() -> None:
    found = _claimed()
    assert len(found) > 30  # the extraction finds what it should
    missing = [
        f"{doc}: {_flat(passage)[:160]}"
        for doc, passage in found
        if not any(c.doc == doc and _flat(c.says) in _flat(passage) for c in CLAIMS)
    ]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("claim", CLAIMS, ids=[f"{c.doc}:{c.says[:40]}" for c in CLAIMS])
def test_each_claim_is_in_its_doc_and_names_tests_that_exist(claim: Claim) -> None:
    assert _flat(claim.says) in _flat((DOCS / claim.doc).read_text()), claim.says
    assert bool(claim.tests) != bool(claim.why), "tests, or why it needs none"
    for test in claim.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), test
        assert not name or _defines(ROOT / path, name), f"no {test}"


def _console(doc: str) -> list[tuple[str, list[str]]]:
    """The ``console`` blocks of ``doc``: each command (after ``$ ``) with the lines printed."""
    blocks = [p for p in _passages((DOCS / doc).read_text()) if p.startswith("```console")]
    out: list[tuple[str, list[str]]] = []
    for block in blocks:
        for line in block.splitlines()[1:-1]:
            if line.startswith("$ "):
                out.append((line[2:], []))
            else:
                out[-1][1].append(line)
    return out


@pytest.mark.slow
def test_a_waiting_job_reads_as_the_workloads_page_prints_it(tmp_path: pathlib.Path) -> None:
    """docs/workloads.md: a Job ``train`` of parallelism 4 with room for 3; ``kubectl get
    bpg`` prints the page's header and its row (but the name's suffix and the age), and the
    group's annotation is the page's."""
    (get, printed), (annotation_command, (annotation,)) = _console("workloads.md")
    assert get == "kubectl get bpg"
    header, row = printed
    with cluster.berth_up(tmp_path, nodes="1x cpu=4,memory=8Gi") as kubectl:
        other = Namespace(kubectl, "other")
        other.create(pod("blocker", None, cpu="1"))  # leaves room for 3 of the Job's 4 pods
        cluster.eventually(lambda: other.bound() == ["blocker"], what="the blocker to run")
        ns = Namespace(kubectl, "default")
        job = ns.create(job_object("train", parallelism=4))
        kubectl.apply(*job_pods(job, 4, cpu="1"), namespace="default")

        def table() -> list[str] | None:
            lines = kubectl("get", "bpg").splitlines()
            return lines if len(lines) == 2 and "NotEnoughResources" in lines[1] else None

        try:
            got_header, got_row = cluster.eventually(table, what="the group to say why")
        except AssertionError:
            raise AssertionError(kubectl("get", "bpg,pods", "-A", "-o", "wide")) from None
        assert got_header.split() == header.split()
        name, *cells, _age = got_row.split()
        doc_name, *doc_cells, _doc_age = row.split()
        assert re.fullmatch(r"job-train-\w{5}", name) and re.fullmatch(r"job-train-\w{5}", doc_name)
        assert cells == doc_cells, got_row
        # The annotation command, with the group's own name.
        argv = shlex.split(annotation_command.replace(doc_name, name))
        assert argv[:3] == ["kubectl", "get", "bpg"]
        assert kubectl(*argv[1:]) == annotation
