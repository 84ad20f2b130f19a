"""helm-sdkpy Install of helm/berth into the API server emulator.

Aspects:
- each option set of ``charts.OPTION_SETS`` installs, and creates exactly the expected objects
  (CRDs, ServiceAccount, RBAC, ConfigMap, Deployment, Service, PDB, ServiceMonitor when asked);
- the Deployment: pod and container security context, ``berth run`` flags and environment
  from the values, probes, replicas and anti-affinity, image reference, mounted profile;
- the profile ConfigMap holds the profile with the extra plugins appended;
- the ClusterRole and the leader-election Role are bound to the chart's ServiceAccount (what
  they grant is checked against recorded operator runs in ``test_rbac_recorded.py``);
- the viewer ClusterRole grants reading the HTTP API (``/berth/*``, ``/dashboard``,
  ``/metrics``) and is bound only to the subjects ``http.viewers`` names;
- the leader fence (a ValidatingAdmissionPolicy with the release's Lease as its parameter)
  names the release's ServiceAccount and Lease, and is left out without leader election or
  when turned off;
- the reservation pods of shared GPUs: the defaults create ``runai-reservation`` and a Role
  there granting ``pods: create, delete`` (only there) to the release's ServiceAccount; a
  release with ``gpuSharing.createNamespace: false`` only its Role; without reservation pods,
  neither;
- values the templates refuse (no leader election with two replicas) fail the install;
- NOTES.txt shows a first job for the installed mode, and kubectl can apply it as shown;
- ``admission.namespaces: all`` sends every pod of every namespace but kube-system, Berth's own
  and those labelled ``scheduling.berth.io/admission=disabled`` to the webhook that gates all of
  a namespace's pods, and only pods naming a group or a queue elsewhere: each pod to one webhook.
"""

from __future__ import annotations

import asyncio
import json
import typing

import helm_sdkpy
import pytest
import yaml

from berth.api import autoscaling, manifests, pods
from berth.cli import up_webhooks
from berth.emulator import testing
from berth.scheduler.actions import registry as action_registry
from berth.scheduler.framework import profiles
from berth.scheduler.plugins import registry as plugin_registry
from tests.packaging import charts

Obj = dict[str, typing.Any]

# option set -> (release, namespace, the chart's full name for that release)
RELEASES = {
    "defaults": ("berth", "berth-system", "berth"),
    "every-option": ("batch", "batch-system", "batch-scheduler"),
    "single-replica": ("solo", "solo-system", "solo-berth"),
    "custom-affinity": ("pinned", "pinned-system", "pinned-berth"),
}
NAMESPACED = ",".join(
    [
        "deployments.apps",
        "serviceaccounts",
        "services",
        "configmaps",
        "poddisruptionbudgets.policy",
        "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
        "servicemonitors.monitoring.coreos.com",
        "secrets",
    ]
)
CLUSTER_SCOPED = (
    "clusterroles.rbac.authorization.k8s.io,clusterrolebindings.rbac.authorization.k8s.io"
    ",mutatingwebhookconfigurations.admissionregistration.k8s.io"
    ",validatingwebhookconfigurations.admissionregistration.k8s.io"
    ",validatingadmissionpolicies.admissionregistration.k8s.io"
    ",validatingadmissionpolicybindings.admissionregistration.k8s.io"
)


@pytest.fixture(scope="module")
def installs(module_emulator: testing.RunningEmulator) -> dict[str, Obj]:
    """Every option set installed into the module's emulator, each as its own release."""
    module_emulator.kubectl("create", "-f", "-", input=json.dumps(charts.SERVICE_MONITOR_CRD))
    for kind, plural in (("Certificate", "certificates"), ("Issuer", "issuers")):
        crd = charts.cert_manager_crd(kind, plural)
        module_emulator.kubectl("create", "-f", "-", input=json.dumps(crd))
    return {
        name: asyncio.run(
            charts.install(
                module_emulator.kubeconfig,
                release=release,
                namespace=namespace,
                values=charts.OPTION_SETS[name],
            )
        )
        for name, (release, namespace, _) in RELEASES.items()
    }


@pytest.fixture(scope="module")
def cluster(
    module_emulator: testing.RunningEmulator, installs: dict[str, Obj]
) -> testing.RunningEmulator:
    assert set(installs) == set(RELEASES)
    return module_emulator


def get(
    cluster: testing.RunningEmulator, kinds: str, *, release: str, namespace: str | None
) -> dict[tuple[str, str], Obj]:
    """The release's objects of ``kinds`` by (kind, name)."""
    where = ["-n", namespace] if namespace else []
    listed = cluster.kubectl(
        "get", kinds, *where, "-l", f"app.kubernetes.io/instance={release}", "-o", "json"
    )
    return {(o["kind"], o["metadata"]["name"]): o for o in json.loads(listed.stdout)["items"]}


def deployment(cluster: testing.RunningEmulator, option_set: str) -> Obj:
    release, namespace, fullname = RELEASES[option_set]
    return get(cluster, "deployments.apps", release=release, namespace=namespace)[
        ("Deployment", fullname)
    ]


def container(cluster: testing.RunningEmulator, option_set: str) -> Obj:
    containers = deployment(cluster, option_set)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["berth"]
    return typing.cast(Obj, containers[0])


EXPECTED_OBJECTS = {
    "defaults": {
        ("Deployment", "berth"),
        ("ServiceAccount", "berth"),
        ("Service", "berth-metrics"),
        ("ConfigMap", "berth-profile"),
        ("PodDisruptionBudget", "berth"),
        ("Role", "berth-leader-election"),
        ("RoleBinding", "berth-leader-election"),
        ("ClusterRole", "berth"),
        ("ClusterRoleBinding", "berth"),
        # Who may read the HTTP API (viewer-rbac.yaml): granted, bound to nobody by default.
        ("ClusterRole", "berth-viewer"),
        # The server-side leader fence (leader-fence.yaml).
        ("ValidatingAdmissionPolicy", "berth-leader-fence"),
        ("ValidatingAdmissionPolicyBinding", "berth-leader-fence"),
        # The pod writes the ClusterRole's patch is narrowed to (pod-writes.yaml).
        ("ValidatingAdmissionPolicy", "berth-pod-writes"),
        ("ValidatingAdmissionPolicyBinding", "berth-pod-writes"),
        # Only Berth writes the markers it trusts (markers.yaml).
        ("ValidatingAdmissionPolicy", "berth-markers"),
        ("ValidatingAdmissionPolicyBinding", "berth-markers"),
    },
    "every-option": {
        ("Deployment", "batch-scheduler"),
        ("ServiceAccount", "batch-scheduler-sa"),
        ("Service", "batch-scheduler-metrics"),
        ("ServiceMonitor", "batch-scheduler"),
        ("ConfigMap", "batch-scheduler-profile"),
        ("PodDisruptionBudget", "batch-scheduler"),
        ("Role", "batch-scheduler-leader-election"),
        ("RoleBinding", "batch-scheduler-leader-election"),
        ("ClusterRole", "batch-scheduler"),
        ("ClusterRoleBinding", "batch-scheduler"),
        ("ClusterRole", "batch-scheduler-viewer"),
        ("ClusterRoleBinding", "batch-scheduler-viewer"),
        ("ValidatingAdmissionPolicy", "batch-scheduler-leader-fence"),
        ("ValidatingAdmissionPolicyBinding", "batch-scheduler-leader-fence"),
        ("ValidatingAdmissionPolicy", "batch-scheduler-pod-writes"),
        ("ValidatingAdmissionPolicyBinding", "batch-scheduler-pod-writes"),
        ("ValidatingAdmissionPolicy", "batch-scheduler-markers"),
        ("ValidatingAdmissionPolicyBinding", "batch-scheduler-markers"),
        # Admission mode (admission-*.yaml): the webhook, its Service and TLS Secret, and the
        # rights to recreate a rejected pod gated.
        ("Service", "batch-scheduler-admission"),
        ("Secret", "batch-scheduler-admission-tls"),
        ("MutatingWebhookConfiguration", "batch-scheduler-admission"),
        ("ValidatingWebhookConfiguration", "batch-scheduler-admission"),
        ("ClusterRole", "batch-scheduler-admission"),
        ("ClusterRoleBinding", "batch-scheduler-admission"),
    },
    # No ServiceAccount, RBAC or PDB: the user brings the account and its bindings.
    "single-replica": {
        ("Deployment", "solo-berth"),
        ("Service", "solo-berth-metrics"),
        ("ConfigMap", "solo-berth-profile"),
    },
}


@pytest.mark.parametrize("option_set", EXPECTED_OBJECTS, ids=EXPECTED_OBJECTS)
def test_install_creates_the_expected_objects(
    cluster: testing.RunningEmulator, option_set: str
) -> None:
    release, namespace, _ = RELEASES[option_set]
    found = set(get(cluster, NAMESPACED, release=release, namespace=namespace))
    found |= set(get(cluster, CLUSTER_SCOPED, release=release, namespace=None))
    assert found == EXPECTED_OBJECTS[option_set]


@pytest.mark.parametrize(
    ("option_set", "role"),
    [("defaults", True), ("every-option", True), ("single-replica", False)],
)
def test_reservation_pods_get_their_namespace_and_a_role_there(
    cluster: testing.RunningEmulator, option_set: str, role: bool
) -> None:
    release, namespace, fullname = RELEASES[option_set]
    spaces = get(cluster, "namespaces", release="berth", namespace=None)
    assert set(spaces) == {("Namespace", "runai-reservation")}  # the defaults' release made it
    found = get(cluster, NAMESPACED, release=release, namespace="runai-reservation")
    if not role:
        assert found == {}
        return
    granted = found[("Role", f"{fullname}-gpu-reservations")]
    assert granted["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}
    ]
    binding = found[("RoleBinding", f"{fullname}-gpu-reservations")]
    [subject] = binding["subjects"]
    assert subject["kind"] == "ServiceAccount" and subject["namespace"] == namespace


def test_install_creates_the_crds(cluster: testing.RunningEmulator) -> None:
    listed = json.loads(cluster.kubectl("get", "crd", "-o", "json").stdout)["items"]
    names = {o["metadata"]["name"] for o in listed}
    shipped = {
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in (charts.CHART / "crds").glob("*.yaml")
    }
    assert shipped == {
        "queues.scheduling.berth.io",
        "podgroups.scheduling.berth.io",
        "reservations.scheduling.berth.io",
    }
    assert shipped <= names


@pytest.mark.parametrize("option_set", RELEASES, ids=RELEASES)
def test_containers_run_hardened(cluster: testing.RunningEmulator, option_set: str) -> None:
    assert container(cluster, option_set)["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # The read-only root filesystem leaves /tmp as the only writable path.
    mounts = {m["mountPath"]: m for m in container(cluster, option_set)["volumeMounts"]}
    # Admission mode (every-option) and the queue-access webhook (custom-affinity) add the
    # webhook's certificate, read-only.
    webhook = option_set in ("every-option", "custom-affinity")
    admission = {"/var/run/berth/admission"} if webhook else set()
    assert set(mounts) == {"/etc/berth", "/tmp"} | admission
    assert all(mounts[path]["readOnly"] is True for path in {"/etc/berth"} | admission)


@pytest.mark.parametrize(
    ("option_set", "expected"),
    [
        ("defaults", {"runAsUser": 10001, "runAsGroup": 10001}),
        ("every-option", {"runAsUser": 20000, "runAsGroup": 20000}),
        ("single-replica", {}),  # null: the platform picks the user (OpenShift)
    ],
    ids=["defaults", "every-option", "single-replica"],
)
def test_pods_run_as_non_root(
    cluster: testing.RunningEmulator, option_set: str, expected: Obj
) -> None:
    pod = deployment(cluster, option_set)["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        **expected,
    }


ARGS = {
    "defaults": [
        "--config=/etc/berth/profile.yaml",
        "--scheduler-name=berth-scheduler",
        "--mode=scheduler",
        "--log-level=info",
        "--http-port=8080",
        "--eviction-wait=30s",
        "--reservation-retention=24h",
        "--leader-elect",
    ],
    "every-option": [
        "--config=/etc/berth/profile.yaml",
        "--scheduler-name=batch-scheduler",
        "--mode=admission",
        "--log-level=debug",
        "--http-port=9090",
        "--eviction-wait=45s",
        "--reservation-retention=1h30m",
        "--leader-elect",
        "--enable-debug-api",
        "--namespace=batch-system",
    ],
    "single-replica": [
        "--config=/etc/berth/profile.yaml",
        "--scheduler-name=berth-scheduler",
        "--mode=scheduler",
        "--log-level=info",
        "--http-port=8080",
        "--eviction-wait=30s",
        "--reservation-retention=24h",
        "--no-leader-elect",
    ],
}


@pytest.mark.parametrize(("option_set", "args"), ARGS.items(), ids=ARGS)
def test_berth_run_flags_follow_the_values(
    cluster: testing.RunningEmulator, option_set: str, args: list[str]
) -> None:
    berth = container(cluster, option_set)
    assert "command" not in berth  # the image's ENTRYPOINT is `berth run`
    assert berth["args"] == args


@pytest.mark.parametrize(
    ("option_set", "admit", "claim", "grouping", "extra"),
    [
        ("defaults", "true", "false", "true", []),
        (
            "every-option",
            "false",
            "true",
            "false",
            [
                {"name": "BERTH_ADMISSION__WEBHOOK", "value": "true"},
                {"name": "BERTH_ADMISSION__WEBHOOK_PORT", "value": "8443"},
                {"name": "BERTH_ADMISSION__BIND_TIMEOUT", "value": "2m"},
                {"name": "PYTHONFAULTHANDLER", "value": "1"},
            ],
        ),
    ],
    ids=["defaults", "every-option"],
)
def test_environment_names_the_pod_and_the_plain_pod_policy(
    cluster: testing.RunningEmulator,
    option_set: str,
    admit: str,
    claim: str,
    grouping: str,
    extra: list[Obj],
) -> None:
    env = container(cluster, option_set)["env"]
    assert env == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "BERTH_ADMIT_PLAIN_PODS", "value": admit},
        {"name": "BERTH_HTTP_AUTHORIZATION", "value": "true"},
        {"name": "BERTH_GROUP_BY_OWNER", "value": grouping},
        {"name": "BERTH_INTEROP_SCHEDULER_PLUGINS", "value": grouping},
        {"name": "BERTH_INTEROP_VOLCANO", "value": grouping},
        # claimPods: off by default, on in every-option (admitPlainPods the other way round).
        {"name": "BERTH_INTEROP_SCHEDULER_PLUGINS_PODS", "value": claim},
        {"name": "BERTH_INTEROP_VOLCANO_PODS", "value": claim},
        {"name": "BERTH_INTEROP_WORKLOAD_API", "value": grouping},
        # Reservation pods of shared GPUs: on in both (every-option only leaves the namespace).
        {"name": "BERTH_GPU_RESERVATION_PODS", "value": "true"},
        # Scale-down protection and capacity requests: on by default, off in every-option.
        {"name": "BERTH_AUTOSCALING__PROTECT_NODES", "value": grouping},
        {"name": "BERTH_AUTOSCALING__CAPACITY_REQUESTS", "value": grouping},
        *extra,
    ]


@pytest.mark.parametrize(
    ("option_set", "port"),
    [("defaults", 8080), ("every-option", 9090)],
    ids=["defaults", "every-option"],
)
def test_probes_use_health_and_readiness_on_the_http_port(
    cluster: testing.RunningEmulator, option_set: str, port: int
) -> None:
    berth = container(cluster, option_set)
    webhook = (
        [{"name": "admission", "containerPort": 8443, "protocol": "TCP"}]
        if option_set == "every-option"
        else []
    )
    assert berth["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}, *webhook]
    assert berth["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert berth["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_defaults_run_two_replicas_spread_over_nodes(cluster: testing.RunningEmulator) -> None:
    spec = deployment(cluster, "defaults")["spec"]
    assert spec["replicas"] == 2
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
    (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    )
    assert container(cluster, "defaults")["image"] == "ghcr.io/berth-scheduler/berth:0.1.0"
    assert container(cluster, "defaults")["resources"] == {
        "requests": {"cpu": "200m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }


def test_every_option_reaches_the_pod_template(cluster: testing.RunningEmulator) -> None:
    spec = deployment(cluster, "every-option")["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 3
    assert "requiredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["podAntiAffinity"]
    assert pod["serviceAccountName"] == "batch-scheduler-sa"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert pod["terminationGracePeriodSeconds"] == 60
    assert spec["template"]["metadata"]["labels"]["example.com/tier"] == "control-plane"
    assert spec["template"]["metadata"]["annotations"]["example.com/team"] == "platform"
    berth = container(cluster, "every-option")
    assert berth["image"] == "registry.example.com/platform/berth@sha256:" + "ab" * 32
    assert berth["imagePullPolicy"] == "Always"


def test_custom_affinity_replaces_the_generated_one(cluster: testing.RunningEmulator) -> None:
    pod = deployment(cluster, "custom-affinity")["spec"]["template"]["spec"]
    assert pod["affinity"] == charts.CUSTOM_AFFINITY["affinity"]


PROFILES = {
    "defaults": {**charts.default_values()["profile"], "schedulerName": "berth-scheduler"},
    "every-option": {
        **charts.EVERY_OPTION["profile"],
        "schedulerName": "batch-scheduler",
        "plugins": [
            *charts.EVERY_OPTION["profile"]["plugins"],
            *charts.EVERY_OPTION["extraPlugins"],
        ],
    },
}


@pytest.mark.parametrize(("option_set", "profile"), PROFILES.items(), ids=PROFILES)
def test_profile_configmap_is_mounted_and_holds_the_profile(
    cluster: testing.RunningEmulator, option_set: str, profile: Obj
) -> None:
    release, namespace, fullname = RELEASES[option_set]
    maps = get(cluster, "configmaps", release=release, namespace=namespace)
    document = yaml.safe_load(maps[("ConfigMap", f"{fullname}-profile")]["data"]["profile.yaml"])
    assert document == profile
    # The scheduler accepts it: known actions and plugins, valid args.
    known_actions = {action.name for action in action_registry.default_actions()}
    profiles.resolve(
        profiles.parse(document), registry=plugin_registry.in_tree_registry(), actions=known_actions
    )
    volumes = deployment(cluster, option_set)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "profile", "configMap": {"name": f"{fullname}-profile"}} in volumes


def test_cluster_role_is_bound_to_the_service_account(cluster: testing.RunningEmulator) -> None:
    objects = get(cluster, CLUSTER_SCOPED, release="berth", namespace=None)
    assert objects[("ClusterRole", "berth")]["rules"]
    binding = objects[("ClusterRoleBinding", "berth")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "berth",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "berth", "namespace": "berth-system"}
    ]


def test_the_viewer_role_grants_reading_the_http_api_and_binds_only_who_is_named(
    cluster: testing.RunningEmulator,
) -> None:
    defaults = get(cluster, CLUSTER_SCOPED, release="berth", namespace=None)
    assert defaults[("ClusterRole", "berth-viewer")]["rules"] == [
        {"nonResourceURLs": ["/berth/*", "/dashboard", "/metrics"], "verbs": ["get"]}
    ]
    assert ("ClusterRoleBinding", "berth-viewer") not in defaults  # nobody unless named
    named = get(cluster, CLUSTER_SCOPED, release="batch", namespace=None)
    binding = named[("ClusterRoleBinding", "batch-scheduler-viewer")]
    assert binding["roleRef"]["name"] == "batch-scheduler-viewer"
    assert binding["subjects"] == [
        {"kind": "Group", "name": "ops", "apiGroup": "rbac.authorization.k8s.io"}
    ]


def test_role_is_bound_in_the_release_namespace(cluster: testing.RunningEmulator) -> None:
    objects = get(cluster, NAMESPACED, release="berth", namespace="berth-system")
    role = objects[("Role", "berth-leader-election")]
    assert role["metadata"]["namespace"] == "berth-system"
    binding = objects[("RoleBinding", "berth-leader-election")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "berth", "namespace": "berth-system"}
    ]


@pytest.mark.parametrize(
    ("option_set", "user"),
    [
        ("defaults", "system:serviceaccount:berth-system:berth"),
        ("every-option", "system:serviceaccount:batch-system:batch-scheduler-sa"),
    ],
)
def test_the_leader_fence_binds_the_release_lease_to_its_service_account(
    cluster: testing.RunningEmulator, option_set: str, user: str
) -> None:
    release, namespace, fullname = RELEASES[option_set]
    objects = get(cluster, CLUSTER_SCOPED, release=release, namespace=None)
    policy = objects[("ValidatingAdmissionPolicy", f"{fullname}-leader-fence")]["spec"]
    assert policy["paramKind"] == {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
    assert policy["failurePolicy"] == "Fail"
    assert [c["expression"] for c in policy["matchConditions"]] == [
        f'request.userInfo.username == "{user}"'
    ]
    excluded = {r["resources"][0] for r in policy["matchConstraints"]["excludeResourceRules"]}
    assert excluded == {"leases", "tokenreviews", "subjectaccessreviews"}
    binding = objects[("ValidatingAdmissionPolicyBinding", f"{fullname}-leader-fence")]["spec"]
    assert binding["policyName"] == f"{fullname}-leader-fence"
    assert binding["validationActions"] == ["Deny"]
    assert binding["paramRef"] == {
        "name": "berth-scheduler",
        "namespace": namespace,
        "parameterNotFoundAction": "Allow",
    }


@pytest.mark.parametrize("option_set", ["single-replica", "custom-affinity"])
def test_no_leader_fence_without_election_or_when_turned_off(
    cluster: testing.RunningEmulator, option_set: str
) -> None:
    release, _, fullname = RELEASES[option_set]
    found = set(get(cluster, CLUSTER_SCOPED, release=release, namespace=None))
    kinds = {kind for kind, _ in found}
    assert "ClusterRole" in kinds or option_set == "single-replica"
    assert not {name for _, name in found} & {f"{fullname}-leader-fence"}
    # Without ValidatingAdmissionPolicies at all (custom-affinity: a cluster before 1.30).
    if option_set == "custom-affinity":
        assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.mark.parametrize(
    ("option_set", "user", "labels"),
    [
        (
            "defaults",
            "system:serviceaccount:berth-system:berth",
            ["scheduling.berth.io/pod-group", "scheduling.berth.io/queue"],
        ),
        # groupByOwner off: Berth writes no label at all.
        ("every-option", "system:serviceaccount:batch-system:batch-scheduler-sa", []),
    ],
)
def test_the_pod_patch_is_narrowed_to_the_fields_berth_writes(
    cluster: testing.RunningEmulator, option_set: str, user: str, labels: list[str]
) -> None:
    release, _, fullname = RELEASES[option_set]
    objects = get(cluster, CLUSTER_SCOPED, release=release, namespace=None)
    policy = objects[("ValidatingAdmissionPolicy", f"{fullname}-pod-writes")]["spec"]
    assert policy["failurePolicy"] == "Fail"
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert (rule["resources"], rule["operations"]) == (["pods"], ["UPDATE"])
    assert [c["expression"] for c in policy["matchConditions"]] == [
        f'request.userInfo.username == "{user}"'
    ]
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    assert json.loads(variables["ownLabels"]) == labels
    # The annotations that make a gang's pods consume its ProvisioningRequest (Cluster
    # Autoscaler's), beside Berth's own prefix.
    assert json.loads(variables["ownAnnotations"]) == [
        autoscaling.CONSUME_ANNOTATION,
        autoscaling.CLASS_ANNOTATION,
    ]
    messages = [v["message"] for v in policy["validations"]]
    assert messages == [
        "Berth may change no pod label but its own",
        "Berth may change no pod annotation but its own",
        "Berth may only remove scheduling gates",
        "Berth may change no container, toleration, node selector or deadline of a pod",
    ]
    binding = objects[("ValidatingAdmissionPolicyBinding", f"{fullname}-pod-writes")]["spec"]
    assert binding == {"policyName": f"{fullname}-pod-writes", "validationActions": ["Deny"]}


def test_every_cluster_role_rule_carries_a_comment() -> None:
    lines = (charts.CHART / "templates" / "clusterrole.yaml").read_text().splitlines()
    rule_starts = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
    assert len(rule_starts) == 41
    for index in rule_starts:
        assert lines[index - 1].strip().startswith("#"), lines[index]


async def test_install_refuses_two_replicas_without_leader_election(
    emulator: testing.RunningEmulator,
) -> None:
    with pytest.raises(helm_sdkpy.InstallError, match=r"leaderElection\.enabled=false"):
        await charts.install(
            emulator.kubeconfig,
            release="unsafe",
            namespace="unsafe",
            values={"replicaCount": 2, "leaderElection": {"enabled": False}},
        )


def first_job(notes: str) -> str:
    """The manifests NOTES.txt tells the user to apply (its ``<<'YAML'`` here-document)."""
    start = notes.index("kubectl apply -f - <<'YAML'\n") + len("kubectl apply -f - <<'YAML'\n")
    return notes[start : notes.index("\nYAML\n", start)]


@pytest.mark.parametrize(
    ("option_set", "scheduler_name", "gated"),
    [("defaults", "berth-scheduler", False), ("every-option", None, True)],
    ids=["scheduler-mode", "admission-mode"],
)
def test_notes_show_a_first_job_for_the_mode(
    installs: dict[str, Obj], option_set: str, scheduler_name: str | None, gated: bool
) -> None:
    notes = installs[option_set]["info"]["notes"]
    loaded = manifests.load(first_job(notes))
    assert [type(m).__name__ for m in loaded] == ["PodGroup", "Pod", "Pod"]
    group = loaded[0].metadata.name
    for pod in loaded[1:]:
        assert isinstance(pod, pods.Pod)
        assert pod.metadata.labels == {"scheduling.berth.io/pod-group": group}
        assert pod.spec.scheduler_name == scheduler_name
        gates = pod.to_api()["spec"].get("schedulingGates")
        assert (gates == [{"name": "scheduling.berth.io/admission"}]) is gated


def test_the_first_job_applies_as_shown(
    cluster: testing.RunningEmulator, installs: dict[str, Obj]
) -> None:
    job = first_job(installs["defaults"]["info"]["notes"])
    applied = cluster.kubectl("apply", "-n", "default", "-f", "-", input=job)
    assert applied.stdout.splitlines() == [
        "podgroup.scheduling.berth.io/hello created",
        "pod/hello-0 created",
        "pod/hello-1 created",
    ]


def test_interop_crds_are_installed_when_asked_and_kept(
    cluster: testing.RunningEmulator,
) -> None:
    # The every-option release asks for both minimal CRDs (the defaults ask for none).
    names = cluster.kubectl("get", "crds", "-o", "name").stdout.split()
    for crd in ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{crd}" in names
        found = json.loads(cluster.kubectl("get", "crd", crd, "-o", "json").stdout)
        assert found["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "scheduling.x-k8s.io/v1alpha1" in cluster.kubectl("api-versions").stdout


def test_scheduler_mode_queue_access_webhook_only_checks_pods_naming_a_queue(
    cluster: testing.RunningEmulator,
) -> None:
    release, namespace, fullname = RELEASES["custom-affinity"]
    found = get(cluster, CLUSTER_SCOPED, release=release, namespace=None)
    config = found[("MutatingWebhookConfiguration", f"{fullname}-admission")]
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == "/admission/pods/queue-access"
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": "scheduling.berth.io/queue", "operator": "Exists"}]
    }
    # Creates, and updates that change the queue label (a label added after creation).
    assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    (condition,) = hook["matchConditions"]
    assert condition["expression"] == (
        f"request.operation == 'CREATE' || {up_webhooks.QUEUE_CHANGED}"
    )
    # Queues are validated wherever the webhook is served (Kopf's validating handler).
    validating = found[("ValidatingWebhookConfiguration", f"{fullname}-admission")]
    paths = {
        hook["rules"][0]["resources"][0]: hook["clientConfig"]["service"]["path"]
        for hook in validating["webhooks"]
    }
    assert paths == {"queues": "/validation/queues", "podgroups": "/validation/podgroups"}
    env = {e["name"]: e.get("value") for e in container(cluster, "custom-affinity")["env"]}
    assert env["BERTH_ADMISSION__QUEUE_ACCESS"] == "true"
    assert "BERTH_ADMISSION__BIND_TIMEOUT" not in env
    services = get(cluster, "services", release=release, namespace=namespace)
    assert ("Service", f"{fullname}-admission") in services


def test_admission_of_all_namespaces_gates_every_namespace_not_labelled_disabled(
    cluster: testing.RunningEmulator, installs: dict[str, Obj]
) -> None:
    release, namespace, fullname = RELEASES["every-option"]
    found = get(cluster, CLUSTER_SCOPED, release=release, namespace=None)
    config = found[("MutatingWebhookConfiguration", f"{fullname}-admission")]
    selected = {
        hook["name"].split(".")[0]: (
            hook["clientConfig"]["service"]["path"],
            hook["namespaceSelector"]["matchExpressions"],
        )
        for hook in config["webhooks"]
    }
    never = {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", namespace]}  # fmt: skip
    # Every namespace not labelled disabled: all of its pods (the operator labels plain ones
    # with the queue default); namespaces labelled disabled: only pods naming a group or queue.
    whole = {"key": "scheduling.berth.io/admission", "operator": "NotIn", "values": ["disabled"]}
    named = {"key": "scheduling.berth.io/admission", "operator": "In", "values": ["disabled"]}
    assert selected == {
        "namespace": ("/admission/pods/opted-in", [never, whole]),
        "group": ("/admission/pods", [never, named]),
        "queue": ("/admission/pods", [never, named]),
        # The queue label is checked in every namespace, whichever gates its pods.
        "queue-label": ("/admission/pods/queue-access", [never]),
    }
    # And the NOTES say so, where the default (optIn) says how to opt a namespace in.
    notes = " ".join(installs["every-option"]["info"]["notes"].split())
    assert (
        "every pod of every namespace but kube-system, batch-system and those labelled "
        "scheduling.berth.io/admission=disabled."
    ) in notes
