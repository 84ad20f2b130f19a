"""``berth sim --plot``: one PNG of a simulation report.

Two panels over virtual time, drawn from the JSON report alone (so a saved report can be
plotted again):

- *Cluster utilization*: bound requests over capacity, per resource, in percent, with a
  shaded band above each line for the capacity the starvation guard held idle then
  (``heldIdle``: nodes draining for a starving gang, or for a Reservation booked for later);
- *Queues*: one colour per queue, every line a dominant share of the cluster (DRF: the
  largest fraction of any resource, over the resources pods ask for):

  - solid, **allocated**: what the queue's bound pods hold;
  - dashed, **fair share (weights)**: its entitlement when every queue wants everything —
    guarantee plus its weighted part of the rest (``fairShareSeries``);
  - dotted, **fair share now**: what the scheduler's queue plugin computed after each cycle,
    which also follows demand (a queue that wants less gets less);
  - dash-dot, **guaranteed**: its guarantee (``guaranteedSeries``), drawn when it has one;

  and marks: a tick at the bottom for every job **arrival**, an ``x`` on the allocated line
  for every **eviction** (reclaim, preemption), and a vertical line labelled with the new
  weight (or guarantee) where a queue **changed**.

Matplotlib is used through its object API: a bare ``Figure`` renders PNG with the Agg canvas,
so there is no pyplot, no global backend switch and no display needed. Used by ``berth sim``;
matplotlib comes with the ``[sim]`` extra.
"""

from __future__ import annotations

import bisect
import collections.abc
import functools
import hashlib
import json
import pathlib
import struct
import typing

from berth.api import quantities
from berth.sim import reports
from berth.util import extras

try:
    import matplotlib
    import matplotlib.figure
except ModuleNotFoundError as exc:  # pragma: no cover - exercised by tests/packaging
    raise extras.missing("sim", exc) from exc

__all__ = ["figure", "plot", "provenance", "recorded_provenance"]

_Samples = list[tuple[float, dict[str, int]]]
_STYLES = ("-", "--", "-.", ":")


def provenance(report: reports.Report) -> str:
    """What a plot of ``report`` depends on, as a digest: the report's JSON and the code that
    draws it. Written into each PNG (its ``Description``), so a plot can be checked against
    what the current scheduler and plotting code would draw (``hack/gen-sim-plots --check``)."""
    digest = hashlib.sha256(json.dumps(report, sort_keys=True).encode())
    digest.update(pathlib.Path(__file__).read_bytes())
    return f"berth sim plot sha256:{digest.hexdigest()}"


def plot(report: reports.Report, *, path: pathlib.Path | str) -> None:
    """Draw ``report`` into the PNG file at ``path`` (its :func:`provenance` recorded)."""
    metadata = {"Software": None, "Description": provenance(report)}
    figure(report).savefig(pathlib.Path(path), format="png", metadata=metadata)


def recorded_provenance(path: pathlib.Path) -> str | None:
    """The provenance a PNG written by :func:`plot` records (None: it records none)."""
    data = path.read_bytes()
    at = 8  # past the PNG signature; then chunks of length, type, data, CRC
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            if key == b"Description":
                return value.decode("latin-1")
        at += 12 + length
    return None


def figure(report: reports.Report) -> matplotlib.figure.Figure:
    """The plot of ``report`` (see the module docstring), not yet saved."""
    capacity = _milli(report["cluster"]["capacity"])
    end = float(report["end"])
    scale, unit = _time_unit(end)
    drawing = matplotlib.figure.Figure(figsize=(12, 8), dpi=100, layout="constrained")
    top, bottom = drawing.subplots(2, 1, sharex=True)

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
    _shade_held(top, report, cluster=cluster, drawn=drawn, capacity=capacity, end=end, scale=scale)
    top.set_title(
        "Cluster utilization (bound requests / capacity); shaded: held idle for a drain "
        "(starving gangs, reservations' startAt)"
    )
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
        xs_held, ys_held = xs, ys
        bottom.step(
            [x / scale for x in xs],
            ys,
            where="post",
            color=colour,
            linewidth=1.8,
            label=f"{queue} allocated",
        )
        lines = (
            (data["fairShareSeries"], "--", 1.3, "fair share (weights)"),
            (data.get("schedulerFairShare") or [], ":", 1.1, "fair share now (scheduler)"),
            (
                data.get("guaranteedSeries") or [] if data.get("guaranteed") else [],
                "-.",
                1.0,
                "guaranteed",
            ),
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
        _mark_jobs(bottom, report, queue=queue, colour=colour, scale=scale, held=(xs_held, ys_held))
        for change in data.get("changes") or ():
            at = float(change["t"]) / scale
            bottom.axvline(at, color=colour, linestyle=":", linewidth=0.9, alpha=0.8)
            text = f"{queue}: weight {change['weight']}"
            if change.get("guaranteed"):
                text += ", guaranteed " + ", ".join(
                    f"{k}={v}" for k, v in sorted(change["guaranteed"].items())
                )
            bottom.annotate(
                text,
                (at, 100),
                xytext=(3, -3),
                textcoords="offset points",
                fontsize=8,
                color=colour,
                va="top",
            )
    bottom.set_title(
        "Queues: allocated (solid) against fair share and guarantee; "
        "| arrivals, x evictions, ⋮ changes"
    )
    bottom.set_ylabel("dominant share of cluster (%)")
    bottom.set_xlabel(f"virtual time ({unit})")
    bottom.set_ylim(0, 105)
    bottom.set_xlim(0, max(end / scale, 1e-9))
    bottom.grid(True, alpha=0.3)
    if report["queues"]:
        bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    drawing.suptitle(f"berth sim: {report['scenario']}", fontsize=14)
    return drawing


def _shade_held(
    axes: typing.Any,
    report: reports.Report,
    *,
    cluster: _Samples,
    drawn: list[str],
    capacity: dict[str, int],
    end: float,
    scale: float,
) -> None:
    """A band above each resource's utilization line, as high as what the starvation guard
    held idle then (nodes draining for a starving gang or a booked reservation)."""
    held = _series(report["cluster"].get("heldIdle") or [])
    if not any(value for _, value in held):
        return
    times = sorted({t for t, _ in cluster} | {t for t, _ in held} | {0.0, end})
    cluster_at, held_at = _values_at(cluster, times), _values_at(held, times)
    for index, name in enumerate(drawn):
        used = [_percent(name, capacity, value) for value in cluster_at]
        idle = [_percent(name, capacity, value) for value in held_at]
        if not any(idle):
            continue
        axes.fill_between(
            [t / scale for t in times],
            used,
            [u + i for u, i in zip(used, idle, strict=True)],
            step="post",
            alpha=0.3,
            color=matplotlib.colormaps["tab10"](index % 10),
            linewidth=0,
            label=f"{name} held idle (drain)",
        )


def _values_at(samples: _Samples, times: list[float]) -> list[dict[str, int]]:
    """The step function's value at each of ``times`` (the last sample at or before it)."""
    keys = [at for at, _ in samples]
    found: list[dict[str, int]] = []
    for t in times:
        i = bisect.bisect_right(keys, t)
        found.append(samples[i - 1][1] if i else {})
    return found


def _mark_jobs(
    axes: typing.Any,
    report: reports.Report,
    *,
    queue: str,
    colour: typing.Any,
    scale: float,
    held: tuple[list[float], list[float]],
) -> None:
    """Ticks at the bottom for the queue's job arrivals; an x on its allocated line for each
    eviction (at the share it held just before)."""
    jobs = [j for j in report["workloads"] if j.get("queue") == queue]
    arrivals = [float(j["submitted"]) / scale for j in jobs]
    if arrivals:
        axes.plot(
            arrivals,
            [1.0] * len(arrivals),
            linestyle="none",
            marker="|",
            markersize=9,
            color=colour,
            alpha=0.6,
            label=f"{queue} arrivals",
        )
    evicted = [float(t) for j in jobs for t in j.get("evictedAt") or ()]
    if evicted:
        xs, ys = held
        axes.plot(
            [t / scale for t in evicted],
            [_at(xs, ys, t) for t in evicted],
            linestyle="none",
            marker="x",
            markersize=7,
            color=colour,
            label=f"{queue} evictions",
        )


def _at(xs: list[float], ys: list[float], t: float) -> float:
    """The step function's value just before ``t``."""
    value = ys[0] if ys else 0.0
    for x, y in zip(xs, ys, strict=True):
        if x >= t:
            break
        value = y
    return value


def _milli(resources: collections.abc.Mapping[str, str]) -> dict[str, int]:
    return {name: quantities.parse_milli(text) for name, text in resources.items()}


def _series(samples: collections.abc.Iterable[reports.Sample]) -> _Samples:
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
