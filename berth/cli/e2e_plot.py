"""``berth bench e2e --real --plot``: the schedulers side by side, shape by shape, in one PNG.

Drawn from the JSON report alone (a saved report can be drawn again with :func:`draw`):

- *stream* and *backlog* pods/s per shape, one bar per scheduler (null, kube-scheduler,
  Berth); the null scheduler's bar is the ceiling the API server, etcd and KWOK allow;
- the scheduler's own CPU seconds per 1000 pods bound, per shape (stream and backlog);
- for ``unschedulable-backlog``, the stream rate per standing backlog, one line per scheduler.

Matplotlib through its object API (a bare ``Figure`` and the Agg canvas: no pyplot, no
display); it comes with the ``[sim]`` extra.
"""

from __future__ import annotations

import pathlib
import typing

from berth.util import extras

try:
    import matplotlib.figure
except ModuleNotFoundError as exc:  # pragma: no cover - exercised by tests/packaging
    raise extras.missing("sim", exc) from exc

if typing.TYPE_CHECKING:  # the report's shape only: drawing needs no real control plane
    from berth.cli import e2e_real, e2e_shapes

__all__ = ["draw", "figure"]

_Phase = typing.Literal["stream", "backlog"]
_Value = typing.Literal["pods_per_second", "cpu_seconds_per_1000_pods"]
_LABELS: dict[e2e_shapes.ContenderLabel, str] = {
    "null": "null scheduler (ceiling)",
    "kube_scheduler": "kube-scheduler",
    "berth": "Berth",
}
_COLORS = {"null": "#9e9e9e", "kube_scheduler": "#3f6fb5", "berth": "#d9822b"}
_PHASES: tuple[_Phase, ...] = ("stream", "backlog")
_UNSCHEDULABLE = "unschedulable-backlog"


def draw(report: e2e_real.E2eRealReport, path: pathlib.Path) -> None:
    """Draw ``report`` into the PNG file at ``path``."""
    figure(report).savefig(path, format="png", metadata={"Software": None})


def _value(
    report: e2e_real.E2eRealReport,
    shape: str,
    contender: e2e_shapes.ContenderLabel,
    phase: _Phase,
    key: _Value,
) -> float:
    entry = report["shapes"].get(shape)
    phases = entry.get(contender) if entry else None
    found = phases.get(phase) if phases else None
    value = found.get(key) if found else None
    return float(value) if isinstance(value, int | float) else 0.0


def figure(report: e2e_real.E2eRealReport) -> matplotlib.figure.Figure:
    """The plot of ``report`` (see the module docstring), not yet saved."""
    shapes = [s for s in report["shapes"] if s != _UNSCHEDULABLE]
    # The unschedulable-backlog shape's entry is by standing backlog (e2e_real.StandingShape).
    unschedulable = typing.cast(
        "e2e_real.StandingShape | None", report["shapes"].get(_UNSCHEDULABLE)
    )
    panels = 3 + (1 if unschedulable else 0)
    drawing = matplotlib.figure.Figure(figsize=(5 * panels, 5), dpi=100, layout="constrained")
    axes = drawing.subplots(1, panels, squeeze=False)[0]
    contenders = list(_LABELS)
    width = 0.8 / len(contenders)
    positions = range(len(shapes))
    panes: tuple[tuple[_Phase, _Value, str], ...] = (
        ("stream", "pods_per_second", "stream: pods/s created → bound"),
        ("backlog", "pods_per_second", "backlog: pods/s placed after resuming"),
    )
    for ax, (phase, key, title) in zip(axes, panes, strict=False):
        for i, contender in enumerate(contenders):
            ax.bar(
                [p + i * width for p in positions],
                [_value(report, s, contender, phase, key) for s in shapes],
                width,
                label=_LABELS[contender],
                color=_COLORS[contender],
            )
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("pods/s")
    cpu = axes[2]
    for i, contender in enumerate(contenders[1:]):
        for j, phase in enumerate(_PHASES):
            cpu.bar(
                [p + (2 * i + j) * 0.2 for p in positions],
                [_value(report, s, contender, phase, "cpu_seconds_per_1000_pods") for s in shapes],
                0.2,
                label=f"{_LABELS[contender]} ({phase})",
                color=_COLORS[contender],
                alpha=1.0 if phase == "stream" else 0.55,
            )
    cpu.set_title("scheduler CPU seconds per 1000 pods bound", fontsize=10)
    cpu.set_ylabel("CPU s / 1000 pods")
    for ax in axes[:3]:
        ax.set_xticks([p + 0.3 for p in positions], shapes, rotation=30, ha="right")
        ax.legend(fontsize=8)
    if unschedulable:
        ax = axes[3]
        for contender in contenders:
            levels = unschedulable.get(contender) or {}
            standing = sorted(int(level) for level in levels)
            rates = [levels[str(s)]["stream"]["pods_per_second"] for s in standing]
            ax.plot(standing, rates, marker="o", label=_LABELS[contender], color=_COLORS[contender])
        ax.set_title("stream pods/s beside a standing\nunschedulable backlog", fontsize=10)
        ax.set_xlabel("pods standing unschedulable")
        ax.set_ylabel("pods/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    drawing.suptitle(
        f"berth bench e2e --real: {report.get('nodes')} nodes, Kubernetes "
        f"{report.get('kubernetes')}, {(report.get('machine') or {}).get('cpus')} CPUs"
    )
    return drawing
