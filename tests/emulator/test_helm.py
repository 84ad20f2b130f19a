"""Helm (through ``helm-sdkpy``) installs a small chart into the emulator.

We test these aspects:
- ``Install`` of ``charts/demo`` succeeds (without waiting: no controller runs Deployments);
- every object of the chart is stored and readable with kubectl, with the chart's values;
- Helm's release record (a Secret labelled ``owner=helm``) is stored too.
"""

from __future__ import annotations

import asyncio
import pathlib

import pytest
import yaml

from berth.emulator import testing

helm_sdkpy = pytest.importorskip("helm_sdkpy")
CHART = pathlib.Path(__file__).parent / "charts" / "demo"


def test_install_stores_the_chart_objects(emulator: testing.RunningEmulator) -> None:
    config = helm_sdkpy.Configuration(namespace="default", kubeconfig=str(emulator.kubeconfig))
    install = helm_sdkpy.Install(config)
    result = asyncio.run(
        install.run("demo", str(CHART), values={"greeting": "hi"}, wait=False, timeout=60)
    )
    assert result
    out = emulator.kubectl("get", "cm,sa,svc,deploy,role,rolebinding", "-o", "name").stdout.split()
    for name in (
        "configmap/demo-config",
        "serviceaccount/demo",
        "service/demo",
        "deployment.apps/demo",
        "role.rbac.authorization.k8s.io/demo",
        "rolebinding.rbac.authorization.k8s.io/demo",
    ):
        assert name in out
    config_map = yaml.safe_load(emulator.kubectl("get", "cm", "demo-config", "-o", "yaml").stdout)
    assert config_map["data"] == {"greeting": "hi"}
    deployment = yaml.safe_load(emulator.kubectl("get", "deploy", "demo", "-o", "yaml").stdout)
    assert deployment["spec"]["replicas"] == 2
    releases = emulator.kubectl("get", "secrets", "-l", "owner=helm", "-o", "name").stdout.split()
    assert releases == ["secret/sh.helm.release.v1.demo.v1"]
