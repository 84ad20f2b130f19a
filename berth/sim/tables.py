"""``berth sim --output table``: the report as rich tables, and the progress bar of a run.

:func:`render` prints four tables from the JSON report (so what a user reads is exactly
what ``--output json`` holds): the summary, one row per queue (weight, fair share, average and
peak allocation, waits), the waits by job size (where a trace's big gangs show) and one row
per workload generator (jobs, started, finished, evictions, waits). :func:`progress` shows
how far virtual time has got while a simulation runs, on stderr so that stdout stays clean
for the report. Used by ``berth sim``.
"""

from __future__ import annotations

import collections.abc
import contextlib

import rich.console
import rich.progress
import rich.table

from berth.sim import reports

__all__ = ["format_seconds", "progress", "render"]

ProgressFn = collections.abc.Callable[[int, int | None], None]
_MAX_WORKLOAD_ROWS = 30
_NO_WAIT: reports.QueueWait = {"p50": None, "p90": None, "jobs": 0, "started": 0, "pendingAtEnd": 0}


def render(report: reports.Report, *, console: rich.console.Console) -> None:
    """Print the summary, queue, job size and workload tables of ``report``."""
    console.print(_summary(report))
    console.print(_queues(report))
    console.print(_sizes(report))
    console.print(_workloads(report))


@contextlib.contextmanager
def progress(
    *, console: rich.console.Console, until: int | None
) -> collections.abc.Iterator[ProgressFn]:
    """A progress bar over virtual time; yields ``update(now_ms, horizon_ms)``.

    Without ``until`` the horizon is the latest event known so far, which grows as jobs
    arrive; the bar then shows how far the known work has got.
    """
    bar = rich.progress.Progress(
        rich.progress.TextColumn("[bold]simulating"),
        rich.progress.BarColumn(),
        rich.progress.TextColumn("{task.fields[now]}"),
        rich.progress.TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with bar:
        task = bar.add_task("sim", total=until or 1, now="0s")

        def update(now: int, horizon: int | None) -> None:
            total = until or max(horizon or 0, now, 1)
            bar.update(task, completed=now, total=total, now=format_seconds(now / 1000))

        yield update


def format_seconds(seconds: float | None) -> str:
    """``1h02m``, ``4m30s``, ``12.5s``; ``-`` for none."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    if whole >= 3600:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    if whole >= 60:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{seconds:g}s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _whole_percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def _resources(value: collections.abc.Mapping[str, str] | None) -> str:
    if not value:
        return "-"
    return ", ".join(f"{name} {text}" for name, text in value.items() if name != "pods") or "-"


def _summary(report: reports.Report) -> rich.table.Table:
    summary = report["summary"]
    table = rich.table.Table(title=f"berth sim: {report['scenario']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("virtual time", format_seconds(report["end"]))
    cluster = report["cluster"]
    table.add_row("nodes", f"{cluster['nodes']} ({_resources(cluster['capacity'])})")
    jobs = summary["jobs"]
    table.add_row(
        "jobs",
        f"{jobs['submitted']} submitted, {jobs['started']} started, {jobs['finished']} finished",
    )
    for name, value in summary["utilization"].items():
        if name != "pods":
            table.add_row(f"utilization {name}", _percent(value))
    jain, contended = summary["jainIndex"], format_seconds(summary["contendedSeconds"])
    table.add_row(
        "Jain's index",
        "- (queues never competed)" if jain is None else f"{jain:.3f} over {contended}",
    )
    partial = summary["partialGangs"]
    table.add_row("partial gangs", f"[red]{partial}[/red]" if partial else "0")
    table.add_row("evictions", str(summary["evictions"]))
    table.add_row("cycles", f"{summary['cycles']} ({summary['decisions']} decisions)")
    return table


def _shares(
    samples: list[reports.Sample], *, basis: dict[str, int], end: float
) -> tuple[float, float]:
    """Time-averaged and peak dominant share of a queue's allocation."""
    total, peak = 0.0, 0.0
    for i, sample in enumerate(samples):
        share = reports.dominant_share(sample["resources"], basis)
        start = float(sample["t"])
        stop = float(samples[i + 1]["t"]) if i + 1 < len(samples) else end
        total += share * max(stop - start, 0.0)
        peak = max(peak, share)
    return (total / end if end > 0 else 0.0), peak


def _queues(report: reports.Report) -> rich.table.Table:
    basis = reports.share_basis(report)
    end = float(report["end"])
    table = rich.table.Table(
        title="Queues",
        title_justify="left",
        caption="fair, avg, peak: dominant share of the cluster; pending: jobs waiting at the "
        "end; evicted: pods; lost: run time evictions threw away, as a share of the cluster's",
        caption_justify="left",
    )
    table.add_column("queue", no_wrap=True)
    columns = ("weight", "fair", "avg", "peak", "jobs", "pending", "p50 wait", "p90 wait")
    for column in (*columns, "evicted", "lost"):
        table.add_column(column, justify="right", no_wrap=True)
    waits = report["summary"]["wait"]
    for name, queue in report["queues"].items():
        average, peak = _shares(queue["allocated"], basis=basis, end=end)
        wait = waits.get(name, _NO_WAIT)
        table.add_row(
            name,
            str(queue["weight"] or "-"),
            _whole_percent(reports.dominant_share(queue["fairShare"], basis)),
            _whole_percent(average),
            _whole_percent(peak),
            str(wait["jobs"]),
            str(wait["pendingAtEnd"]),
            format_seconds(wait["p50"]),
            format_seconds(wait["p90"]),
            str(queue.get("evictions", 0)),
            _lost(queue.get("workLost") or {}, basis=basis, end=end),
        )
    return table


def _sizes(report: reports.Report) -> rich.table.Table:
    table = rich.table.Table(
        title="Waits by job size",
        title_justify="left",
        caption="size: what a job's pods ask together of its dominant resource, up to a "
        "power of two (more than half of it)",
        caption_justify="left",
    )
    table.add_column("size", no_wrap=True)
    for column in ("jobs", "started", "p50 wait", "p90 wait", "max wait"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in report["summary"]["waitBySize"]:
        resource, top = row["resource"], row["upTo"]
        table.add_row(
            "asks nothing the nodes have" if resource is None else f"≤ {top} {resource}",
            str(row["jobs"]),
            str(row["started"]),
            format_seconds(row["p50"]),
            format_seconds(row["p90"]),
            format_seconds(row["max"]),
        )
    return table


def _lost(lost: collections.abc.Mapping[str, float], *, basis: dict[str, int], end: float) -> str:
    """Work lost (resource-seconds) as the dominant share of the cluster's resource-time."""
    if end <= 0:
        return "-"
    share = max(
        (seconds * 1000 / (basis[name] * end) for name, seconds in lost.items() if name in basis),
        default=0.0,
    )
    return _percent(share) if share else "-"


def _workloads(report: reports.Report) -> rich.table.Table:
    groups: dict[tuple[str, str], list[reports.WorkloadRecord]] = {}
    for job in report["workloads"]:
        label = job["workload"] or job["name"]
        groups.setdefault((job["namespace"], label), []).append(job)
    table = rich.table.Table(title="Workloads", title_justify="left")
    table.add_column("workload", no_wrap=True)
    table.add_column("queue", no_wrap=True)
    for column in ("jobs", "started", "done", "evicted", "p50 wait", "max wait"):
        table.add_column(column, justify="right", no_wrap=True)
    reasons: list[str] = []
    for index, ((namespace, label), jobs) in enumerate(sorted(groups.items())):
        if index == _MAX_WORKLOAD_ROWS:
            table.add_row("...", f"{len(groups) - index} more (see --output json)")
            break
        waits = [float(j["wait"]) for j in jobs]
        table.add_row(
            f"{namespace}/{label}",
            jobs[0]["queue"] or "-",
            str(len(jobs)),
            str(sum(1 for j in jobs if j["started"] is not None)),
            str(sum(1 for j in jobs if j["finished"] is not None)),
            str(sum(j["evictions"] for j in jobs)),
            format_seconds(reports.percentile(waits, 0.5)),
            format_seconds(max(waits, default=None)),
        )
        waiting = sorted({j["reason"] for j in jobs if j["reason"]})
        if waiting:
            reasons.append(f"{namespace}/{label} waits: {waiting[0]}")
    if reasons:
        table.caption = "\n".join(reasons[:_MAX_WORKLOAD_ROWS])
        table.caption_justify = "left"
    return table
