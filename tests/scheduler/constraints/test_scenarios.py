"""Scenario tables for NodePorts, InterPodAffinity and PodTopologySpread, in the in-memory cluster.

Each case runs one default-profile cycle through the real loop and checks every binding and the
exact reasons of the pods and groups named. The cases follow kube-scheduler's documented
examples and edge cases:

- host ports: TCP/UDP, host IPs against ``0.0.0.0``, ``hostNetwork``, two gang members asking
  for the same port;
- pod affinity: to a zone's pods, to pods in other namespaces (``namespaces``, an empty
  ``namespaceSelector``, one matching namespace labels), the first pod of a self-affine group,
  a topologyKey no node has;
- anti-affinity: one per node, gang members among themselves (all-or-nothing), an existing
  pod's anti-affinity against the incoming pod (symmetric), preferred (anti-)affinity;
- topology spread: skew across zones, a domain whose only node is cordoned (the documented
  caveat, and ``nodeTaintsPolicy: Honor``), ``minDomains``, ``matchLabelKeys``,
  ``nodeAffinityPolicy``, ``ScheduleAnyway``, a gang spread over zones, a missing key.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from tests.scheduler import builders as b
from tests.scheduler.constraints import specs as s
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
WEB = {"app": "web"}


@dataclasses.dataclass(frozen=True)
class Scenario:
    id: str
    objects: list[Obj]
    bound: dict[str, str]  # every binding of the cycle: pod key (or name in default) -> node
    pods: dict[str, str] = dataclasses.field(default_factory=dict)  # pod -> exact reason
    groups: dict[str, str] = dataclasses.field(default_factory=dict)  # group -> exact reason


def _key(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def namespace(name: str, **labels: str) -> Obj:
    """A Namespace with ``labels``."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def zoned(name: str, zone: str, **fields: typing.Any) -> Obj:
    """A node in ``zone``."""
    return b.node(name, labels={s.ZONE: zone}, **fields)


ZONES = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")]
ANTI_WEB = s.affinity(anti=[s.term(s.HOSTNAME, s.labels(app="web"))])

SCENARIOS = [
    # NodePorts -------------------------------------------------------------------------------
    Scenario(
        "port-taken-goes-elsewhere",
        [
            b.node("n1"),
            b.node("n2"),
            b.pod("old", node="n1", spec=s.ports((8080, "TCP", ""))),
            b.pod("p", spec=s.ports((8080, "TCP", ""))),
        ],
        {"p": "n2"},
    ),
    Scenario(
        "other-protocol-and-other-ip-share",
        [
            b.node("n1"),
            b.pod("old", node="n1", spec=s.ports((53, "UDP", ""), (80, "TCP", "10.0.0.1"))),
            b.pod("p", spec=s.ports((53, "TCP", ""), (80, "TCP", "10.0.0.2"))),
        ],
        {"p": "n1"},
    ),
    Scenario(
        "any-ip-conflicts-with-a-specific-ip",
        [
            b.node("n1"),
            b.pod("old", node="n1", spec=s.ports((80, "TCP", "10.0.0.1"))),
            b.pod("p", spec=s.ports((80, "TCP", ""))),
        ],
        {},
        pods={"p": "0/1 nodes fit: 1 node(s) didn't have free ports for the requested pod ports"},
    ),
    Scenario(
        "host-network-container-port-is-a-host-port",
        [
            b.node("n1"),
            b.node("n2"),
            b.pod("old", node="n1", spec=s.ports((9100, "TCP", ""), host_network=True)),
            b.pod("p", spec=s.ports((9100, "TCP", ""))),
        ],
        {"p": "n2"},
    ),
    Scenario(
        "gang-members-never-share-a-port",
        [b.node("n1"), b.node("n2"), *b.gang("g", 3, spec=s.ports((7000, "TCP", "")))],
        {},
        groups={
            "g": "gang needs minMember 3, only 2 could be placed; 0/2 nodes fit: 2 node(s)"
            " didn't have free ports for the requested pod ports"
        },
    ),
    # InterPodAffinity: required affinity -------------------------------------------------------
    Scenario(
        "affinity-to-a-zones-pods",
        [
            *ZONES,
            b.pod("db", node="b1", labels={"app": "db"}),
            b.pod("p", spec=s.affinity(required=[s.term(s.ZONE, s.labels(app="db"))])),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "affinity-does-not-see-other-namespaces-by-default",
        [
            *ZONES,
            b.pod("db", namespace="data", node="b1", labels={"app": "db"}),
            b.pod("p", spec=s.affinity(required=[s.term(s.ZONE, s.labels(app="db"))])),
        ],
        {},
        pods={"p": "0/3 nodes fit: 3 node(s) didn't match pod affinity rules"},
    ),
    Scenario(
        "affinity-to-pods-in-named-namespaces",
        [
            *ZONES,
            b.pod("db", namespace="data", node="b1", labels={"app": "db"}),
            b.pod(
                "p",
                spec=s.affinity(required=[s.term(s.ZONE, s.labels(app="db"), namespaces=["data"])]),
            ),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "affinity-to-pods-in-every-namespace",
        [
            *ZONES,
            b.pod("db", namespace="data", node="a2", labels={"app": "db"}),
            b.pod(
                "p",
                spec=s.affinity(
                    required=[s.term(s.HOSTNAME, s.labels(app="db"), namespace_selector={})]
                ),
            ),
        ],
        {"p": "a2"},
    ),
    Scenario(
        "affinity-to-pods-in-namespaces-by-label",
        [
            *ZONES,
            namespace("data", team="db"),
            namespace("scratch"),
            b.pod("data/db", node="b1", labels={"app": "db"}),
            b.pod("scratch/db", node="a1", labels={"app": "db"}),
            b.pod(
                "p",
                spec=s.affinity(
                    required=[
                        s.term(s.ZONE, s.labels(app="db"), namespace_selector=s.labels(team="db"))
                    ]
                ),
            ),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "anti-affinity-to-pods-in-namespaces-by-label",
        [
            *ZONES,
            namespace("data", team="db"),
            b.pod("data/db", node="b1", labels={"app": "db"}),
            b.pod("hog", node="a1", cpu="3", memory=None),
            b.pod("hog2", node="a2", cpu="3", memory=None),
            b.pod(
                "p",
                spec=s.affinity(
                    anti=[
                        s.term(s.ZONE, s.labels(app="db"), namespace_selector=s.labels(team="db"))
                    ]
                ),
            ),
        ],
        # b1 is the emptiest, but its zone holds a db pod of a team=db namespace.
        {"p": "a1"},
    ),
    Scenario(
        "first-pod-of-a-self-affine-group",
        [
            *ZONES,
            *b.gang(
                "g", 3, labels=WEB, spec=s.affinity(required=[s.term(s.ZONE, s.labels(app="web"))])
            ),
        ],
        # The first member lands anywhere (a1, the emptiest first row); the others follow it
        # into its zone.
        {"g-0": "a1", "g-1": "a2", "g-2": "a1"},
    ),
    Scenario(
        "affinity-topology-key-no-node-has",
        [
            *ZONES,
            b.pod("db", node="b1", labels={"app": "db"}),
            b.pod("p", spec=s.affinity(required=[s.term("rack", s.labels(app="db"))])),
        ],
        {},
        pods={
            "p": "0/3 nodes fit: 3 node(s) didn't have the label rack"
            " (topologyKey of spec.affinity.podAffinity)"
        },
    ),
    # InterPodAffinity: anti-affinity -----------------------------------------------------------
    Scenario(
        "anti-affinity-one-per-node",
        [*ZONES, *[b.pod(f"w{i}", labels=WEB, spec=ANTI_WEB) for i in range(4)]],
        {"w0": "a1", "w1": "a2", "w2": "b1"},
        pods={"w3": "0/3 nodes fit: 3 node(s) didn't match pod anti-affinity rules"},
    ),
    Scenario(
        "gang-anti-affinity-among-members",
        [*ZONES, *b.gang("g", 3, labels=WEB, spec=ANTI_WEB)],
        {"g-0": "a1", "g-1": "a2", "g-2": "b1"},
    ),
    Scenario(
        "gang-anti-affinity-all-or-nothing",
        [*ZONES, *b.gang("g", 4, labels=WEB, spec=ANTI_WEB)],
        {},
        groups={
            "g": "gang needs minMember 4, only 3 could be placed; 0/3 nodes fit: 3 node(s)"
            " didn't match pod anti-affinity rules"
        },
    ),
    Scenario(
        "existing-pods-anti-affinity-is-symmetric",
        [
            *ZONES,
            b.pod("loner", node="a1", spec=s.affinity(anti=[s.term(s.ZONE, s.labels(app="web"))])),
            b.pod("p", labels=WEB),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "existing-anti-affinity-across-namespaces",
        [
            zoned("a1", "a"),
            zoned("b1", "b"),
            b.pod("hog", node="a1", cpu="3", memory=None),
            b.pod(
                "ops/loner",
                node="b1",
                spec=s.affinity(anti=[s.term(s.ZONE, s.labels(app="web"), namespaces=["shop"])]),
            ),
            b.pod("shop/p", labels=WEB, cpu="1", memory=None),
            b.pod("p", labels=WEB, cpu="1", memory=None),
        ],
        # The term names web pods in shop only: default/p takes the emptier b1, shop/p may not.
        {"shop/p": "a1", "p": "b1"},
    ),
    Scenario(
        "existing-anti-affinity-fills-the-cluster",
        [
            b.node("n1"),
            b.pod("loner", node="n1", spec=s.affinity(anti=[s.term(s.HOSTNAME, s.labels())])),
            b.pod("p"),
        ],
        {},
        pods={"p": "0/1 nodes fit: 1 node(s) didn't satisfy existing pods anti-affinity rules"},
    ),
    # InterPodAffinity: preferences -------------------------------------------------------------
    Scenario(
        "preferred-affinity-beats-spreading",
        [
            *ZONES,
            b.pod("cache", node="a2", labels={"app": "cache"}),
            b.pod(
                "p", spec=s.affinity(preferred=[(100, s.term(s.HOSTNAME, s.labels(app="cache")))])
            ),
        ],
        {"p": "a2"},
    ),
    Scenario(
        "preferred-anti-affinity-avoids-a-zone",
        [
            *ZONES,
            b.pod("noisy", node="b1", labels={"app": "noisy"}),
            b.pod("hog", node="a1", cpu="3", memory=None),
            b.pod("hog2", node="a2", cpu="3", memory=None),
            b.pod(
                "p", spec=s.affinity(anti_preferred=[(100, s.term(s.ZONE, s.labels(app="noisy")))])
            ),
        ],
        # b1 is emptiest, but its zone holds the pod p prefers to avoid.
        {"p": "a1"},
    ),
    Scenario(
        "existing-pods-preferred-affinity-attracts",
        [
            *ZONES,
            b.pod(
                "friend",
                node="b1",
                spec=s.affinity(preferred=[(100, s.term(s.HOSTNAME, s.labels(app="web")))]),
            ),
            b.pod("hog", node="b1", cpu="2", memory=None),
            b.pod("p", labels=WEB),
        ],
        {"p": "b1"},
    ),
    # PodTopologySpread -------------------------------------------------------------------------
    Scenario(
        "spread-over-zones",
        [
            *ZONES,
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="a2", labels=WEB),
            b.pod("p", labels=WEB, spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web")))),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "spread-skew-exceeded-everywhere",
        [
            *ZONES,
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="a2", labels=WEB),
            b.pod("full", node="b1", cpu="4", memory=None),
            b.pod("p", labels=WEB, spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web")))),
        ],
        {},
        pods={
            "p": "0/3 nodes fit: 2 node(s) didn't match pod topology spread constraints,"
            " 1 Insufficient cpu"
        },
    ),
    Scenario(
        "gang-spread-over-zones",
        [
            *ZONES,
            *b.gang("g", 4, labels=WEB, spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web")))),
        ],
        {"g-0": "a1", "g-1": "b1", "g-2": "a2", "g-3": "b1"},
    ),
    Scenario(
        "cordoned-domain-still-counts-by-default",
        [
            *ZONES,
            zoned("c1", "c", unschedulable=True),
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="b1", labels=WEB),
            b.pod("p", labels=WEB, spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web")))),
        ],
        {},
        pods={
            "p": "0/4 nodes fit: 3 node(s) didn't match pod topology spread constraints,"
            " 1 node(s) were unschedulable"
        },
    ),
    Scenario(
        "cordoned-domain-left-out-with-taints-honored",
        [
            *ZONES,
            zoned("c1", "c", unschedulable=True),
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="b1", labels=WEB),
            b.pod(
                "p",
                labels=WEB,
                spec=s.spreading(
                    s.spread(1, s.ZONE, s.labels(app="web"), node_taints_policy="Honor")
                ),
            ),
        ],
        {"p": "a2"},
    ),
    Scenario(
        "min-domains-counts-missing-domains-as-empty",
        [
            *ZONES,
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="b1", labels=WEB),
            b.pod(
                "p",
                labels=WEB,
                spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web"), min_domains=3)),
            ),
        ],
        {},
        pods={"p": "0/3 nodes fit: 3 node(s) didn't match pod topology spread constraints"},
    ),
    Scenario(
        "min-domains-met",
        [
            *ZONES,
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="b1", labels=WEB),
            b.pod(
                "p",
                labels=WEB,
                spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web"), min_domains=2)),
            ),
        ],
        {"p": "a2"},
    ),
    Scenario(
        "match-label-keys-count-only-this-revision",
        [
            *ZONES,
            b.pod("old0", node="b1", labels={**WEB, "rev": "1"}),
            b.pod("old1", node="b1", labels={**WEB, "rev": "1"}),
            b.pod("new0", node="a1", labels={**WEB, "rev": "2"}),
            b.pod("hog", node="a2", cpu="3500m", memory=None),
            b.pod(
                "p",
                labels={**WEB, "rev": "2"},
                spec=s.spreading(
                    s.spread(1, s.ZONE, s.labels(app="web"), match_label_keys=["rev"])
                ),
            ),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "node-affinity-policy-honor-leaves-out-other-nodes",
        [
            *ZONES,
            zoned("c1", "c"),
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="b1", labels=WEB),
            b.pod(
                "p",
                labels=WEB,
                affinity=b.affinity(required=[[b.expr(s.ZONE, "In", "a", "b")]]),
                spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web"))),
            ),
        ],
        {"p": "a2"},
    ),
    Scenario(
        "node-affinity-policy-ignore-counts-other-nodes",
        [
            *ZONES,
            zoned("c1", "c"),
            b.pod("w0", node="a1", labels=WEB),
            b.pod("w1", node="b1", labels=WEB),
            b.pod(
                "p",
                labels=WEB,
                affinity=b.affinity(required=[[b.expr(s.ZONE, "In", "a", "b")]]),
                spec=s.spreading(
                    s.spread(1, s.ZONE, s.labels(app="web"), node_affinity_policy="Ignore")
                ),
            ),
        ],
        {},
        pods={
            "p": "0/4 nodes fit: 3 node(s) didn't match pod topology spread constraints,"
            " 1 node(s) didn't match Pod's node affinity/selector"
        },
    ),
    Scenario(
        "other-namespaces-do-not-count",
        [
            *ZONES,
            b.pod("w0", namespace="other", node="b1", labels=WEB),
            b.pod("w1", node="a1", labels=WEB),
            b.pod("p", labels=WEB, spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web")))),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "schedule-anyway-prefers-the-emptier-zone",
        [
            *ZONES,
            b.pod("w0", node="b1", labels=WEB),
            b.pod("hog", node="a1", cpu="2", memory=None),
            b.pod(
                "p",
                labels=WEB,
                spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web"), hard=False)),
            ),
        ],
        {"p": "a2"},
    ),
    Scenario(
        "spread-topology-key-no-node-has",
        [*ZONES, b.pod("p", labels=WEB, spec=s.spreading(s.spread(1, "rack", s.labels())))],
        {},
        pods={
            "p": "0/3 nodes fit: 3 node(s) didn't match pod topology spread constraints"
            " (missing required label rack)"
        },
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[x.id for x in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    objects = [_with_namespace(obj) for obj in scenario.objects]
    bound, pods, groups = harness.cycle(*objects)
    assert bound == {_key(k): v for k, v in scenario.bound.items()}
    for name, reason in scenario.pods.items():
        assert pods[_key(name)] == reason
    for name, reason in scenario.groups.items():
        assert groups[_key(name)] == reason


def _with_namespace(obj: Obj) -> Obj:
    """Pods named ``ns/name`` in the tables are named ``name`` in ``ns``."""
    name = obj["metadata"]["name"]
    if "/" not in name or obj["kind"] != "Pod":
        return obj
    namespace, short = name.split("/", 1)
    meta = {**obj["metadata"], "name": short, "namespace": namespace, "uid": f"uid-{name}"}
    return {**obj, "metadata": meta}
