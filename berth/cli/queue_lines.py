"""One queue's line as ``kubectl berth queue QUEUE`` shows it: who waits, in what order, why.

Two sources give the same :class:`Line`:

- :func:`from_operator`: the operator's visibility API
  (``/berth/v1/queues`` and ``/berth/v1/queues/{name}/waiting``, a page at a time), which knows
  every waiting group, a pod's group of one included;
- :func:`from_objects`: the Queue and PodGroups as the API server lists them — their status
  as the operator last wrote it (``queuePosition``, ``queuePending``, the ``Scheduled``
  condition) — when the operator cannot be reached from where kubectl runs.

:func:`render` prints the queue's state and usage and the line as a table.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import typing
import urllib.error
import urllib.parse
import urllib.request

import rich.console
import rich.table
import rich.text

from berth.api import custom_objects, objects, podgroups
from berth.util import suggestions

__all__ = ["Line", "NoSuchQueue", "Waiting", "from_objects", "from_operator", "render"]


# The operator's visibility answers (berth.operator.visibility), the fields read here.
class QueueItem(typing.TypedDict, total=False):
    """One queue of ``/berth/v1/queues``."""

    name: str
    state: str
    stateReason: str | None
    allocated: str
    fairShare: str
    guaranteed: str
    pendingPods: int
    runningPods: int


class QueueList(typing.TypedDict, total=False):
    """``/berth/v1/queues``."""

    items: list[QueueItem]


class WaitingEntry(typing.TypedDict, total=False):
    """One group of ``/berth/v1/queues/{name}/waiting``."""

    position: int
    kind: str
    namespace: str
    name: str
    reason: str | None


WaitingList = typing.TypedDict(
    "WaitingList", {"total": int, "items": list[WaitingEntry], "continue": str}, total=False
)
"""``/berth/v1/queues/{name}/waiting``: one page, and the token of the next (none: the last)."""


@dataclasses.dataclass(frozen=True)
class Waiting:
    """One waiting group."""

    position: int
    kind: str  # "PodGroup", or "Pod" for a pod's group of one
    namespace: str
    name: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Line:
    """A queue, its state and usage, and the first of those waiting in it."""

    queue: str
    state: str
    state_reason: str | None
    pods: str  # "3 pending, 2 running"
    usage: str  # "allocated 2 cpu of fair share 4 cpu (guaranteed 4 cpu)"
    total: int  # how many wait
    waiting: tuple[Waiting, ...]
    unlisted: int = 0  # pods pending in groups of one the source cannot list (no PodGroup)


class NoSuchQueue(LookupError):
    """The queue does not exist."""


def from_operator(
    url: str, queue: str, *, limit: int, token: str | None = None, timeout: float = 10.0
) -> Line:
    """The line from the operator at ``url`` (its first ``limit`` groups, page by page), asked
    with the bearer ``token`` when given (the operator authorizes each path through the API
    server: RBAC on the non-resource URL ``/berth/*``)."""
    listed: QueueList = json.loads(_get(url, "/berth/v1/queues", token=token, timeout=timeout))
    found = [q for q in listed.get("items", ()) if q.get("name") == queue]
    if not found:
        names = [str(q.get("name")) for q in listed.get("items", ())]
        raise NoSuchQueue(f'queue "{queue}" not found{suggestions.suffix(queue, names)}')
    item = found[0]
    waiting: list[Waiting] = []
    page_token: str | None = None
    total = 0
    while len(waiting) < limit:
        query = {"limit": str(min(limit - len(waiting), 500))}
        if page_token is not None:
            query["continue"] = page_token
        page: WaitingList = json.loads(
            _get(
                url,
                f"/berth/v1/queues/{urllib.parse.quote(queue)}/waiting?"
                f"{urllib.parse.urlencode(query)}",
                token=token,
                timeout=timeout,
            )
        )
        total = int(page.get("total", 0))
        for entry in page.get("items", ()):
            waiting.append(
                Waiting(
                    int(entry["position"]),
                    str(entry.get("kind") or "PodGroup"),
                    str(entry.get("namespace") or ""),
                    str(entry.get("name") or ""),
                    str(entry.get("reason") or "waiting for its turn"),
                )
            )
        page_token = page.get("continue")
        if page_token is None:
            break
    return Line(
        queue=queue,
        state=str(item.get("state") or "Open"),
        state_reason=item.get("stateReason"),
        pods=f"{item.get('pendingPods', 0)} pending, {item.get('runningPods', 0)} running",
        usage=f"allocated {item.get('allocated')} of fair share {item.get('fairShare')} "
        f"(guaranteed {item.get('guaranteed')})",
        total=total,
        waiting=tuple(waiting),
    )


def from_objects(
    queue: custom_objects.Queue | None,
    groups: collections.abc.Iterable[custom_objects.PodGroup],
    *,
    name: str,
    limit: int,
    known: collections.abc.Iterable[str] = (),
) -> Line:
    """The line from the listed Queue (None: it does not exist) and every PodGroup;
    ``known``: every queue's name, for the closest one when ``name`` is not among them."""
    if queue is None and name != "default":
        raise NoSuchQueue(f'queue "{name}" not found{suggestions.suffix(name, known)}')
    status = (queue or {}).get("status") or {}
    summary = status.get("summary") or {}
    waiting: list[Waiting] = []
    total = 0
    for group in groups:
        group_status = group.get("status") or {}
        place = group_status.get("queuePosition")
        if (group.get("spec") or {}).get("queue", "default") != name or not isinstance(place, int):
            continue
        total = max(total, int(group_status.get("queuePending") or 0))
        meta = group.get("metadata") or {}
        scheduled: objects.Condition = next(
            (
                c
                for c in group_status.get("conditions") or ()
                if c.get("type") == podgroups.CONDITION_SCHEDULED
            ),
            objects.Condition(),
        )
        waiting.append(
            Waiting(
                place,
                "PodGroup",
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                str(scheduled.get("message") or "waiting for its turn"),
            )
        )
    waiting.sort(key=lambda w: (w.position, w.namespace, w.name))
    pending = int(status.get("pendingPods") or 0)
    return Line(
        queue=name,
        state=str(status.get("state") or "Open"),
        state_reason=status.get("stateReason"),
        pods=f"{status.get('pendingPods', 0)} pending, {status.get('runningPods', 0)} running",
        usage=f"allocated {summary.get('allocated', '0')} of fair share "
        f"{summary.get('fairShare', '0')} (guaranteed {summary.get('guaranteed', '0')})",
        total=max(total, len(waiting)),
        waiting=tuple(waiting[:limit]),
        # Pods without a PodGroup wait as groups of one, which only the operator lists.
        unlisted=pending if not waiting else 0,
    )


def render(line: Line) -> rich.console.RenderableType:
    """The queue's heading and its line as a table."""
    heading = rich.text.Text()
    heading.append(f"queue {line.queue}", style="bold")
    heading.append(f"  {line.state}")
    if line.state_reason:
        heading.append(f" ({line.state_reason})", style="yellow")
    heading.append(f" · pods {line.pods} · {line.usage}")
    if not line.waiting and line.unlisted:
        hint = rich.text.Text(
            f"{line.unlisted} pod(s) pending as groups of one (no PodGroup): add --operator URL "
            "to list them in their order, or kubectl get pods --field-selector "
            "status.phase=Pending",
            style="dim",
        )
        return rich.console.Group(heading, hint)
    if not line.waiting:
        return rich.console.Group(heading, rich.text.Text("nothing waits in this queue"))
    table = rich.table.Table(box=None, header_style="bold", pad_edge=False)
    for column in ("POSITION", "KIND", "NAME", "WHY IT WAITS"):
        table.add_column(column)
    for entry in line.waiting:
        name = f"{entry.namespace}/{entry.name}" if entry.namespace else entry.name
        table.add_row(f"{entry.position}/{line.total}", entry.kind, name, entry.reason)
    shown = rich.text.Text(
        f"{line.total} waiting"
        + (f", first {len(line.waiting)} shown" if line.total > len(line.waiting) else ""),
        style="dim",
    )
    return rich.console.Group(heading, table, shown)


def _get(url: str, path: str, *, token: str | None, timeout: float) -> bytes:
    """The operator's answer to ``GET path``, its JSON undecoded (each caller knows its shape)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url.rstrip("/") + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body: bytes = answer.read()
            return body
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error") or exc.reason
        except ValueError:
            message = exc.reason
        if exc.code == 404:
            raise NoSuchQueue(str(message)) from None
        if exc.code in (401, 403):
            raise RuntimeError(
                f"the operator at {url} answered {exc.code}: {message} (it authorizes each path"
                " through the API server: your user needs get on nonResourceURLs /berth/*, e.g."
                " the chart's berth-viewer ClusterRole; --token TOKEN sends another identity's)"
            ) from None
        raise RuntimeError(f"the operator at {url} answered {exc.code}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"cannot reach the operator at {url}: {exc}") from None
