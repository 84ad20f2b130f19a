"""``berth bench e2e --real --plot``, from a saved report.

We test these aspects:
- a report with every kind of shape (plain shapes and the standing backlog's levels) draws one
  PNG with a panel per measure, a bar per scheduler and shape, and a line per scheduler over
  the standing levels.
"""

from __future__ import annotations

import pathlib

from berth.cli import e2e_plot


def _phase(rate: float, cpu: float) -> dict[str, float]:
    return {"pods_per_second": rate, "cpu_seconds_per_1000_pods": cpu}


def _levels(rates: list[float]) -> dict[str, object]:
    return {
        str(level): {"standing": level, "stream": _phase(rate, 1.0)}
        for level, rate in zip((0, 10_000), rates, strict=True)
    }


def test_the_e2e_plot_draws_every_shape_and_the_backlog_levels(tmp_path: pathlib.Path) -> None:
    report = {
        "nodes": 50,
        "kubernetes": "v1.36.3",
        "machine": {"cpus": 2},
        "shapes": {
            shape: {
                contender: {"stream": _phase(100 - i, 2.0), "backlog": _phase(120 - i, 1.5)}
                for i, contender in enumerate(("null", "kube_scheduler", "berth"))
            }
            for shape in ("basic", "gang")
        },
    }
    report["shapes"]["unschedulable-backlog"] = {
        "null": _levels([100, 99]),
        "kube_scheduler": _levels([80, 60]),
        "berth": _levels([90, 88]),
    }
    drawing = e2e_plot.figure(report)
    axes = drawing.get_axes()
    assert len(axes) == 4
    assert len(axes[0].patches) == 3 * 2  # a bar per scheduler and shape
    assert len(axes[2].patches) == 2 * 2 * 2  # two schedulers, two phases, two shapes
    assert [list(line.get_ydata()) for line in axes[3].get_lines()] == [
        [100, 99],
        [80, 60],
        [90, 88],
    ]
    e2e_plot.draw(report, tmp_path / "e2e.png")
    assert (tmp_path / "e2e.png").read_bytes().startswith(b"\x89PNG")
