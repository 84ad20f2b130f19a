"""``berth bench peers --real --plot``: each queue's share of the cluster over time, per system.

One panel per system (Kueue + kube-scheduler, Berth), drawn from the JSON report alone: for
each queue a solid line, the share of the cluster's cpu its running pods hold, and a dashed
line of the same colour, its weighted fair share given what it asks for at that moment
(:func:`berth.cli.peers_workload.fair_shares`). The title of each panel gives its mean absolute
error, Jobs started per minute and partial gangs. Matplotlib through its object API (no
pyplot); it comes with the ``[sim]`` extra.
"""

from __future__ import annotations

import pathlib
import typing

from berth.util import extras

if typing.TYPE_CHECKING:  # the report's shape only: drawing needs no real control plane
    from berth.cli import peers

try:
    import matplotlib.figure
except ModuleNotFoundError as exc:  # pragma: no cover - exercised by tests/packaging
    raise extras.missing("sim", exc) from exc

__all__ = ["draw", "figure"]

_SYSTEMS: tuple[tuple[typing.Literal["kueue_kube_scheduler", "berth"], str], ...] = (
    ("kueue_kube_scheduler", "Kueue + kube-scheduler"),
    ("berth", "Berth"),
)
_COLORS = ("#3f6fb5", "#d9822b", "#4c9a2a", "#a23b72", "#6b6b6b", "#c2a800")


def draw(report: peers.PeersReport, path: pathlib.Path) -> None:
    """Draw ``report`` into the PNG file at ``path``."""
    figure(report).savefig(path, format="png", metadata={"Software": None})


def figure(report: peers.PeersReport) -> matplotlib.figure.Figure:
    """The plot of ``report`` (see the module docstring), not yet saved."""
    present = [(key, title) for key, title in _SYSTEMS if key in report]
    drawing = matplotlib.figure.Figure(
        figsize=(7 * max(1, len(present)), 5), dpi=100, layout="constrained"
    )
    axes = drawing.subplots(1, max(1, len(present)), squeeze=False, sharey=True)[0]
    weights = report.get("weights") or {}
    for ax, (key, title) in zip(axes, present, strict=False):
        result = report[key]
        for index, (queue, points) in enumerate(sorted(result["series"].items())):
            color = _COLORS[index % len(_COLORS)]
            times = [p[0] for p in points]
            ax.plot(
                times,
                [p[1] for p in points],
                color=color,
                label=f"{queue} (weight {weights.get(queue, '?')})",
            )
            ax.plot(times, [p[2] for p in points], color=color, linestyle="--", linewidth=1)
        error = (result.get("fair_share_error") or {}).get("all")
        ax.set_title(
            f"{title}\nfair-share error {error}, "
            f"{result.get('jobs_started_per_minute')} Jobs/min, "
            f"{result.get('partial_gangs')} partial gangs",
            fontsize=10,
        )
        ax.set_xlabel("seconds since the first Job was created")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8, title="solid: held; dashed: fair share", title_fontsize=8)
    axes[0].set_ylabel("share of the cluster's cpu")
    drawing.suptitle(
        f"berth bench peers --real: {report.get('jobs')} Jobs of {report.get('parallelism')} "
        f"pods on {report.get('nodes')} nodes ({report.get('node')}), Kueue "
        f"{report.get('kueue')}, Kubernetes {report.get('kubernetes')}"
    )
    return drawing
