"""Kueue as a real-control-plane component, what can be checked without a cluster.

We test these aspects:
- the CRDs get the conversion webhook exactly where Kueue's CRD kustomization patches it in,
  pointed at the local URL with the CA;
- the webhook configurations keep Kueue's own kinds and the enabled integrations' webhooks
  only (a webhook for pods or Deployments, unserved, would refuse every pod of the cluster),
  named as Kueue's overlay names them, pointed at the local URL;
- the certificates are ones Kueue's cert rotator accepts (an RSA CA named ``kueue-ca``, PKCS#1
  keys, a serving certificate for the webhook Service's name) and the API server can dial
  (127.0.0.1);
- an extra component that is not built says how to build it; ``hack/build-k8s`` refuses an
  unknown extra, and ``--print kueue`` answers from the cache alone;
- Kueue not built fails to start with an error naming Kueue.
"""

from __future__ import annotations

import base64
import ipaddress
import pathlib
import subprocess

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from berth.realcluster import binaries, kueue, processes

REPO = pathlib.Path(__file__).resolve().parents[2]


def _crd(name: str) -> dict[str, object]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": "kueue.x-k8s.io", "versions": []},
    }


def _webhook(name: str, group: str, resource: str) -> dict[str, object]:
    return {
        "name": name,
        "clientConfig": {"service": {"name": "webhook-service", "path": f"/{name}"}},
        "rules": [{"apiGroups": [group], "resources": [resource]}],
    }


@pytest.fixture
def module_files(tmp_path: pathlib.Path) -> pathlib.Path:
    """The layout ``hack/build-k8s --with kueue`` copies out of Kueue's module."""
    config = tmp_path / "config"
    for sub in ("crd", "crd-patches", "webhook"):
        (config / sub).mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    for name in ("workloads", "resourceflavors", "topologies"):
        (config / "crd" / f"kueue.x-k8s.io_{name}.yaml").write_text(
            yaml.safe_dump(_crd(f"{name}.kueue.x-k8s.io"))
        )
    for name in ("workloads", "resourceflavors"):
        patch = {"metadata": {"name": f"{name}.kueue.x-k8s.io"}}
        (config / "crd-patches" / f"webhook_in_{name}.yaml").write_text(yaml.safe_dump(patch))
    # As upstream: the resourceflavors patch file exists but the kustomization leaves it out.
    (config / "crd-patches" / "kustomization.yaml").write_text(
        "patches:\n- path: patches/webhook_in_workloads.yaml\n"
        "#- path: patches/webhook_in_resourceflavors.yaml\n"
    )
    manifests = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                _webhook("mjob", "batch", "jobs"),
                _webhook("mpod", "", "pods"),
                _webhook("mworkload", "kueue.x-k8s.io", "workloads"),
                _webhook("mdeployment", "apps", "deployments"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [_webhook("vjob", "batch", "jobs"), _webhook("vpod", "", "pods")],
        },
    ]
    (config / "webhook" / "manifests.yaml").write_text(yaml.safe_dump_all(manifests))
    return tmp_path


def test_crds_get_the_conversion_webhook_the_kustomization_turns_on(
    module_files: pathlib.Path,
) -> None:
    crds = {
        c["metadata"]["name"]: c
        for c in kueue.crds(module_files, url="https://127.0.0.1:9443", ca_bundle=b"CA")
    }
    assert set(crds) == {
        "workloads.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "topologies.kueue.x-k8s.io",
    }
    conversion = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/convert",
        "caBundle": base64.b64encode(b"CA").decode(),
    }
    assert "conversion" not in crds["resourceflavors.kueue.x-k8s.io"]["spec"]
    assert "conversion" not in crds["topologies.kueue.x-k8s.io"]["spec"]


def test_only_the_enabled_webhooks_are_installed_pointed_here(
    module_files: pathlib.Path,
) -> None:
    configurations = kueue.webhook_configurations(
        module_files, url="https://127.0.0.1:9443", ca_bundle=b"CA", frameworks=["batch/job"]
    )
    found = {c["metadata"]["name"]: [w["name"] for w in c["webhooks"]] for c in configurations}
    assert found == {
        "kueue-mutating-webhook-configuration": ["mjob", "mworkload"],
        "kueue-validating-webhook-configuration": ["vjob"],
    }
    job = configurations[0]["webhooks"][0]
    assert job["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mjob",
        "caBundle": base64.b64encode(b"CA").decode(),
    }


def test_the_certificates_are_ones_kueues_rotator_keeps(tmp_path: pathlib.Path) -> None:
    files = kueue._certificates(tmp_path / "certs")
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == files["tls.crt"]
    for key in ("ca.key", "tls.key"):
        assert files[key].startswith(b"-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1
    ca = x509.load_pem_x509_certificate(files["ca.crt"])
    assert isinstance(ca.public_key(), rsa.RSAPublicKey)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    ca_names = ca.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ca_names.get_values_for_type(x509.DNSName) == ["kueue-ca"]
    serving = x509.load_pem_x509_certificate(files["tls.crt"])
    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["kueue-webhook-service.kueue-system.svc"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    # The rotator renews what expires within 90 days.
    assert (serving.not_valid_after_utc - serving.not_valid_before_utc).days > 90


def test_an_extra_not_built_says_how_to_build_it(tmp_path: pathlib.Path) -> None:
    with pytest.raises(binaries.BinariesMissing) as missing:
        binaries.extra("kueue", {"BERTH_CACHE": str(tmp_path)})
    message = str(missing.value)
    assert str(tmp_path / "kueue" / "v0.17.0") in message
    assert "bash hack/build-k8s --with kueue" in message
    with pytest.raises(ValueError, match="no extra component 'karpenterx'"):
        binaries.extra("karpenterx")


def test_build_script_answers_about_extras_from_the_cache(tmp_path: pathlib.Path) -> None:
    script = REPO / "hack" / "build-k8s"
    env = {"BERTH_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(script), *args], capture_output=True, text=True, env=env, check=False
        )

    assert run("--print", "kueue").returncode == 1
    (tmp_path / "kueue" / "v0.17.0" / "bin").mkdir(parents=True)
    printed = run("--print", "kueue")
    assert printed.returncode == 0
    assert printed.stdout.strip() == str(tmp_path / "kueue" / "v0.17.0")
    unknown = run("--with", "nothing")
    assert unknown.returncode == 2 and "no extra component 'nothing'" in unknown.stderr
    assert run("--bogus").returncode == 2


def test_kueue_not_built_cannot_start(tmp_path: pathlib.Path) -> None:
    class Plane:  # only what Kueue reads before it finds no build
        directory = tmp_path

        def log(self, component: str) -> pathlib.Path:
            return tmp_path / f"{component}.log"

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTH_CACHE", str(tmp_path))
        with pytest.raises(processes.ComponentFailed, match=r"^kueue: no kueue v0.17.0 in"):
            kueue.Kueue(Plane())  # type: ignore[arg-type]


def test_crds_that_do_not_install_fail_naming_kueue_and_undo(
    module_files: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    (module_files / "bin" / "kueue").write_text("#!/bin/sh\n")
    calls: list[tuple[str, ...]] = []

    class Plane:  # the API server refuses the CRDs
        directory = tmp_path

        def log(self, component: str) -> pathlib.Path:
            return tmp_path / f"{component}.log"

        def kubectl(self, *args: str, **_: object) -> subprocess.CompletedProcess[str]:
            calls.append(args)
            return subprocess.CompletedProcess(list(args), 1, "", "the server said no")

    manager = kueue.Kueue(Plane(), directory=module_files)  # type: ignore[arg-type]
    with pytest.raises(processes.ComponentFailed) as failed:
        manager.start()
    assert str(failed.value) == "kueue: installing its CRDs failed: the server said no"
    assert manager.process is None  # nothing was started
    assert all(call[0] == "apply" for call in calls)  # nothing else was tried
