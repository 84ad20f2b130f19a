"""``--plot``: the PNG drawn from a report.

We test these aspects:
- the file is a PNG of the documented size with plenty of non-white, multi-coloured pixels
  (lines, legend, labels), read back with matplotlib;
- a report whose scheduler published no fair share falls back to the static one;
- a report of an empty run still draws (no lines, no crash);
- the queues panel draws and labels, per queue, allocated, both fair shares and the guarantee
  (only for a queue that has one), a tick per job arrival, an x per eviction, and a labelled
  line where a weight changed.
"""

from __future__ import annotations

import pathlib

import matplotlib.image
import numpy as np

from berth.sim import plots, runner
from tests.sim import builders

SPEC = """\
until: 1h
nodes:
  - {count: 2, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: a}, spec: {weight: 3}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: b}}
workloads:
  - {name: x, namespace: a, queue: a, every: 1m, count: 30, duration: 10m,
     requests: {cpu: "2", nvidia.com/gpu: "1"}}
  - {name: y, namespace: b, queue: b, every: 1m, count: 30, duration: 10m,
     requests: {cpu: "2", nvidia.com/gpu: "1"}}
"""


def pixels(path: pathlib.Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return np.asarray(matplotlib.image.imread(path))


def test_the_plot_is_a_png_with_real_content(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "sim.png"
    plots.plot(runner.run(builders.scenario(SPEC)), path=path)
    image = pixels(path)
    assert image.shape[:2] == (800, 1200)
    rgb = image[:, :, :3]
    ink = (rgb < 0.9).any(axis=2)
    assert ink.mean() > 0.02, "the plot is (almost) blank"
    colours = {tuple(c) for c in (rgb[ink] * 8).astype(int)}
    assert len(colours) >= 6, "the lines should come in several colours"


def test_without_a_published_fair_share_the_static_one_is_drawn(tmp_path: pathlib.Path) -> None:
    report = runner.run(builders.scenario(SPEC))
    for queue in report["queues"].values():
        queue["schedulerFairShare"] = None
    path = tmp_path / "static.png"
    plots.plot(report, path=path)
    assert pixels(path).shape[:2] == (800, 1200)


def test_an_empty_run_still_draws(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "empty.png"
    plots.plot(
        runner.run(builders.scenario('nodes: [{count: 1, allocatable: {cpu: "1"}}]\n')), path=path
    )
    assert pixels(path).shape[:2] == (800, 1200)


RECLAIM = """\
until: 2h
nodes:
  - {count: 2, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: prod},
     spec: {guaranteed: {cpu: "8", nvidia.com/gpu: "4"}}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research}}
workloads:
  - {name: sweep, namespace: research, queue: research, every: 1m, count: 8, duration: 2h,
     requests: {cpu: "2", nvidia.com/gpu: "1"}}
  - {name: serve, namespace: prod, queue: prod, at: 30m, every: 1m, count: 4, duration: 1h,
     requests: {cpu: "2", nvidia.com/gpu: "1"}}
events:
  - at: 1h
    apply:
      apiVersion: scheduling.berth.io/v1alpha1
      kind: Queue
      metadata: {name: research}
      spec: {weight: 3}
"""


def test_guarantee_fair_share_arrivals_evictions_and_changes_are_drawn_and_labelled() -> None:
    report = runner.run(builders.scenario(RECLAIM))
    assert any(j["evictedAt"] for j in report["workloads"]), "the scenario reclaims"
    drawn = plots.figure(report)
    queues = drawn.axes[1]
    labels = {line.get_label() for line in queues.get_lines()}
    assert {
        "prod allocated",
        "prod fair share (weights)",
        "prod fair share now (scheduler)",
        "prod guaranteed",
        "prod arrivals",
        "research allocated",
        "research arrivals",
        "research evictions",
    } <= labels
    assert "research guaranteed" not in labels  # it has none
    legend = queues.get_legend()
    assert legend is not None
    assert "prod guaranteed" in {text.get_text() for text in legend.get_texts()}
    (evictions,) = [line for line in queues.get_lines() if line.get_label() == "research evictions"]
    evicted = sum(len(j["evictedAt"]) for j in report["workloads"])
    assert len(evictions.get_xdata()) == evicted
    (arrivals,) = [line for line in queues.get_lines() if line.get_label() == "prod arrivals"]
    assert len(arrivals.get_xdata()) == 4
    notes = [text.get_text() for text in queues.texts]
    assert notes == ["research: weight 3"]
