"""Every row of the README's "Using it" table is checked by tests: what it says a command does.

We test these aspects:

- each row (by what "you want to" do) names the tests that check what it claims, and each of
  those tests exists, so a row cannot be added or reworded without saying which test checks
  it (the install table is checked the same way, by ``tests/packaging/test_install_sets.py``);
- the claims no other test checks, run here on one ``berth up`` as a user would, with the
  README's own text as input: the reservation row's ``kubectl create reservation ...`` command
  (copied from the README) creates the reservation, whose OWNER column then reads
  ``app=train``; ``kubectl get berth -A`` lists all three kinds (the Concepts section);
  ``kubectl get bq`` shows the columns the queues row names, ``-o wide`` more of them.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from berth.emulator import testing

REPO = pathlib.Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
BERTH = str(pathlib.Path(sys.executable).parent / "berth")
HERE = "tests/docs/test_readme_using_it.py"

# A row (the start of what "you want to" do) -> the tests that check what it says.
CHECKED_BY: dict[str, tuple[str, ...]] = {
    "try Berth on an embedded cluster and point the real `kubectl` at it": (
        "tests/cli/test_up.py::test_up_serves_kubectl_and_schedules_until_interrupted",
        "tests/cli/test_up.py::test_up_keeps_its_kubeconfig_in_the_state_directory_and_describe_shows_why",
        "tests/cli/test_up.py::test_up_in_admission_mode_gates_and_the_stand_in_binder_binds_what_berth_admits",
        "tests/workloads/test_berth_up.py::test_admission_of_every_namespace_gates_a_plain_job_whole",
        "tests/cli/test_up.py::test_admission_namespaces_needs_admission_mode",
    ),
    "the same on a real control plane": (
        "tests/realcluster/test_up_real.py::test_up_real_runs_the_examples_then_stops_everything",
        "tests/realcluster/test_up_real.py::test_up_real_from_a_fresh_install_in_admission_mode_writes_the_kubeconfig_asked",
        "tests/realcluster/test_up_real.py::test_up_real_refuses_options_of_the_embedded_cluster",
        "tests/realcluster/test_up_real.py::test_up_real_gating_every_namespace_shows_the_default_queues_usage",
    ),
    "the same with an autoscaler": (
        "tests/realcluster/test_karpenter.py::test_karpenter_adds_nodes_for_pods_that_fit_none_and_removes_them_after",
        "tests/realcluster/test_up_real.py::test_autoscale_needs_the_real_control_plane",
    ),
    "install it into a cluster": (
        "tests/packaging/test_chart_install.py::test_install_creates_the_expected_objects",
    ),
    "reserve capacity for a job that is coming": (
        f"{HERE}::test_the_commands_the_readme_shows",
        "tests/cli/test_kubectl_create_reservation.py::test_kubectl_creates_a_valid_reservation",
    ),
    "book a whole node for tonight's big run (a node drains for it an hour ahead)": (
        "tests/cli/test_kubectl_create_reservation.py::test_flags_build_the_reservation",
        "tests/operator/test_reservation_start_at.py::test_a_reservation_booked_for_later_drains_a_node_and_holds_it_from_its_start",
        "tests/sim/test_reservation_start_at.py::test_a_reservation_2_hours_ahead_holds_its_node_then_idling_only_what_the_drain_needs",
    ),
    "see queues, shares and usage": (
        f"{HERE}::test_the_commands_the_readme_shows",
        "tests/cli/test_up.py::test_the_default_queue_is_listed_with_its_usage",
        "tests/realcluster/test_up_real.py::test_up_real_gating_every_namespace_shows_the_default_queues_usage",
        "tests/operator/test_queue_views.py::test_queue_states_usage_and_the_line",
        "tests/cli/test_kubectl_berth.py::test_queues_shows_the_tree_with_values",
    ),
    "ask why something waits": (
        "tests/operator/test_queue_views.py::test_queue_states_usage_and_the_line",
        "tests/cli/test_up.py::test_up_keeps_its_kubeconfig_in_the_state_directory_and_describe_shows_why",
        "tests/cli/test_kubectl_berth.py::test_why_a_waiting_gang_gives_its_reason_and_every_node",
    ),
    "see it all on one page": (
        "tests/cli/test_dashboard.py::test_the_dashboard_shows_queues_with_charts_aligned_and_scaled",
        "tests/operator/test_queue_views.py::test_queue_states_usage_and_the_line",
    ),
    "see where a job stands in its queue's line": (
        "tests/operator/test_queue_views.py::test_queue_states_usage_and_the_line",
    ),
    "run a Job, JobSet, PyTorchJob, RayCluster... as a gang": (
        "tests/workloads/test_berth_up.py::test_job_with_parallelism_4_starts_whole_or_not_at_all",
        "tests/workloads/test_berth_up.py::test_group_derived_from_the_owner",
        "tests/workloads/test_interop.py::test_volcano_group_carries_over_with_its_queue_and_priority",
        "tests/workloads/test_interop.py::test_scheduler_plugins_group_carries_over",
        "tests/realcluster/test_workloads.py::test_a_job_starts_as_one_gang_when_all_of_it_fits",
        "tests/realcluster/test_workloads.py::test_every_namespace_is_gated_with_the_chart_value_and_a_plain_job_starts_whole",
        "tests/packaging/test_chart_install.py::test_admission_of_all_namespaces_gates_every_namespace_not_labelled_disabled",
        "tests/workloads/test_berth_up.py::test_admission_of_every_namespace_gates_a_plain_job_whole",
    ),
    "keep whole GPU nodes for big jobs": (
        "tests/scheduler/plugins/test_resource_scoring.py::test_a_gpu_pod_packs_although_cpu_would_spread",
        "tests/cli/test_up_topology.py::test_workers_share_a_rack_through_kubectl",
        "tests/scheduler/plugins/test_topology_scenarios.py::test_scenario",
    ),
    "share a GPU between pods (notebooks, inference)": (
        "tests/scheduler/plugins/test_gpu_sharing.py::test_shares_fill_devices_and_record_them",
        "tests/scheduler/plugins/test_gpu_sharing.py::test_memory_shares_are_sized_by_each_nodes_devices",
        "tests/scheduler/plugins/test_gpu_sharing.py::test_the_multi_device_form_takes_distinct_devices",
        "tests/scheduler/plugins/test_gpu_sharing.py::test_a_queue_limit_counts_shares_in_fractions",
        "tests/kube/test_decisions.py::test_the_device_of_a_shared_gpu_rides_on_the_binding_and_counts_at_once",
        "tests/sim/test_gpu_sharing_sim.py::test_the_gpu_sharing_example_runs",
    ),
    "move from Volcano, scheduler-plugins, Kueue, YuniKorn or KAI": (
        "tests/workloads/test_interop.py::test_volcano_group_carries_over_with_its_queue_and_priority",
        "tests/workloads/test_interop.py::test_scheduler_plugins_group_carries_over",
    ),
    "cap how long a job may run (walltime)": (
        "tests/operator/test_max_execution_time.py::test_a_gang_past_its_limit_is_evicted_and_failed_with_events",
        "tests/operator/test_max_execution_time.py::test_a_gang_past_its_queues_limit_is_evicted_and_runs_again",
        "tests/sim/test_max_execution_time.py::test_a_gang_past_its_queues_limit_is_evicted_whole_and_runs_again",
    ),
    "give a namespace its own queue, limit who uses a queue": (
        "tests/workloads/test_queues_berth_up.py::test_namespace_default_queue_takes_its_pods_that_name_none",
        "tests/workloads/test_queues_berth_up.py::test_pod_in_a_queue_that_does_not_admit_its_namespace_waits_until_it_does",
    ),
    'ask "what if" without a cluster': (
        "tests/cli/test_sim.py::test_a_scenario_runs_to_a_json_report_and_a_plot",
        "tests/sim/test_examples.py::test_fair_share_keeps_the_cluster_full_and_follows_the_new_weights",
        "tests/sim/test_doc_plots.py::test_the_readme_plots_are_current",
    ),
    "measure": ("tests/cli/test_bench.py::test_bench_prints_one_json_object",),
    "break it on purpose": (
        "tests/cli/test_chaos_cli.py::test_sigstop_needs_a_cluster_or_real",
        "tests/chaos/test_fuzz.py::test_a_hostile_tenant_never_reaches_another",
    ),
    "regenerate the CRDs after changing a model": (
        "tests/cli/test_crds.py::test_check_passes_on_the_committed_crds",
        "tests/cli/test_crds.py::test_check_fails_naming_changed_and_missing_files",
    ),
}


def _rows() -> dict[str, str]:
    """The "Using it" table: what you want to do -> the command cell."""
    section = README[README.index("## Using it") : README.index("## Constraints in scheduler")]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| you want", "|---")):
            continue
        want, _, command = line[2:].partition(" | ")
        rows[want] = command.rstrip(" |")
    return rows


def _defines(path: pathlib.Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
        for node in tree.body
    )


def _key(want: str) -> str:
    """The entry of :data:`CHECKED_BY` a row belongs to (its start)."""
    (key,) = [k for k in CHECKED_BY if want.startswith(k)] or [want]
    return key


def test_every_row_names_tests_that_exist() -> None:
    rows = {_key(want) for want in _rows()}
    assert rows == set(CHECKED_BY), rows ^ set(CHECKED_BY)
    for want, tests in CHECKED_BY.items():
        assert tests, want
        for test in tests:
            path, _, name = test.partition("::")
            assert _defines(REPO / path, name), f"{want!r}: no {test}"


def _readme_command(want: str, prefix: str) -> list[str]:
    """The first backquoted command of the row ``want`` that starts with ``prefix``."""
    (command,) = [c for c in re.findall(r"`([^`]+)`", _rows()[want]) if c.startswith(prefix)][:1]
    return shlex.split(command)


@pytest.mark.slow
def test_the_commands_the_readme_shows(tmp_path: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env.pop("KUBECONFIG", None)
    env |= {"HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [BERTH, "up", "--kubeconfig", str(kubeconfig), "--log-level", "warning",
         "--nodes", "4x cpu=16,memory=64Gi,nvidia.com/gpu=4"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "Press Ctrl+C" in line:
                break
        kube = env | {"KUBECONFIG": str(kubeconfig)}

        def kubectl(*args: str) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args], env=kube, cwd=REPO, capture_output=True,
                text=True, check=True, timeout=60,
            ).stdout  # fmt: skip

        kubectl("apply", "-f", "examples/01-queues/", "-f", "examples/02-gang/")
        # The reservation row's command, as the README writes it.
        argv = _readme_command("reserve capacity for a job that is coming", "kubectl create")
        assert argv[:3] == ["kubectl", "create", "reservation"]
        kubectl(*argv[1:])
        deadline = time.monotonic() + 60
        owner = ""
        while time.monotonic() < deadline and not owner:
            owner = kubectl("get", "resv", argv[3], "-o", "jsonpath={.status.ownerSelector}")
            time.sleep(0.2)
        assert owner == "app=train"
        header, row = kubectl("get", "resv", argv[3]).splitlines()[:2]
        cells = dict(zip(header.split(), row.split(), strict=False))
        assert cells["OWNER"] == "app=train", (header, row)
        # Concepts: `kubectl get berth -A` lists all three kinds.
        listed = kubectl("get", "berth", "-A", "-o", "name").split()
        kinds = {name.split("/")[0] for name in listed}
        assert kinds == {
            "queue.scheduling.berth.io",
            "podgroup.scheduling.berth.io",
            "reservation.scheduling.berth.io",
        }, listed
        # The queues row: State (Open/Closed/Invalid with the reason), guaranteed, allocated,
        # fair share, pods pending/running; -o wide for more.
        columns = kubectl("get", "bq").splitlines()[0].split()
        for name in ("STATE", "GUARANTEED", "ALLOCATED", "FAIRSHARE", "PENDING", "RUNNING"):
            assert name in columns, columns
        assert "REASON" in columns
        wide = kubectl("get", "bq", "-o", "wide").splitlines()[0].split()
        assert len(wide) > len(columns) and "WEIGHT" in wide
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
