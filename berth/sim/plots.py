"""``berth sim --plot``: one PNG of a simulation report.

Two panels over virtual time, drawn from the JSON report alone (so a saved report can be
plotted again):

- *Cluster utilization*: bound requests over capacity, per resource, in percent;
- *Queues*: each queue's dominant share of the cluster (DRF: its largest fraction of any
  resource, over the resources pods ask for) as a solid line; in the same colour, dashed, its
  weighted entitlement (the report's ``fairShareSeries``), and dotted, the fair share the
  scheduler's queue plugin computed after each cycle, when it published one.

Matplotlib is used through its object API: a bare ``Figure`` renders PNG with the Agg canvas,
so there is no pyplot, no global backend switch and no display needed. Used by ``berth sim``.
"""

from __future__ import annotations

import collections.abc
import functools
import pathlib
import typing

import matplotlib
import matplotlib.figure

from berth.api import quantities
from berth.sim import reports

__all__ = ["plot"]

Report = collections.abc.Mapping[str, typing.Any]
_Samples = list[tuple[float, dict[str, int]]]
_STYLES = ("-", "--", "-.", ":")


def plot(report: Report, *, path: pathlib.Path | str) -> None:
    """Draw ``report`` into the PNG file at ``path``."""
    capacity = _milli(report["cluster"]["capacity"])
    end = float(report["end"])
    scale, unit = _time_unit(end)
    figure = matplotlib.figure.Figure(figsize=(12, 8), dpi=100, layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)

    cluster = _series(report["cluster"]["allocated"])
    used = {name for _, value in cluster for name, amount in value.items() if amount > 0}
    drawn = [n for n in sorted(capacity) if n != "pods" and capacity[n] > 0 and n in used]
    for index, name in enumerate(drawn):
        # Resources often move together (CPU per GPU): distinct dashes keep each line visible.
        xs, ys = _steps(cluster, end=end, value=functools.partial(_percent, name, capacity))
        top.step(
            [x / scale for x in xs],
            ys,
            where="post",
            linewidth=1.8,
            linestyle=_STYLES[index % len(_STYLES)],
            label=name,
        )
    top.set_title("Cluster utilization (bound requests / capacity)")
    top.set_ylabel("utilization (%)")
    top.set_ylim(0, 105)
    top.grid(True, alpha=0.3)
    if top.lines:
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)

    basis = reports.share_basis(report)
    colours = matplotlib.colormaps["tab10"]
    for index, (queue, data) in enumerate(sorted(report["queues"].items())):
        colour = colours(index % 10)
        allocated = _series(data["allocated"])
        xs, ys = _steps(allocated, end=end, value=functools.partial(_dominant, basis))
        bottom.step(
            [x / scale for x in xs],
            ys,
            where="post",
            color=colour,
            linewidth=1.8,
            label=f"{queue} allocated",
        )
        # The entitlement the weights, guarantees and limits give (what "fair" means when
        # every queue wants more), and, thinner, the share the scheduler aimed at after each
        # cycle when its queue plugin published one (it follows demand).
        lines = (
            (data["fairShareSeries"], "--", 1.3, "fair share (weights)"),
            (data.get("schedulerFairShare") or [], ":", 1.1, "scheduler's share"),
        )
        for samples, style, width, what in lines:
            fair = _series(samples)
            if not fair:
                continue
            xs, ys = _steps(fair, end=end, value=functools.partial(_dominant, basis))
            bottom.step(
                [x / scale for x in xs],
                ys,
                where="post",
                color=colour,
                linestyle=style,
                linewidth=width,
                label=f"{queue} {what}",
            )
    bottom.set_title("Queues: allocation against weighted fair share")
    bottom.set_ylabel("dominant share of cluster (%)")
    bottom.set_xlabel(f"virtual time ({unit})")
    bottom.set_ylim(0, 105)
    bottom.set_xlim(0, max(end / scale, 1e-9))
    bottom.grid(True, alpha=0.3)
    if report["queues"]:
        bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    figure.suptitle(f"berth sim: {report['scenario']}", fontsize=14)
    figure.savefig(pathlib.Path(path), format="png", metadata={"Software": None})


def _milli(resources: collections.abc.Mapping[str, str]) -> dict[str, int]:
    return {name: quantities.parse_milli(text) for name, text in resources.items()}


def _series(samples: collections.abc.Iterable[Report]) -> _Samples:
    return [(float(s["t"]), _milli(s["resources"])) for s in samples]


def _steps(
    samples: _Samples,
    *,
    end: float,
    value: collections.abc.Callable[[dict[str, int]], float],
) -> tuple[list[float], list[float]]:
    """Points of a step plot that holds each sample until the next one, then until ``end``."""
    xs = [t for t, _ in samples]
    ys = [value(v) for _, v in samples]
    if not xs or xs[0] > 0:
        xs.insert(0, 0.0)
        ys.insert(0, 0.0)
    xs.append(max(end, xs[-1]))
    ys.append(ys[-1])
    return xs, ys


def _percent(name: str, capacity: dict[str, int], value: dict[str, int]) -> float:
    return 100 * value.get(name, 0) / capacity[name]


def _dominant(basis: dict[str, int], value: dict[str, int]) -> float:
    shares = [amount / basis[name] for name, amount in value.items() if name in basis]
    return 100 * max(shares, default=0.0)


def _time_unit(end: float) -> tuple[float, str]:
    if end >= 4 * 3600:
        return 3600.0, "hours"
    if end >= 4 * 60:
        return 60.0, "minutes"
    return 1.0, "seconds"
