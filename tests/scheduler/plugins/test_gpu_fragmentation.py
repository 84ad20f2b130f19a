"""FGD's fragmentation measure, and the mix of GPU pods it is measured against (issue 28).

We test these aspects:
- the paper's measure (``Fit``): all idle GPU capacity where a shape cannot run (too little
  cpu, no device with its share, a model it does not accept), else the devices with less
  than its share left; Berth's (``Fill``): what copies of the shape cannot fill, the cpu left
  bounding the copies;
- the mix learned from arriving pods: shapes by share, devices, cpu and node selection; the
  prior before any pod; older arrivals fading against newer ones; pods asking no GPU (or a
  share they cannot get) left out.
"""

from __future__ import annotations

import numpy as np
import pytest

from berth.scheduler.plugins.gpu_sharing import fragmentation
from berth.scheduler.snapshot import gpudevices, gpumix, gpushare, pods
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness


def classes_for(
    *shapes: tuple[gpumix.Shape, float], kind: fragmentation.Measure
) -> tuple[fragmentation.Classes, np.ndarray]:  # type: ignore[type-arg]
    snap = harness.snapshot(
        b.node("n", cpu="8", gpu=2, labels={gpushare.PRODUCT_LABEL: "A100"}),
    )
    devices = gpudevices.build(snap.nodes, labels=snap.nodes.labels, shared=snap.shared_gpus)
    assert devices is not None
    classes = fragmentation.classes_of(shapes, nodes=snap.nodes, devices=devices, kind=kind)
    return classes, np.array([0], dtype=np.int64)


HALF = gpumix.Shape(milli=500, devices=1, cpu=1000)
ONE = gpumix.Shape(milli=1000, devices=1, cpu=4000)


@pytest.mark.parametrize(
    ("free", "cpu", "shape", "fit", "fill"),
    [
        # Two devices with 0.7 and 1.0 left, plenty of cpu: a half fits both. The paper
        # counts nothing; Berth counts the 0.2 no half can fill.
        ([700, 1000], 8000, HALF, 0, 200),
        # A whole GPU: the 0.7 is stranded for it either way.
        ([700, 1000], 8000, ONE, 700, 700),
        # Cpu for one whole-GPU pod only: the paper sees it fit (0.7 stranded); Berth sees
        # the second device unfillable too.
        ([1000, 1000], 4000, ONE, 0, 1000),
        # No cpu for it at all: everything is a fragment to it.
        ([1000, 1000], 2000, ONE, 2000, 2000),
    ],
    ids=["remainder", "partial-device", "cpu-for-one", "no-cpu"],
)
def test_fragments_of_one_shape(
    free: list[int], cpu: int, shape: gpumix.Shape, fit: int, fill: int
) -> None:
    for kind, expected in ((fragmentation.Measure.FIT, fit), (fragmentation.Measure.FILL, fill)):
        classes, rows = classes_for((shape, 1.0), kind=kind)
        measured = fragmentation.measure(
            np.array([free], dtype=np.int64), np.array([cpu], dtype=np.int64), rows, classes
        )
        assert measured.tolist() == [expected * fragmentation.WEIGHT_SCALE], kind


def test_a_shape_for_another_model_sees_every_gpu_as_a_fragment() -> None:
    other = gpumix.Shape(
        milli=500,
        devices=1,
        cpu=1000,
        node_selector=(pods.selectors.Requirement(gpushare.PRODUCT_LABEL, "In", ("H100",)),),
    )
    for kind in fragmentation.Measure:
        classes, rows = classes_for((other, 1.0), kind=kind)
        measured = fragmentation.measure(
            np.array([[1000, 1000]], dtype=np.int64), np.array([8000]), rows, classes
        )
        assert measured.tolist() == [2000 * fragmentation.WEIGHT_SCALE]


def test_the_mix_starts_from_the_prior() -> None:
    view = gpumix.Mix().view()
    assert {shape for shape, _ in view} == {shape for shape, _ in gpumix.PRIOR}
    assert sum(p for _, p in view) == pytest.approx(1.0)


def test_the_mix_learns_arriving_shapes_and_forgets_old_ones() -> None:
    mix = gpumix.Mix(horizon=10)
    half = pods.pod_info(b.pod("h", cpu="2", annotations={gpushare.FRACTION_ANNOTATION: "0.5"}))
    whole = pods.pod_info(b.pod("w", cpu="3500m", gpu=2))
    for _ in range(50):
        mix.observe(half)
    for _ in range(50):
        mix.observe(whole)
    view = dict(mix.view())
    whole_shape = gpumix.Shape(milli=1000, devices=2, cpu=4000)  # cpu rounded up to cores
    half_shape = gpumix.Shape(milli=500, devices=1, cpu=2000)
    # The last fifty weigh about the horizon (ten arrivals), the first fifty next to nothing;
    # the prior's eight pseudo-arrivals are the rest.
    assert view[whole_shape] > 100 * view[half_shape]
    assert view[whole_shape] == pytest.approx(10.5 / 18.5, rel=0.02)
    mix.observe(pods.pod_info(b.pod("cpu-only", cpu="1")))
    mix.observe(pods.pod_info(b.pod("bad", annotations={gpushare.FRACTION_ANNOTATION: "2"})))
    assert dict(mix.view()) == view
