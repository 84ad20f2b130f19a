"""``kubectl berth queue Q --operator URL`` against an operator that authorizes its callers.

The operator serves its API only to bearer tokens RBAC allows (``berth run``'s default). We test
these aspects, against a stand-in operator that wants one token:

- ``--token`` (or ``$BERTH_OPERATOR_TOKEN``) is sent as the bearer token, and the line is shown;
- without ``--token`` the kubeconfig user's bearer token is sent (what kubectl sends the API
  server);
- a refused token (401, 403) fails with the operator's answer and says which grant is missing.
"""

from __future__ import annotations

import asyncio
import collections.abc
import pathlib
import threading
import typing

import aiohttp.web
import click.testing
import pytest
import yaml

from berth.cli import kubectl_berth

GOOD = "sekret"


class Operator:
    """Answers /berth/v1/queues and the line of team-a to ``Bearer sekret``; 401/403 else."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        header = request.headers.get("Authorization", "")
        self.seen.append(header)
        if not header:
            return aiohttp.web.json_response({"error": "no bearer token"}, status=401)
        if header != f"Bearer {GOOD}":
            return aiohttp.web.json_response(
                {"error": 'user "nobody" may not get /berth/v1/queues'}, status=403
            )
        if request.path == "/berth/v1/queues":
            item = {"name": "team-a", "state": "Open", "pendingPods": 1, "runningPods": 0}
            return aiohttp.web.json_response({"items": [item]})
        entry = {"position": 1, "kind": "PodGroup", "namespace": "ml", "name": "big"}
        return aiohttp.web.json_response({"total": 1, "items": [entry]})


@pytest.fixture
def operator() -> collections.abc.Iterator[tuple[str, Operator]]:
    stand_in = Operator()
    app = aiohttp.web.Application()
    app.router.add_get("/berth/v1/{tail:.*}", stand_in.handle)
    loop = asyncio.new_event_loop()
    runner = aiohttp.web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", stand_in
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def _kubeconfig(path: pathlib.Path, token: str | None) -> str:
    user: dict[str, typing.Any] = {"token": token} if token else {}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def _queue(*args: str, kubeconfig: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(
        kubectl_berth.cli, ["queue", "team-a", *args], env={"KUBECONFIG": kubeconfig}
    )


def test_the_token_given_is_sent(operator: tuple[str, Operator], tmp_path: pathlib.Path) -> None:
    url, stand_in = operator
    shown = _queue("--operator", url, "--token", GOOD, kubeconfig=_kubeconfig(tmp_path / "k", None))
    assert shown.exit_code == 0, shown.output
    assert "ml/big" in shown.output
    assert set(stand_in.seen) == {f"Bearer {GOOD}"}


def test_the_kubeconfig_users_token_is_sent_by_default(
    operator: tuple[str, Operator], tmp_path: pathlib.Path
) -> None:
    url, stand_in = operator
    shown = _queue("--operator", url, kubeconfig=_kubeconfig(tmp_path / "k", GOOD))
    assert shown.exit_code == 0, shown.output
    assert set(stand_in.seen) == {f"Bearer {GOOD}"}


@pytest.mark.parametrize(("token", "code"), [(None, 401), ("stolen", 403)])
def test_a_refused_token_says_which_grant_is_missing(
    operator: tuple[str, Operator], tmp_path: pathlib.Path, token: str | None, code: int
) -> None:
    url, _ = operator
    shown = _queue("--operator", url, kubeconfig=_kubeconfig(tmp_path / "k", token))
    assert shown.exit_code == 1
    assert f"the operator at {url} answered {code}" in shown.output
    assert "get on nonResourceURLs /berth/*" in shown.output
