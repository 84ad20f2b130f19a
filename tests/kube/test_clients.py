"""kube.transport.clients: connections configured as kubectl configures itself, and ``create``.

Aspects:
- which kubeconfig files apply: an explicit path (must exist), the ``KUBECONFIG`` list (missing
  entries skipped, order kept), else ``~/.kube/config``;
- the current context or ``context``, and its namespace (``default`` when it names none);
- the in-cluster service account when no kubeconfig exists inside a pod;
- configuration problems are ``ConfigError`` with a message saying what to do;
- ``create`` against the emulator: the stored object back, ``dry_run`` stores nothing, HTTP
  errors as ``berth.kube.transport.errors`` by status, an unreachable server as ``TransportError``;
- the asynchronous client reads no ``.netrc`` (a login there would clash with the token), and
  takes the environment's proxy for the API server (``HTTPS_PROXY``, ``NO_PROXY``) once at
  connect, a kubeconfig ``proxy-url`` first.
"""

from __future__ import annotations

import pathlib
import socket
import typing

import kubernetes.config.incluster_config
import pytest
import yaml

from berth.emulator import testing
from berth.kube.transport import clients, errors, rest


def kubeconfig(
    path: pathlib.Path, *, server: str, namespaces: dict[str, str | None]
) -> pathlib.Path:
    """A kubeconfig with one context per entry of ``namespaces`` (the first is current)."""
    contexts = [
        {"name": name, "context": {"cluster": "c", "user": "u"} | ({"namespace": ns} if ns else {})}
        for name, ns in namespaces.items()
    ]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": contexts,
        "current-context": contexts[0]["name"],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_an_explicit_kubeconfig_must_exist(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.ConfigError, match="does not exist"):
        clients.kubeconfig_paths(str(tmp_path / "absent"))


def test_kubeconfig_list_keeps_order_and_skips_missing_files(tmp_path: pathlib.Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("{}")
    second.write_text("{}")
    listed = ":".join([str(second), str(tmp_path / "absent"), str(first)])
    assert clients.kubeconfig_paths(environ={"KUBECONFIG": listed}) == [second, first]


def test_home_kubeconfig_when_kubeconfig_is_unset(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert clients.kubeconfig_paths(environ={}) == []
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert clients.kubeconfig_paths(environ={}) == [tmp_path / ".kube" / "config"]


@pytest.mark.parametrize(
    ("context", "namespace"),
    [(None, "default"), ("team", "team-a")],
    ids=["current-context", "named-context"],
)
def test_connect_uses_the_contexts_namespace(
    tmp_path: pathlib.Path, context: str | None, namespace: str
) -> None:
    path = kubeconfig(
        tmp_path / "config",
        server="https://10.1.2.3:6443",
        namespaces={"main": None, "team": "team-a"},
    )
    with clients.connect(kubeconfig=str(path), context=context) as connection:
        assert (connection.namespace, connection.server) == (namespace, "https://10.1.2.3:6443")
        assert connection.origin == str(path)


def test_an_unknown_context_is_a_config_error(tmp_path: pathlib.Path) -> None:
    path = kubeconfig(
        tmp_path / "config", server="https://10.1.2.3:6443", namespaces={"main": None}
    )
    with pytest.raises(errors.ConfigError, match='context "other" does not exist'):
        clients.connect(kubeconfig=str(path), context="other").__enter__()


def test_no_configuration_anywhere_is_a_config_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(errors.ConfigError, match="pass --kubeconfig or set KUBECONFIG"):
        clients.connect().__enter__()


def test_in_cluster_service_account_when_no_kubeconfig(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("secret-token")
    (account / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (account / "namespace").write_text("berth-system\n")
    incluster = kubernetes.config.incluster_config
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(account / "token"))
    monkeypatch.setattr(incluster, "SERVICE_CERT_FILENAME", str(account / "ca.crt"))
    monkeypatch.setattr(clients, "_SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with clients.connect() as connection:
        assert (connection.server, connection.namespace, connection.origin) == (
            "https://10.96.0.1:443",
            "berth-system",
            "in-cluster",
        )


CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}


def create(emulator: testing.RunningEmulator, *, dry_run: bool = False) -> dict[str, typing.Any]:
    with clients.connect(kubeconfig=str(emulator.kubeconfig)) as connection:
        return clients.create(
            connection,
            body={**CONFIG_MAP, "data": {"k": "v"}},
            plural="configmaps",
            namespace="default",
            dry_run=dry_run,
        )


def test_create_returns_the_stored_object(emulator: testing.RunningEmulator) -> None:
    stored = create(emulator)
    assert stored["metadata"]["name"] == "settings"
    assert stored["metadata"]["uid"]
    assert stored["data"] == {"k": "v"}
    assert emulator.kubectl("get", "configmap", "settings", check=False).returncode == 0


def test_create_dry_run_stores_nothing(emulator: testing.RunningEmulator) -> None:
    assert create(emulator, dry_run=True)["metadata"]["name"] == "settings"
    assert emulator.kubectl("get", "configmap", "settings", check=False).returncode == 1


def test_create_errors_come_as_kube_errors(emulator: testing.RunningEmulator) -> None:
    create(emulator)
    with pytest.raises(errors.Conflict) as raised:
        create(emulator)
    assert (raised.value.status, raised.value.reason) == (409, "AlreadyExists")


def test_an_unreachable_server_is_a_transport_error(tmp_path: pathlib.Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = kubeconfig(
        tmp_path / "config", server=f"http://127.0.0.1:{port}", namespaces={"m": None}
    )
    with (
        clients.connect(kubeconfig=str(path)) as connection,
        pytest.raises(errors.TransportError, match="did not answer"),
    ):
        clients.create(
            connection, body=CONFIG_MAP, plural="configmaps", namespace="default", timeout=5
        )


async def test_a_netrc_entry_for_the_api_server_is_not_read(
    emulator: testing.RunningEmulator, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An environment-trusting session would add this login to every request (and refuse to
    # send it beside the bearer token), after a worker-thread lookup each time.
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    monkeypatch.setenv("NETRC", str(netrc))
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection:
        listed = await rest.request(connection.api, method="GET", path="/api/v1/namespaces")
    assert listed["kind"] == "NamespaceList"


@pytest.mark.parametrize(
    ("environment", "proxy_url", "expected"),
    [
        ({"HTTPS_PROXY": "http://proxy.example:3128"}, None, "http://proxy.example:3128"),
        (
            {"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "api.example"},
            None,
            None,
        ),
        ({"HTTP_PROXY": "http://proxy.example:3128"}, None, None),
        (
            {"HTTPS_PROXY": "http://proxy.example:3128"},
            "http://chosen.example:8080",
            "http://chosen.example:8080",
        ),
        ({}, None, None),
    ],
    ids=["https-proxy", "no-proxy-bypasses", "other-scheme", "kubeconfig-wins", "none"],
)
async def test_the_environments_proxy_is_resolved_once_at_connect(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    proxy_url: str | None,
    expected: str | None,
) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = kubeconfig(
        tmp_path / "config", server="https://api.example:6443", namespaces={"m": None}
    )
    if proxy_url is not None:
        document = yaml.safe_load(path.read_text())
        document["clusters"][0]["cluster"]["proxy-url"] = proxy_url
        path.write_text(yaml.safe_dump(document))
    async with clients.connect_async(kubeconfig=str(path)) as connection:
        assert connection.api.configuration.proxy == expected
