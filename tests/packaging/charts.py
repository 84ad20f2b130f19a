"""Helpers for the chart tests: chart copies with other values, and helm-sdkpy's Lint.

helm-sdkpy's Lint takes no values of its own (``helm lint --values`` has no counterpart), so a
chart is linted with other values by copying it and replacing its ``values.yaml`` with the
defaults deep-merged with the overrides, which is what ``helm lint -f`` checks too.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import pathlib
import shutil
import typing

import helm_sdkpy
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "berth"

Values = dict[str, typing.Any]


class Severity(enum.IntEnum):
    """Helm's lint severities (``pkg/lint/support``)."""

    UNKNOWN = 0
    INFO = 1
    WARNING = 2
    ERROR = 3


@dataclasses.dataclass(frozen=True)
class LintMessage:
    severity: Severity
    path: str  # helm-sdkpy drops the message text; the path says which file it is about


def default_values() -> Values:
    loaded: Values = yaml.safe_load((CHART / "values.yaml").read_text())
    return loaded


def merged(base: Values, overrides: Values) -> Values:
    """``overrides`` deep-merged into a copy of ``base``, as Helm merges ``-f`` files."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_with_values(tmp_path: pathlib.Path, overrides: Values) -> pathlib.Path:
    """A copy of the chart whose ``values.yaml`` is the defaults merged with ``overrides``."""
    target = tmp_path / "berth"
    shutil.copytree(CHART, target)
    values = merged(default_values(), overrides)
    (target / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    return target


async def lint(chart: pathlib.Path) -> list[LintMessage]:
    result = await helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(str(chart))
    assert result["TotalChartsLinted"] == 1, result
    return [LintMessage(Severity(m["Severity"]), m["Path"]) for m in result.get("Messages") or []]


def problems(messages: list[LintMessage]) -> list[LintMessage]:
    """Warnings and errors: what "lint passes with no warnings" forbids."""
    return [m for m in messages if m.severity >= Severity.WARNING]


def schema_leaves(schema: Values, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of the values the schema documents; an object with ``properties`` is recursed."""
    leaves: list[tuple[str, ...]] = []
    for name, sub in schema.get("properties", {}).items():
        path = (*prefix, name)
        if "properties" in sub:
            leaves.extend(schema_leaves(sub, path))
        else:
            leaves.append(path)
    return leaves


def lookup(values: Values, path: tuple[str, ...]) -> typing.Any:
    """The value at ``path``, or :data:`MISSING`."""
    node: typing.Any = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
    return node


MISSING = object()


# Value sets that, together, set every documented option to something other than its default
# (tests/packaging/test_chart_lint.py checks that they do). Each must lint and render cleanly.
EVERY_OPTION: Values = {
    # One release per cluster creates runai-reservation (the defaults' here).
    "gpuSharing": {"createNamespace": False},
    "replicaCount": 3,
    "image": {
        "repository": "registry.example.com/platform/berth",
        "tag": "0.1.0-rc.1",
        "digest": "sha256:" + "ab" * 32,
        "pullPolicy": "Always",
    },
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "nameOverride": "batch",
    "fullnameOverride": "batch-scheduler",
    "schedulerName": "batch-scheduler",
    "mode": "admission",
    "admission": {
        "namespaces": "all",
        "webhook": {"port": 8443, "failurePolicy": "Ignore", "timeoutSeconds": 10},
        "bindTimeout": "2m",
    },
    "admitPlainPods": False,
    "groupByOwner": False,
    "autoscaling": {"protectNodes": False, "capacityRequests": False},
    "interop": {
        "schedulerPlugins": {"enabled": False, "installCRD": True, "claimPods": True},
        "volcano": {"enabled": False, "installCRD": True, "claimPods": True},
        "workloadAPI": {"enabled": False},
    },
    "evictionWait": "45s",
    "reservationRetention": "1h30m",
    "logLevel": "debug",
    "leaderElection": {"enabled": True},
    "debugAPI": {"enabled": True},
    # A bin-packing profile: ImageLocality dropped, BalancedAllocation added by extraPlugins.
    "profile": {
        "actions": ["allocate", "backfill"],
        "plugins": [
            {"name": "Priority"},
            {"name": "Gang", "args": {}},
            {"name": "NodeName"},
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
            {"name": "ImageLocality"},
            {"name": "DefaultBinder"},
        ],
        "disabled": ["ImageLocality"],
    },
    "extraPlugins": [{"name": "BalancedAllocation", "weight": 2}],
    "extraArgs": ["--namespace=batch-system"],
    "extraEnv": [{"name": "PYTHONFAULTHANDLER", "value": "1"}],
    "http": {
        "port": 9090,
        "viewers": [{"kind": "Group", "name": "ops", "apiGroup": "rbac.authorization.k8s.io"}],
    },
    "serviceAccount": {
        "create": True,
        "name": "batch-scheduler-sa",
        "annotations": {"iam.example.com/role": "scheduler"},
    },
    "rbac": {"create": True, "limitPodWrites": True, "protectMarkers": True},
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
    "podAntiAffinity": "hard",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    "priorityClassName": "system-cluster-critical",
    "podAnnotations": {"example.com/team": "platform"},
    "podLabels": {"example.com/tier": "control-plane"},
    "runAsUser": 20000,
    "runAsGroup": 20000,
    "terminationGracePeriodSeconds": 60,
    "metrics": {
        "service": {"port": 9191, "annotations": {"example.com/scrape": "true"}},
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "scrapeTimeout": "5s",
            "labels": {"release": "prometheus"},
        },
    },
    "podDisruptionBudget": {"enabled": True, "maxUnavailable": "50%"},
    "networkPolicy": {"httpFrom": [{"namespaceSelector": {"matchLabels": {"monitoring": "on"}}}]},
}
CERT_MANAGER: Values = {
    # One release per cluster creates runai-reservation (the defaults' here).
    "gpuSharing": {"createNamespace": False},
    # GitOps: rendered with `helm template`, certificates from cert-manager; metrics open.
    "mode": "admission",
    "admission": {
        "webhook": {
            "certManager": {
                "enabled": True,
                "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"},
            }
        }
    },
    "http": {"authorization": False},
    "networkPolicy": {"enabled": False},
}
SINGLE_REPLICA: Values = {
    # No reservation pods for shared GPUs: no Role in runai-reservation.
    "gpuSharing": {"reservationPods": False},
    "replicaCount": 1,
    "admission": {"webhook": {"enabled": False}},  # ignored in scheduler mode
    "leaderElection": {"enabled": False},
    "podAntiAffinity": "none",
    "podDisruptionBudget": {"enabled": False},
    "serviceAccount": {"create": False, "name": "existing-scheduler"},
    "rbac": {"create": False},
    "runAsUser": None,
    "runAsGroup": None,
}
CUSTOM_AFFINITY: Values = {
    # One release per cluster creates runai-reservation (the defaults' here).
    "gpuSharing": {"createNamespace": False},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "node-role.kubernetes.io/control-plane",
                                "operator": "DoesNotExist",
                            }
                        ]
                    }
                ]
            }
        }
    },
    # Scheduler mode with the queue-access webhook (admission mode always checks).
    "queueAccess": {"webhook": True},
    # Leader election without the server-side fence, nor the pod-writes and markers policies
    # (a cluster older than 1.30 has no ValidatingAdmissionPolicy).
    "leaderElection": {"enabled": True, "serverFence": False},
    "rbac": {"create": True, "limitPodWrites": False, "protectMarkers": False},
}
OPTION_SETS: dict[str, Values] = {
    "defaults": {},
    "every-option": EVERY_OPTION,
    "single-replica": SINGLE_REPLICA,
    "custom-affinity": CUSTOM_AFFINITY,
    "cert-manager": CERT_MANAGER,
}


# Installing into the emulator ---------------------------------------------------------------


def cert_manager_crd(kind: str, plural: str) -> Values:
    """What cert-manager would have installed for ``kind``: enough for the API to store one."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


SERVICE_MONITOR_CRD: Values = {
    # What the Prometheus Operator would have installed: enough for the API to store one.
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "plural": "servicemonitors",
            "singular": "servicemonitor",
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


async def install(
    kubeconfig: pathlib.Path, *, release: str, namespace: str, values: Values
) -> dict[str, typing.Any]:
    """``helm install RELEASE helm/berth -n NAMESPACE --create-namespace`` with ``values``."""
    configuration = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=str(kubeconfig))
    result: dict[str, typing.Any] = await helm_sdkpy.Install(configuration).run(
        release,
        str(CHART),
        values=values,
        create_namespace=True,
        wait=False,  # nothing runs the pods in the emulator; the objects are what is checked
        timeout=60,
    )
    return result
