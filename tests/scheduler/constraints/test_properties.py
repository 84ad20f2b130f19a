"""Property: no placement Berth makes ever breaks a required constraint.

Hypothesis generates small clusters (zones, some nodes without a zone, cordoned nodes), running
pods (some binding host ports, some with anti-affinity of their own, some using claims) and
pending pods with random required and preferred pod affinity and anti-affinity (own, listed,
all or labelled namespaces), topology spread constraints, host ports and PersistentVolumeClaims
(of a ``WaitForFirstConsumer`` class: local volumes on random nodes, bound or not, some
``ReadWriteOncePod``, bound CSI volumes on nodes with attach limits), some of them in gangs;
one default-profile cycle places them, and the independent checker
(:mod:`tests.constraint_checker`, which shares no code with the plugins) replays the bindings
in order, with the storage as the cycle left it, and must find nothing broken. The cycle must
also raise no plugin error.
"""

from __future__ import annotations

import typing

import hypothesis
import hypothesis.strategies as st

from berth.util import clocks
from tests import constraint_checker
from tests.scheduler import builders as b
from tests.scheduler.constraints import specs as s
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
APPS = ("web", "db", "cache")
KEYS = (s.HOSTNAME, s.ZONE)


@st.composite
def nodes(draw: st.DrawFn) -> list[Obj]:
    count = draw(st.integers(min_value=2, max_value=6))
    out = []
    for i in range(count):
        zone = draw(st.sampled_from(["a", "b", "c", None]))
        out.append(
            b.node(
                f"n{i}",
                cpu=draw(st.sampled_from(["1", "2", "4"])),
                labels={s.ZONE: zone} if zone else {},
                unschedulable=draw(st.integers(0, 7)) == 0,
            )
        )
    return out


NAMESPACES = [
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "labels": {"team": "a"}},
    },
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "other", "labels": {"team": "b"}},
    },
]


def _term(draw: st.DrawFn) -> Obj:
    scope = draw(st.sampled_from(["own", "own", "listed", "all", "team-a", "team-b"]))
    return s.term(
        draw(st.sampled_from(KEYS)),
        s.labels(app=draw(st.sampled_from(APPS))),
        namespaces=["other"] if scope == "listed" else None,
        namespace_selector={
            "all": {},
            "team-a": s.labels(team="a"),
            "team-b": s.labels(team="b"),
        }.get(scope),
    )


@st.composite
def constraints(draw: st.DrawFn) -> Obj:
    """Spec fields with a random mix of pod constraints."""
    spec: Obj = {}
    affinity: dict[str, list[typing.Any]] = {}
    if draw(st.booleans()):
        affinity["anti"] = [_term(draw)]
    if draw(st.integers(0, 3)) == 0:
        affinity["required"] = [_term(draw)]
    if draw(st.integers(0, 2)) == 0:
        affinity["preferred"] = [(draw(st.integers(1, 100)), _term(draw))]
    if draw(st.integers(0, 2)) == 0:
        affinity["anti_preferred"] = [(draw(st.integers(1, 100)), _term(draw))]
    if affinity:
        spec.update(s.affinity(**affinity))
    if draw(st.booleans()):
        spec.update(
            s.spreading(
                s.spread(
                    draw(st.integers(1, 2)),
                    draw(st.sampled_from(KEYS)),
                    s.labels(app=draw(st.sampled_from(APPS))),
                    hard=draw(st.booleans()),
                    min_domains=draw(st.sampled_from([None, None, 2, 4])),
                    node_taints_policy=draw(st.sampled_from([None, "Honor"])),
                )
            )
        )
        if spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] != "DoNotSchedule":
            spec["topologySpreadConstraints"][0].pop("minDomains", None)
    if draw(st.integers(0, 3)) == 0:
        spec.update(s.ports((draw(st.sampled_from([80, 443])), "TCP", "")))
    return spec


CLAIMS = ("c0", "c1", "c2", "c3")
EBS = "ebs.csi.aws.com"


@st.composite
def storage(draw: st.DrawFn, names: list[str]) -> list[Obj]:
    """A WaitForFirstConsumer class, claims ``CLAIMS`` (bound or not, some ReadWriteOncePod),
    local or CSI volumes on random nodes, and attach limits on some nodes."""
    out: list[Obj] = [s.storage_class("local")]
    for i, claim in enumerate(CLAIMS):
        modes = draw(st.sampled_from([("ReadWriteOnce",), ("ReadWriteOncePod",)]))
        bound = draw(st.booleans())
        csi = bound and draw(st.booleans())  # provisioned by its driver, hence bound
        node = draw(st.sampled_from(names))
        out.append(
            s.volume(
                f"pv{i}",
                nodes=None if csi else [node],
                claim=f"default/{claim}" if bound else None,
                driver=EBS if csi else None,
                modes=(*modes, "ReadWriteOnce"),
            )
        )
        out.append(s.claim(claim, volume=f"pv{i}" if bound else None, modes=modes))
    for name in names:
        if draw(st.integers(0, 2)) == 0:
            out.append(s.csi_node(name, ebs_csi_aws_com=draw(st.integers(0, 2))))
    return out


def _claims(draw: st.DrawFn) -> Obj:
    used = draw(st.lists(st.sampled_from(CLAIMS), max_size=2, unique=True))
    return s.claims(*used) if used else {}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """(nodes and storage, running pods, pending objects)."""
    node_objs = draw(nodes())
    names = [n["metadata"]["name"] for n in node_objs]
    node_objs += draw(storage(names))
    running = []
    for i in range(draw(st.integers(0, 6))):
        spec: Obj = {}
        if draw(st.integers(0, 3)) == 0:
            spec.update(s.affinity(anti=[_term(draw)]))
        if draw(st.integers(0, 3)) == 0:
            spec.update(s.claims(draw(st.sampled_from(CLAIMS))))
        running.append(
            b.pod(
                f"run-{i}",
                node=draw(st.sampled_from(names)),
                labels={"app": draw(st.sampled_from(APPS))},
                namespace=draw(st.sampled_from(["default", "other"])),
                spec=spec,
            )
        )
    pending: list[Obj] = []
    for i in range(draw(st.integers(1, 8))):
        app = {"app": draw(st.sampled_from(APPS))}
        spec = {**draw(constraints()), **_claims(draw)}
        if draw(st.integers(0, 3)) == 0:
            pending += b.gang(f"g{i}", draw(st.integers(2, 3)), labels=app, spec=spec)
        else:
            pending.append(b.pod(f"p{i}", labels=app, spec=spec))
    return node_objs, running, pending


def _node_over_its_attach_limit() -> tuple[list[Obj], list[Obj], list[Obj]]:
    """A node already over its attach limit (a running pod's CSI volume, none allowed) and a
    pending pod whose only claim is a local volume there (found by Hypothesis)."""
    objects = [
        b.node("n0"),
        s.storage_class("local"),
        s.volume("pv0", nodes=["n0"]),
        s.claim("c0"),
        s.volume("pv1", claim="default/c1", driver=EBS),
        s.claim("c1", volume="pv1"),
        s.csi_node("n0", ebs_csi_aws_com=0),
    ]
    running = [b.pod("run-0", node="n0", spec=s.claims("c1"))]
    return objects, running, [b.pod("p0", spec=s.claims("c0"))]


def _claim_users_where_its_volume_is_not() -> tuple[list[Obj], list[Obj], list[Obj]]:
    """Pods already using an unbound claim on two nodes, its only volume on one of them, and a
    gang sharing it whose host ports keep its members apart (found by Hypothesis)."""
    objects = [
        b.node("n1"),
        b.node("n2"),
        s.storage_class("local"),
        s.volume("pv0", nodes=["n1"]),
        s.claim("c0"),
    ]
    running = [b.pod(f"run-{n}", node=n, spec=s.claims("c0")) for n in ("n1", "n2")]
    spec = {**s.claims("c0"), **s.ports((80, "TCP", ""))}
    return objects, running, b.gang("g0", 2, spec=spec)


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(clusters())
@hypothesis.example(_node_over_its_attach_limit())
@hypothesis.example(_claim_users_where_its_volume_is_not())
def test_no_placement_breaks_a_required_constraint(
    cluster: tuple[list[Obj], list[Obj], list[Obj]],
) -> None:
    objects, running, pending = cluster
    node_objs = [o for o in objects if o["kind"] == "Node"]
    clock = clocks.VirtualClock(b.EPOCH)
    sim = harness.in_memory(*NAMESPACES, *objects, *running, *pending, clock=clock)
    result = harness.scheduler(harness.profile_with(), clock=clock).run_once(sim, sim)
    assert result.errors == ()
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pending}
    bindings = [(by_key[key], node) for key, node in result.bindings().items()]
    # The storage as the cycle left it: claims bound where their pods were placed.
    after = [
        *sim.objects("PersistentVolumeClaim"),
        *sim.objects("PersistentVolume"),
        *sim.objects("CSINode"),
    ]
    assert (
        constraint_checker.violations(
            node_objs, running=running, bindings=bindings, namespaces=NAMESPACES, storage=after
        )
        == []
    )


def test_the_checker_finds_what_a_blind_scheduler_breaks() -> None:
    """The checker is not vacuous: placements ignoring the constraints are reported."""
    zones = [b.node("a1", labels={s.ZONE: "a"}), b.node("b1", labels={s.ZONE: "b"})]
    web = {"app": "web"}
    running = [
        b.pod("w", node="a1", labels=web, spec=s.ports((80, "TCP", ""))),
        b.pod("loner", node="b1", spec=s.affinity(anti=[s.term(s.ZONE, s.labels(app="web"))])),
    ]
    anti = b.pod(
        "anti", labels=web, spec=s.affinity(anti=[s.term(s.HOSTNAME, s.labels(app="web"))])
    )
    port = b.pod("port", spec=s.ports((80, "TCP", "")))
    near = b.pod("near", spec=s.affinity(required=[s.term(s.ZONE, s.labels(app="db"))]))
    spread = b.pod("spread", labels=web, spec=s.spreading(s.spread(1, s.ZONE, s.labels(app="web"))))
    found = constraint_checker.violations(
        zones,
        running=running,
        bindings=[
            (anti, "a1"),
            (port, "a1"),
            (near, "a1"),
            (spread, "a1"),
            (b.pod("x", labels=web), "b1"),
        ],
    )
    assert [(v.pod, v.rule) for v in found] == [
        ("default/anti", "pod anti-affinity"),
        ("default/port", "host ports"),
        ("default/near", "pod affinity"),
        ("default/spread", "existing pod anti-affinity"),
        ("default/spread", "topology spread"),
        ("default/x", "existing pod anti-affinity"),
    ]


def test_the_checker_counts_only_the_volumes_a_pod_attaches_anew() -> None:
    """As kube-scheduler's NodeVolumeLimits: on a node already over its limit, a pod adding a
    CSI volume is reported; one adding none, or only a volume already attached there, is not."""
    objects, running, _ = _node_over_its_attach_limit()
    storage = [
        *objects,
        s.volume("pv2", claim="default/c2", driver=EBS),
        s.claim("c2", volume="pv2"),
    ]
    local, same, new = (
        b.pod(name, spec=s.claims(claim)) for name, claim in [("l", "c0"), ("s", "c1"), ("x", "c2")]
    )
    found = constraint_checker.violations(
        [objects[0]],
        running=running,
        bindings=[(local, "n0"), (same, "n0"), (new, "n0")],
        storage=storage,
    )
    assert [(v.pod, v.rule, v.detail) for v in found] == [
        ("default/x", "volume limits", f"2 {EBS} volumes > 0")
    ]
