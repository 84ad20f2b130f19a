"""Scale-down protection of the nodes Berth holds (``berth.status.nodes``).

We test these aspects:
- what holds a node: an Available Reservation (not a pending or ended one), a gang nominated
  there (one hold for all its pods), a pod admission pinned there;
- a held node gets both autoscalers' opt-outs and Berth's record of them, once: applying the
  patch and asking again changes nothing;
- released, it loses exactly what Berth set: an opt-out a user set stays, before, during and
  after; a record Berth cannot read removes nothing but itself;
- from a snapshot: a Reservation placed by a cycle holds its node, and stops when it ends.
"""

from __future__ import annotations

import json

import hypothesis
import hypothesis.strategies as st

from berth.status import nodes
from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w

KARPENTER = nodes.KARPENTER_DO_NOT_DISRUPT
CA = nodes.CLUSTER_AUTOSCALER_SCALE_DOWN_DISABLED
RECORD = nodes.PROTECTION_ANNOTATION


def applied(annotations: dict[str, str], patch: dict[str, str | None] | None) -> dict[str, str]:
    out = dict(annotations)
    for name, value in (patch or {}).items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def test_what_holds_a_node() -> None:
    held = nodes.holds_by_node(
        reservations=[("t/r1", "n1", True), ("t/pending", None, False), ("t/ended", "n2", False)],
        nominated={"t/train-0": "n3", "t/train-1": "n3", "t/solo": "n3"},
        pinned={"t/p": "n4"},
        groups={"t/train-0": "t/train", "t/train-1": "t/train"},
    )
    assert {node: [str(h) for h in holds] for node, holds in held.items()} == {
        "n1": ["Reservation t/r1"],
        "n3": ["Nominated t/solo", "Nominated t/train"],
        "n4": ["Pinned t/p"],
    }


def test_a_held_node_is_protected_once_and_released_exactly() -> None:
    holds = nodes.holds_by_node(reservations=[("t/r1", "n1", True)])["n1"]
    start = {"team": "ml"}
    patch = nodes.annotations_patch(start, holds)
    assert patch == {
        KARPENTER: "true",
        CA: "true",
        RECORD: '{"set":["cluster-autoscaler.kubernetes.io/scale-down-disabled",'
        '"karpenter.sh/do-not-disrupt"],"holds":["Reservation t/r1"]}',
    }
    protected = applied(start, patch)
    assert nodes.annotations_patch(protected, holds) is None
    released = applied(protected, nodes.annotations_patch(protected, ()))
    assert released == start
    assert nodes.annotations_patch(start, ()) is None


def test_an_opt_out_the_user_set_is_never_berths_to_remove() -> None:
    holds = nodes.holds_by_node(pinned={"t/p": "n1"})["n1"]
    mine = {KARPENTER: "true"}
    protected = applied(mine, nodes.annotations_patch(mine, holds))
    assert protected[CA] == "true"
    assert json.loads(protected[RECORD])["set"] == [CA]
    assert applied(protected, nodes.annotations_patch(protected, ())) == mine


def test_a_record_berth_cannot_read_removes_only_itself() -> None:
    garbled = {KARPENTER: "true", RECORD: "{not json"}
    assert nodes.annotations_patch(garbled, ()) == {RECORD: None}


@hypothesis.given(
    user=st.sets(st.sampled_from(nodes.AUTOSCALER_ANNOTATIONS)),
    cycles=st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_held_exactly_while_holding_whatever_the_history(
    user: set[str], cycles: list[bool]
) -> None:
    hold = nodes.holds_by_node(reservations=[("t/r", "n1", True)])["n1"]
    annotations = {name: "true" for name in user}
    for holding in cycles:
        annotations = applied(
            annotations, nodes.annotations_patch(annotations, hold if holding else ())
        )
        if holding:
            assert all(annotations[name] == "true" for name in nodes.AUTOSCALER_ANNOTATIONS)
        else:
            assert {n for n in nodes.AUTOSCALER_ANNOTATIONS if n in annotations} == user
            assert RECORD not in annotations


def test_a_reservation_placed_by_a_cycle_holds_its_node_until_it_ends() -> None:
    world = w.World(b.node("n1", cpu="4"), b.node("n2", cpu="4"), w.reservation("r", cpu="2"))
    world.cycle()
    node = world.status("r")["nodeName"]
    snapshot = world.sim.snapshot()
    assert {n: [str(h) for h in hs] for n, hs in nodes.holds_in(snapshot).items()} == {
        node: ["Reservation default/r"]
    }
    world.delete("Reservation", "r")
    assert nodes.holds_in(world.sim.snapshot()) == {}
