"""The partition experiment: the leader cut off from the API server by the fault proxy.

The failover run of :mod:`berth.chaos.sigstop`, with the leader-to-be talking to the API
server through a :class:`~berth.chaos.proxy.ThreadedProxy` and, instead of SIGSTOP, a fault of
that proxy for longer than the Lease (``reset``: every connection reset; ``drop``: a black
hole; ``stall``: every byte held, and delivered late when it heals). The leader keeps running
all along — unlike a paused one, it sees its renewals fail, so it must step down within the
renew deadline, and the fence (:mod:`berth.kube.transport.fencing`) must keep everything it prepared
from being written once its Lease may be another's. The follower talks to the API server
directly, takes over and binds; then the fault heals.

The same invariants are counted at the API server (:class:`~berth.chaos.sigstop.RunResult`),
plus the proxy's counters (faults injected, connections reset, bytes dropped).
:func:`proxied_kubeconfig` writes the kubeconfig that goes through a proxy, for
``berth chaos proxy`` too.
"""

from __future__ import annotations

import pathlib
import typing
import urllib.parse

import yaml

from berth.chaos import proxy, sigstop

__all__ = ["PartitionSummary", "ProxyFault", "proxied_kubeconfig", "run_many", "upstream"]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class PartitionSummary(sigstop.SummaryJson):
    """The JSON object ``berth chaos partition`` prints."""

    fault: str
    proxy: proxy.CountersJson


class KubeconfigCluster(typing.TypedDict, total=False):
    server: str


class _NamedCluster(typing.TypedDict):
    name: str
    cluster: KubeconfigCluster


class _Context(typing.TypedDict, total=False):
    cluster: str


class _NamedContext(typing.TypedDict):
    name: str
    context: _Context


# A kubeconfig (client-go's document): the fields read here. Whatever else the user's file has
# stays in the dicts yaml.safe_load made, so the copy written back carries it.
Kubeconfig = typing.TypedDict(
    "Kubeconfig",
    {
        "clusters": list[_NamedCluster],
        "contexts": list[_NamedContext],
        "current-context": str,
    },
    total=False,
)


def _cluster(config: Kubeconfig) -> KubeconfigCluster:
    """The cluster entry of the kubeconfig's current context."""
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    current = contexts.get(config.get("current-context") or "") or next(iter(contexts.values()))
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
    return clusters[current["cluster"]]


def upstream(kubeconfig: pathlib.Path) -> str:
    """``HOST:PORT`` of the API server ``kubeconfig`` points at (loopback only: the proxy
    listens on 127.0.0.1 and the server's certificate must still match)."""
    config: Kubeconfig = yaml.safe_load(kubeconfig.read_text())
    url = urllib.parse.urlsplit(str(_cluster(config)["server"]))
    if url.hostname not in _LOOPBACK:
        raise ValueError(
            f"the API server {url.hostname} is not on loopback: the proxy stands in for it on "
            "127.0.0.1, where its certificate would not match"
        )
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"127.0.0.1:{port}"


def proxied_kubeconfig(kubeconfig: pathlib.Path, *, port: int, to: pathlib.Path) -> pathlib.Path:
    """A copy of ``kubeconfig`` whose API server is reached through the proxy on ``port``."""
    config: Kubeconfig = yaml.safe_load(kubeconfig.read_text())
    cluster = _cluster(config)
    url = urllib.parse.urlsplit(str(cluster["server"]))
    cluster["server"] = urllib.parse.urlunsplit(url._replace(netloc=f"127.0.0.1:{port}"))
    to.write_text(yaml.safe_dump(config))
    return to


class ProxyFault:
    """A :class:`~berth.chaos.sigstop.Disruption`: the proxy's ``fault`` from begin to end."""

    def __init__(self, through: proxy.ThreadedProxy, fault: proxy.Fault) -> None:
        if fault is proxy.Fault.NONE:
            raise ValueError("a partition needs a fault")
        self.proxy = through
        self.fault = fault

    def kubeconfig(self, experiment: sigstop.Experiment, own: pathlib.Path) -> pathlib.Path | None:
        return proxied_kubeconfig(
            own,
            port=self.proxy.port,
            to=experiment.workdir / "through-proxy.kubeconfig",
        )

    def begin(self, leader: sigstop.Replica) -> None:
        self.proxy.set_fault(self.fault)

    def end(self, leader: sigstop.Replica) -> None:
        self.proxy.set_fault(proxy.Fault.NONE)


async def run_many(
    experiment: sigstop.Experiment, *, runs: int, fault: proxy.Fault
) -> PartitionSummary:
    """``runs`` partitions of the leader; the summary with the proxy's counters."""
    experiment.workdir.mkdir(parents=True, exist_ok=True)
    with proxy.ThreadedProxy(upstream(experiment.replicas_kubeconfig)) as through:
        summary = await sigstop.run_many(
            experiment, runs=runs, disruption=ProxyFault(through, fault)
        )
        counters = through.counters
    return {"fault": fault.value, **summary.as_dict(), "proxy": counters.as_dict()}
