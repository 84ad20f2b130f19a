"""ImageLocality: pods prefer nodes already holding their images.

We test these aspects:

- a node holding the pod's (large) image wins over an emptier one without it;
- an image every node holds, or a small one, does not steer the pod;
- an untagged name matches ``:latest``; a change of a node's images reaches the next snapshot.
"""

from __future__ import annotations

import typing

from berth.scheduler.plugins import image_locality
from berth.scheduler.snapshot import cache, pods
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
GB = 1024**3


def with_images(node: Obj, *images: tuple[str, int]) -> Obj:
    node["status"]["images"] = [{"names": [name], "sizeBytes": size} for name, size in images]
    return node


def pod_with_image(name: str, image: str, **fields: typing.Any) -> Obj:
    obj = b.pod(name, **fields)
    obj["spec"]["containers"][0]["image"] = image
    return obj


def test_the_node_holding_the_image_wins() -> None:
    objs = [
        with_images(b.node("a-cached"), ("registry.io/train:v1", 2 * GB)),
        b.pod("busy", node="a-cached", cpu="1"),
        b.node("b-empty"),
        b.node("c-empty"),
        pod_with_image("p", "registry.io/train:v1"),
    ]
    bound, _, _ = harness.cycle(*objs)
    assert bound == {"default/p": "a-cached"}


def test_images_every_node_holds_or_small_ones_do_not_steer() -> None:
    objs = [
        with_images(b.node("a-busy"), ("big:v1", 2 * GB), ("small:v1", 10 * 1024**2)),
        b.pod("busy", node="a-busy", cpu="1"),
        with_images(b.node("b-empty"), ("big:v1", 2 * GB)),
        pod_with_image("p", "big:v1"),
        pod_with_image("q", "small:v1"),
    ]
    bound, _, _ = harness.cycle(*objs)
    assert bound == {"default/p": "b-empty", "default/q": "b-empty"}


def test_untagged_names_are_latest_and_image_changes_reach_the_table() -> None:
    plugin = image_locality.ImageLocality()
    loaded = cache.ClusterCache()
    loaded.add_node(b.node("n1"))
    loaded.add_node(b.node("n2"))
    pod = pods.pod_info(pod_with_image("p", "app"))
    assert pod.images == ("app:latest",)
    assert harness.scores(plugin, pod, loaded.snapshot(b.EPOCH).nodes) == {"n1": 0, "n2": 0}
    loaded.update_node(with_images(b.node("n1"), ("app", 2 * GB)))
    scores = harness.scores(plugin, pod, loaded.snapshot(b.EPOCH).nodes)
    assert scores["n1"] > 0 and scores["n2"] == 0
