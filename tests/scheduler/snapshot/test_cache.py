"""ClusterCache: incremental cluster state and the snapshots taken from it.

We test these aspects:
- the cache is a thin router: its state is one store per kind (nodes, pods, groups, queues,
  reservations, storage, DRA, PriorityClasses, shared GPUs), the change counter and the
  scheduler profile, under 12 attributes in all;
- placed pods add to their node's requested sums, terminal and deleted ones stop counting;
- pending, gated, deleting and other schedulers' pods are classified apart;
- assume/forget: an assumed pod counts as placed; a stale update keeps the assumption, the
  binding landing confirms it, forget undoes it;
- assumed volumes (kube-scheduler's passive assume cache): a volume assumed reserved for a
  claim shows so in snapshots while the informer's version is the one it was decided on; a
  newer version ends the assumption whatever it says, forgetting undoes it, and an assumption
  decided on an older version than the cache holds is refused;
- PriorityClasses (incl. the global default and built-in system classes) resolve priorities,
  and changing one re-resolves pods and groups;
- groups: members counted, queue inherited, implicit groups of one, a missing group; an update
  of a PodGroup's status alone (Berth's own write) changes nothing a session reads: no counter
  moves and the group is not named changed (a parked gang stays parked);
- the implicit ``default`` queue, reservations and queues as infos;
- Berth's plain pods join their namespace's default queue, else ``plain_pods_queue`` (or stay
  plain without one), as groups of one, and move when the namespace's label changes;
- a snapshot is a private copy: mutating its table or later cache changes leave it alone;
- per-queue usage (allocated, requested, running and pending groups) follows pods binding,
  finishing, leaving and changing queue, and an earlier snapshot's usage stays as it was;
- property (hypothesis): any sequence of increments gives the same snapshot as a cache built
  from the final objects at once, every snapshot's per-queue usage equals a recount, its
  pending pods by group leave out what filtering its pending pods would, its placed groups by
  queue (and those with a limit of their own or a failure mark) are what walking every group
  finds, before and after later changes, no pod's priority is below its priority floor, and
  every pod waiting in one snapshot and not in the next is named as one that stopped waiting;
- the pods waiting for a group from their owners are kept apart (grouped or placed, they
  leave).
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from berth.api import keys, resources
from berth.scheduler.snapshot import cache, cowmaps, placedgroups, snapshots, usage
from tests.scheduler import builders as b

MI = 2**20 * 1000


def requested(snap: snapshots.Snapshot, node: str) -> dict[str, int]:
    t = snap.nodes
    row = t.index[node]
    return {
        name: int(t.requested[row, col])
        for col, name in enumerate(t.resources)
        if t.requested[row, col]
    }


def test_the_cache_holds_one_store_per_kind_and_little_else() -> None:
    state = vars(cache.ClusterCache(dynamic_resources=True))
    assert len(state) < 12, sorted(state)
    stores = {
        name: type(value).__module__
        for name, value in state.items()
        if type(value).__module__.endswith("store")
    }
    # Besides the stores, only the change counter and the profile; each store is its own
    # module's, one per kind.
    assert set(state) - set(stores) == {"_changes", "_profile"}
    assert len(set(stores.values())) == len(stores) >= 9, stores


def test_placed_pods_count_on_their_node_until_they_finish_or_go() -> None:
    c = b.cache_of(b.node("n1"), b.pod("a", node="n1", cpu="1"), b.pod("b", node="n1", cpu="2"))
    assert requested(c.snapshot(0), "n1") == {"cpu": 3000, "memory": 1000 * MI, "pods": 2000}
    c.update_pod(b.pod("a", node="n1", cpu="1", phase="Succeeded"))
    assert requested(c.snapshot(0), "n1") == {"cpu": 2000, "memory": 500 * MI, "pods": 1000}
    c.remove_pod("default/b")
    assert requested(c.snapshot(0), "n1") == {}
    assert c.snapshot(0).node_infos["n1"].pods == ()


def test_pods_are_classified() -> None:
    c = b.cache_of(
        b.node("n1"),
        b.pod("waiting"),
        b.pod("gated", gates=["example.com/wait"]),
        b.pod("going", deleting=True),
        b.pod("foreign", scheduler="default-scheduler"),
        b.pod("running", node="n1"),
        b.pod("done", phase="Succeeded"),
    )
    snap = c.snapshot(0)
    assert [p.name for p in snap.pending] == ["waiting"]
    assert [p.name for p in snap.gated] == ["gated"]
    assert set(snap.pods) == {
        f"default/{n}" for n in ("waiting", "gated", "going", "foreign", "running", "done")
    }
    assert [p.name for p in snap.pods_on("n1")] == ["running"]


def test_plain_pods_join_the_default_queue_when_admitted_through_queues() -> None:
    objects = (
        b.pod("plain"),
        b.pod("labelled", queue="team-a"),
        b.pod("member", group="g"),
        b.pod("foreign", scheduler="default-scheduler"),
    )
    bypassing = cache.ClusterCache(scheduler_names=(b.SCHEDULER,))
    admitting = cache.ClusterCache(scheduler_names=(b.SCHEDULER,), plain_pods_queue="default")
    for c in (bypassing, admitting):
        for obj in objects:
            c.add_pod(obj)
    before, after = bypassing.snapshot(0).pods, admitting.snapshot(0).pods
    assert before["default/plain"].plain
    assert (after["default/plain"].queue, after["default/plain"].pod_group) == (
        "default",
        "default/pod:plain",
    )
    for name in ("labelled", "member", "foreign"):  # their own keys, or not Berth's at all
        key = f"default/{name}"
        assert (after[key].queue, after[key].pod_group) == (
            before[key].queue,
            before[key].pod_group,
        )
    # Joining is the queue's bookkeeping, not a label: pod affinity sees the pod's own labels.
    assert keys.QUEUE_LABEL not in after["default/plain"].labels


def test_plain_pods_join_their_namespace_queue_before_the_default_one() -> None:
    def labelled(name: str, queue: str | None) -> dict[str, typing.Any]:
        labels = {keys.NAMESPACE_QUEUE_LABEL: queue} if queue else {}
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }

    for plain_pods_queue in (None, "default"):
        c = cache.ClusterCache(scheduler_names=(b.SCHEDULER,), plain_pods_queue=plain_pods_queue)
        c.add_namespace(labelled("lab", "research"))
        c.add_namespace(labelled("etl", None))
        c.add_pod(b.pod("p", namespace="lab"))
        c.add_pod(b.pod("q", namespace="etl"))
        snap = c.snapshot(0)
        # The namespace's queue takes its plain pods whatever the setting...
        assert (snap.pods["lab/p"].queue, snap.pods["lab/p"].pod_group) == (
            "research",
            "lab/pod:p",
        )
        # ...and elsewhere they go to plain_pods_queue, or bypass queues when there is none.
        assert snap.pods["etl/q"].queue == plain_pods_queue
        # The namespace stops naming a queue: its pod moves to the fallback (or out of queues).
        c.add_namespace(labelled("lab", None))
        moved = c.snapshot(1).pods["lab/p"]
        assert moved.queue == plain_pods_queue
        assert moved.plain is (plain_pods_queue is None)


def test_assumed_pods_count_until_confirmed_or_forgotten() -> None:
    c = b.cache_of(b.node("n1"), b.pod("p", cpu="1"))
    c.assume_pod("default/p", node="n1")
    snap = c.snapshot(0)
    assert snap.pending == ()
    assert snap.pods["default/p"].node_name == "n1"
    assert requested(snap, "n1")["cpu"] == 1000
    c.update_pod(b.pod("p", cpu="1"))  # a stale event from before the binding
    assert requested(c.snapshot(0), "n1")["cpu"] == 1000
    assert c.forget_pod("default/p") is True
    assert requested(c.snapshot(0), "n1") == {}
    assert [p.name for p in c.snapshot(0).pending] == ["p"]
    c.assume_pod("default/p", node="n1")
    c.update_pod(b.pod("p", cpu="1", node="n1"))  # the binding landed
    assert c.forget_pod("default/p") is False
    assert requested(c.snapshot(0), "n1")["cpu"] == 1000


def test_priority_classes_resolve_and_re_resolve() -> None:
    c = b.cache_of(
        b.priority_class("high", 1000),
        b.pod_group("g", priority_class="high"),
        b.pod("p", priority_class="high"),
        b.pod("q"),
        b.pod("critical", priority_class="system-node-critical"),
        b.pod("m", group="g"),
    )
    snap = c.snapshot(0)
    assert snap.pods["default/p"].priority == 1000
    assert snap.pods["default/critical"].priority == 2_000_001_000
    assert snap.pod_groups["default/g"].priority == 1000
    c.update_priority_class(b.priority_class("high", 10))
    c.add_priority_class(b.priority_class("normal", 5, global_default=True))
    c.add_priority_class(b.priority_class("normal-too", 7, global_default=True))
    snap = c.snapshot(0)
    assert snap.pods["default/p"].priority == 10
    assert snap.pods["default/q"].priority == 5  # the lowest of the global defaults
    assert snap.pod_groups["default/g"].priority == 10
    c.remove_priority_class("high")
    assert c.snapshot(0).pods["default/p"].priority == 5


def test_groups_count_members_and_lend_their_queue() -> None:
    c = b.cache_of(
        b.node("n1"),
        b.pod_group("g", min_member=3, queue="research"),
        b.pod("a", group="g"),
        b.pod("b", group="g", node="n1"),
        b.pod("c", group="g", phase="Succeeded"),
        b.pod("d", group="g", gates=["x"]),
        b.pod("e", group="g", phase="Failed"),
        b.pod("lonely", queue="batch", priority=9),
        b.pod("orphan", group="missing"),
    )
    snap = c.snapshot(0)
    g = snap.pod_groups["default/g"]
    assert (g.pending, g.placed, g.succeeded, g.gated, g.failed) == (1, 1, 1, 1, 1)
    assert g.created == 4
    assert not g.ready  # 2 of minMember 3 placed or done
    assert snap.pods["default/a"].queue == "research"
    implicit = snap.pod_groups["default/pod:lonely"]
    assert (implicit.implicit, implicit.min_member, implicit.queue, implicit.priority) == (
        True,
        1,
        "batch",
        9,
    )
    assert "default/missing" not in snap.pod_groups
    assert snap.group_of(snap.pods["default/orphan"]) is None
    assert [p.name for p in snap.members("default/g")] == ["a", "b", "c", "d", "e"]
    c.update_pod_group(b.pod_group("g", min_member=3, queue="other"))
    assert c.snapshot(0).pods["default/a"].queue == "other"
    c.remove_pod_group("default/g")
    snap = c.snapshot(0)
    assert snap.pods["default/a"].queue is None
    assert "default/g" not in snap.pod_groups


def test_queues_reservations_and_the_implicit_default_queue() -> None:
    c = b.cache_of(
        b.queue("research", guaranteed={"cpu": "8"}, limit={"cpu": "16", b.GPU: 0}, weight=3),
        b.reservation("r1", ttl="2h"),
    )
    snap = c.snapshot(0)
    assert set(snap.queues) == {"default", "research"}
    assert snap.queues["default"].implicit
    research = snap.queues["research"]
    assert (research.weight, research.guaranteed, research.limit) == (
        3,
        {"cpu": 8000},
        {"cpu": 16000, b.GPU: 0},
    )
    reservation = snap.reservations["default/r1"]
    assert reservation.ttl_seconds == 7200
    assert reservation.owners[0].match_labels == (("app", "r1"),)
    c.remove_queue("research")
    c.remove_reservation("default/r1")
    assert set(c.snapshot(0).queues) == {"default"}
    assert c.snapshot(0).reservations == {}


def _volume(version: str, *, claim: str | None = None) -> dict[str, typing.Any]:
    spec: dict[str, typing.Any] = {
        "storageClassName": "local",
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
    }
    if claim is not None:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv", "resourceVersion": version},
        "spec": spec,
        "status": {"phase": "Available"},
    }


def _holder(c: cache.ClusterCache) -> str | None:
    return c.snapshot(0.0).volumes.volumes["pv"].claim


def test_an_assumed_volume_is_the_claims_until_the_api_says_otherwise() -> None:
    c = cache.ClusterCache()
    c.add_volume(_volume("5"))
    assert not c.assume_volume("pv", claim="default/a", version="4")  # decided on a stale view
    assert _holder(c) is None
    assert c.assume_volume("pv", claim="default/a", version="5")
    taken = c.snapshot(0.0).volumes
    assert taken.volumes["pv"].claim == "default/a" and not taken.volumes["pv"].available
    c.add_volume(_volume("5"))  # a resync of the version it was decided on: still assumed
    assert _holder(c) == "default/a"
    c.add_volume(_volume("6", claim="a"))  # the write landed: the API's word
    assert _holder(c) == "default/a"
    assert not c.forget_volume("pv", version="5")  # over already: nothing to undo
    assert _holder(c) == "default/a"


def test_a_newer_version_or_forgetting_ends_the_assumption() -> None:
    c = cache.ClusterCache()
    c.add_volume(_volume("5"))
    c.assume_volume("pv", claim="default/a", version="5")
    c.add_volume(_volume("6", claim="b"))  # somebody else's claim got it first
    assert _holder(c) == "default/b"
    c.add_volume(_volume("7"))
    assert c.assume_volume("pv", claim="default/a", version="7")
    assert c.forget_volume("pv", version="7")  # the write was refused
    assert _holder(c) is None
    c.assume_volume("pv", claim="default/a", version="7")
    c.remove_volume("pv")
    c.add_volume(_volume("9"))
    assert _holder(c) is None


def test_a_snapshot_is_a_private_copy() -> None:
    c = b.cache_of(b.node("n1"), b.pod("p", node="n1", cpu="1"))
    snap = c.snapshot(0)
    snap.nodes.assume(0, np.array([5, 0, 0, 0], dtype=np.int64))
    c.add_pod(b.pod("q", node="n1", cpu="1"))
    c.add_node(b.node("n2"))
    assert requested(snap, "n1")["cpu"] == 1005
    assert set(snap.pods) == {"default/p"}
    later = c.snapshot(0)
    assert requested(later, "n1")["cpu"] == 2000
    assert later.nodes.names == ["n1", "n2"]


def test_a_pod_with_a_resource_no_column_has_rebuilds_the_columns() -> None:
    c = b.cache_of(b.node("n1"))
    c.snapshot(0)
    c.add_pod(b.pod("p", node="n1", requests={"example.com/fpga": "1"}))
    snap = c.snapshot(0)
    assert requested(snap, "n1") == {"example.com/fpga": 1000, "pods": 1000}


def _asks(cpu: str, *, count: int = 1) -> resources.ResourceList:
    """What ``count`` builder pods of ``cpu`` request (500Mi and one pod slot each)."""
    one = resources.ResourceList.parse({"cpu": cpu, "memory": "500Mi"}) + {"pods": 1000}
    return one * count


def test_queue_usage_follows_pods_and_groups() -> None:
    c = b.cache_of(
        b.node("n1", cpu="8"),
        *b.gang("g", 2, queue="a", cpu="1"),
        b.pod("solo", queue="b", cpu="2"),
    )
    first = c.snapshot(0)
    assert dict(first.queue_usage) == {
        "a": usage.QueueUsage(requested=_asks("1", count=2), pending_groups=1),
        "b": usage.QueueUsage(requested=_asks("2"), pending_groups=1),
    }
    c.assume_pod("default/g-0", node="n1")
    assert c.snapshot(0).usage_of("a") == usage.QueueUsage(
        allocated=_asks("1"), requested=_asks("1"), running_groups=1
    )
    c.update_pod(b.pod("g-0", group="g", node="n1", cpu="1", phase="Succeeded"))
    c.update_pod(b.pod("solo", queue="c", cpu="2"))  # moved to another queue
    c.remove_pod("default/g-1")
    later = c.snapshot(0)
    assert dict(later.queue_usage) == {
        "c": usage.QueueUsage(requested=_asks("2"), pending_groups=1)
    }
    assert later.usage_of("a") == usage.EMPTY
    # What an earlier snapshot saw does not move.
    assert first.usage_of("a") == usage.QueueUsage(requested=_asks("1", count=2), pending_groups=1)


# Property: incremental == built at once ------------------------------------------------------

_NODES = [f"n{i}" for i in range(3)]
_PODS = [f"p{i}" for i in range(4)]
_GROUPS = ["g0", "g1"]

_ops = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(_NODES), st.sampled_from(["2", "4"]), st.booleans()),
    st.tuples(st.just("rmnode"), st.sampled_from(_NODES)),
    st.tuples(
        st.just("pod"),
        st.sampled_from(_PODS),
        st.sampled_from([None, *_NODES]),
        st.sampled_from([None, "Succeeded", "Failed"]),
        st.sampled_from(["100m", "1", "1500m"]),
        st.sampled_from([None, *_GROUPS]),
        st.sampled_from([None, "q"]),
        st.sampled_from([None, "hi", "lo"]),
        st.booleans(),
    ),
    st.tuples(st.just("rmpod"), st.sampled_from(_PODS)),
    st.tuples(st.just("assume"), st.sampled_from(_PODS), st.sampled_from(_NODES)),
    st.tuples(st.just("forget"), st.sampled_from(_PODS)),
    st.tuples(
        st.just("group"),
        st.sampled_from(_GROUPS),
        st.sampled_from(["a", "b"]),
        st.integers(1, 3),
        st.sampled_from([None, "hi"]),
    ),
    st.tuples(st.just("rmgroup"), st.sampled_from(_GROUPS)),
    st.tuples(
        st.just("lgroup"),  # a group with a run time limit of its own, or a failure mark
        st.sampled_from(_GROUPS),
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, 60]),
        st.booleans(),
    ),
    st.tuples(st.just("pc"), st.sampled_from(["hi", "lo"]), st.integers(-5, 5), st.booleans()),
    st.tuples(st.just("rmpc"), st.sampled_from(["hi", "lo"])),
    st.tuples(st.just("snap")),
)


def _comparable(snap: snapshots.Snapshot) -> dict[str, typing.Any]:
    t = snap.nodes
    names = sorted(set(t.resources))

    def column(arr: np.ndarray[typing.Any, typing.Any], name: str) -> list[int]:
        col = t.column.get(name)
        return [0] * len(t) if col is None else [int(v) for v in arr[:, col]]

    return {
        "names": list(t.names),
        "allocatable": {
            n: column(t.allocatable, n) for n in names if any(column(t.allocatable, n))
        },
        "requested": {n: column(t.requested, n) for n in names if any(column(t.requested, n))},
        "unschedulable": t.unschedulable.tolist(),
        "node_infos": dict(snap.node_infos),
        "pods": dict(snap.pods),
        "pending": snap.pending,
        "gated": snap.gated,
        "groups": dict(snap.pod_groups),
        "classes": dict(snap.priority_classes),
        "usage": dict(snap.queue_usage),
    }


def _usage_recounted(snap: snapshots.Snapshot) -> dict[str, usage.QueueUsage]:
    """Per-queue usage summed from scratch over the snapshot's pods and groups."""
    empty = resources.ResourceList()
    allocated: dict[str, resources.ResourceList] = {}
    requested: dict[str, resources.ResourceList] = {}
    for pod in snap.pods.values():
        if pod.queue is not None and pod.node_name is not None and not pod.terminal:
            allocated[pod.queue] = allocated.get(pod.queue, empty) + pod.requests
    for pod in snap.pending:
        if pod.queue is not None:
            requested[pod.queue] = requested.get(pod.queue, empty) + pod.requests
    running: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for group in snap.pod_groups.values():
        counter = running if group.placed else waiting if group.pending + group.gated else None
        if counter is not None:
            counter[group.queue] = counter.get(group.queue, 0) + 1
    out = {
        name: usage.QueueUsage(
            allocated=allocated.get(name, empty),
            requested=requested.get(name, empty),
            running_groups=running.get(name, 0),
            pending_groups=waiting.get(name, 0),
        )
        for name in sorted({*allocated, *requested, *running, *waiting})
    }
    return {name: used for name, used in out.items() if used != usage.EMPTY}


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_ops, min_size=4, max_size=50))
@example(
    ops=[("pod", "p0", None, None, "1", "g0", None, None, False), ("group", "g0", "a", 1, None)]
)
@example(ops=[("group", "g0", "a", 1, "hi"), ("snap",), ("pc", "hi", 3, False)])
@example(
    ops=[
        ("node", "n0", "2", False),
        ("pod", "p0", None, None, "1", None, None, None, True),
        ("snap",),
        ("assume", "p0", "n0"),
        ("snap",),
        ("forget", "p0"),
    ]
)
@example(
    ops=[  # placed groups leave the index when gone, and move with their queue
        ("lgroup", "g0", "a", 60, False),
        ("pod", "p0", "n0", None, "1", "g0", None, None, False),
        ("pod", "p1", "n1", None, "1", None, "q", None, False),
        ("snap",),
        ("rmgroup", "g0"),
        ("rmpod", "p1"),
        ("snap",),
        ("lgroup", "g0", "b", None, True),
        ("snap",),
    ]
)
@example(
    ops=[  # a pending pod deleted is named as one that stopped waiting
        ("pod", "p0", None, None, "1", None, None, None, False),
        ("snap",),
        ("rmpod", "p0"),
        ("snap",),
    ]
)
def test_increments_equal_a_full_rebuild(ops: list[tuple[typing.Any, ...]]) -> None:
    live = cache.ClusterCache()
    objects: dict[tuple[str, str], dict[str, typing.Any]] = {}
    assumed: dict[str, str] = {}
    taken: list[snapshots.Snapshot] = []
    waited: list[_Waiting] = []  # what each snapshot's pending pods were, read as it was taken
    for op in ops:
        kind = op[0]
        if kind == "node":
            _, name, cpu, tainted = op
            obj = b.node(name, cpu=cpu, gpu=1 if tainted else None, unschedulable=tainted)
            objects[("Node", name)] = obj
            live.add_node(obj)
        elif kind == "rmnode":
            objects.pop(("Node", op[1]), None)
            live.remove_node(op[1])
        elif kind == "pod":
            _, name, node, phase, cpu, group, queue, pc, gpu = op
            obj = b.pod(
                name,
                node=node,
                phase=phase,
                cpu=cpu,
                group=group,
                queue=queue,
                priority_class=pc,
                gpu=1 if gpu else None,
            )
            key = f"default/{name}"
            if key in assumed and (node is not None or phase is not None):
                del assumed[key]
            objects[("Pod", name)] = obj
            live.update_pod(obj)
        elif kind == "rmpod":
            objects.pop(("Pod", op[1]), None)
            assumed.pop(f"default/{op[1]}", None)
            live.remove_pod(f"default/{op[1]}")
        elif kind == "assume":
            _, name, node = op
            key = f"default/{name}"
            pod = objects.get(("Pod", name))
            if pod is None or key in assumed or pod["spec"].get("nodeName"):
                continue
            if pod["status"]["phase"] in ("Succeeded", "Failed"):
                continue
            assumed[key] = node
            live.assume_pod(key, node=node)
        elif kind == "forget":
            key = f"default/{op[1]}"
            assert live.forget_pod(key) is (assumed.pop(key, None) is not None)
        elif kind == "group":
            _, name, queue, min_member, pc = op
            obj = b.pod_group(name, queue=queue, min_member=min_member, priority_class=pc)
            objects[("PodGroup", name)] = obj
            live.add_pod_group(obj)
        elif kind == "lgroup":
            _, name, queue, limit, marked = op
            obj = b.pod_group(name, queue=queue)
            if limit is not None:
                obj["spec"]["maximumExecutionTimeSeconds"] = limit
            if marked:
                obj["metadata"]["annotations"] = {keys.EXECUTION_TIME_EXCEEDED_ANNOTATION: "x"}
            objects[("PodGroup", name)] = obj
            live.add_pod_group(obj)
        elif kind == "rmgroup":
            objects.pop(("PodGroup", op[1]), None)
            live.remove_pod_group(f"default/{op[1]}")
        elif kind == "pc":
            _, name, value, default = op
            obj = b.priority_class(name, value, global_default=default)
            objects[("PriorityClass", name)] = obj
            live.add_priority_class(obj)
        elif kind == "rmpc":
            objects.pop(("PriorityClass", op[1]), None)
            live.remove_priority_class(op[1])
        else:
            snap = live.snapshot(b.EPOCH)
            assert dict(snap.queue_usage) == _usage_recounted(snap)
            _assert_pending_index_matches(snap)
            _assert_placed_groups_match(snap)
            _assert_no_pod_below_the_floor(snap)
            if taken:
                _assert_stopped_waiting_named(taken[-1], snap)
            taken.append(snap)
            waited.append(_waiting_unread(snap))
    order = ["PriorityClass", "Node", "PodGroup", "Pod"]
    rebuilt = b.cache_of(
        *[obj for kind in order for (k, _), obj in sorted(objects.items()) if k == kind]
    )
    for key, node in sorted(assumed.items()):
        rebuilt.assume_pod(key, node=node)
    final = live.snapshot(b.EPOCH)
    assert _comparable(final) == _comparable(rebuilt.snapshot(b.EPOCH))
    assert dict(final.queue_usage) == _usage_recounted(final)
    _assert_pending_index_matches(final)
    _assert_placed_groups_match(final)
    if taken:
        _assert_stopped_waiting_named(taken[-1], final)
    for snap, was in zip(taken, waited, strict=True):
        # Later changes did not reach an earlier snapshot.
        _assert_placed_groups_match(snap)
        assert _waiting_unread(snap) == was
        _assert_pending_index_matches(snap)


def _assert_no_pod_below_the_floor(snap: snapshots.Snapshot) -> None:
    """Preempt skips jobs at the priority floor: no pod the snapshot knows is below it."""
    priorities = [pod.priority for pod in snap.pods.values()]
    if priorities:
        assert snap.priority_floor is not None
        assert snap.priority_floor <= min(priorities)


def _assert_pending_index_matches(snap: snapshots.Snapshot) -> None:
    """The cache's pending pods by group leave out exactly what filtering ``pending`` does."""
    groups = sorted({str(p.pod_group) for p in snap.pending if p.pod_group is not None})
    for left_out in ({}, {g: None for g in groups}, {g: None for g in groups[::2]}):
        plain = [p for p in snap.pending if p.pod_group not in left_out]
        assert snap.pending_but(left_out) == plain
        assert dataclasses.replace(snap).pending_but(left_out) == plain  # no index: a walk


_Waiting = tuple[list[str], dict[str | None, list[str]]]


def _waiting_unread(snap: snapshots.Snapshot) -> _Waiting:
    """The snapshot's pending pod keys and its index, read without sorting (so nothing read
    is kept: a later change reaching the views would show)."""
    index = snap.pending_index
    assert index is not None
    pending = sorted(p.key for p in cowmaps.in_any_order(snap.pending))
    return pending, {g: [p.key for p in index[g]] for g in index}


def _assert_stopped_waiting_named(before: snapshots.Snapshot, after: snapshots.Snapshot) -> None:
    """Every pod waiting in ``before`` and not in ``after`` (or another pod by that name) is
    named in ``after.stopped_waiting``: who settles per change misses none."""

    def waiting(snap: snapshots.Snapshot) -> dict[str, str]:
        return {p.key: p.uid for p in (*snap.pending, *snap.gated)}

    now = waiting(after)
    stopped = {key for key, uid in waiting(before).items() if now.get(key) != uid}
    assert after.stopped_waiting is not None
    assert stopped <= after.stopped_waiting


def _assert_placed_groups_match(snap: snapshots.Snapshot) -> None:
    """The cache's placed groups by queue are what walking every group finds."""
    kept = snap.placed_index
    assert kept is not None
    scanned = placedgroups.scan(snap.pod_groups)
    assert {q: dict(found) for q, found in kept.by_queue.items()} == {
        q: dict(found) for q, found in scanned.by_queue.items()
    }
    assert dict(kept.self_limited) == dict(scanned.self_limited)


def test_a_pod_group_status_update_changes_nothing() -> None:
    made = cache.ClusterCache()
    group = b.pod_group("train", min_member=4, queue="default")
    made.add_pod_group(group)
    before = made.snapshot(0.0).changes
    written = {**group, "status": {"conditions": [{"type": "Scheduled", "status": "False",
               "reason": "NotEnoughResources", "message": "0/4 nodes fit"}]}}  # fmt: skip
    made.update_pod_group(written)
    after = made.snapshot(1.0).changes
    assert before is not None and after is not None
    assert after.same_state(before)
    assert "default/train" not in after.groups
    made.update_pod_group(b.pod_group("train", min_member=2, queue="default"))
    changed = made.snapshot(2.0).changes
    assert changed is not None and "default/train" in changed.groups


def test_the_pods_awaiting_a_group_from_their_owners_are_kept_apart() -> None:
    live = cache.ClusterCache(group_by_owner=True)
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "w", "uid": "j1", "controller": True}

    def owned(name: str, **kwargs: typing.Any) -> dict[str, typing.Any]:
        obj = b.pod(name, **kwargs)
        obj["metadata"]["ownerReferences"] = [job]
        return obj

    live.update_pod(owned("w-0"))
    live.update_pod(owned("w-1", gates=["example.com/hold"]))
    live.update_pod(b.pod("plain"))
    snap = live.snapshot(b.EPOCH)
    walked = dataclasses.replace(snap, awaiting_group=None).awaiting_owner_group()
    assert [p.key for p in snap.awaiting_owner_group()] == ["default/w-0", "default/w-1"]
    assert snap.awaiting_owner_group() == walked
    # Grouped (Berth wrote its group), or placed: neither waits for a group any more.
    grouped = owned("w-0", group="w")
    grouped["metadata"]["annotations"] = {keys.GROUPED_BY_ANNOTATION: "Job"}
    live.update_pod(grouped)
    live.update_pod(owned("w-1", node="n1"))
    later = live.snapshot(b.EPOCH)
    assert later.awaiting_owner_group() == ()
    assert later.stopped_waiting == {"default/w-1"}
    assert [p.key for p in snap.awaiting_owner_group()] == ["default/w-0", "default/w-1"]
