"""The one way Berth writes an object's status, annotations or labels: :class:`Writer`.

Every status, annotation and label write of Berth goes through a :class:`Writer` (bindings,
evictions and Events have their own protocols: subresources that create, not patches):

- :meth:`Writer.update`: **read at version, change, patch, retry on conflict**. It reads the
  object, asks ``change`` for the merge patch that brings it where the caller wants (``None``:
  nothing to write), and sends that patch carrying the ``resourceVersion`` it read, so the API
  server refuses it (409) if someone wrote in between; a 409 reads again, after a backoff, a
  bounded number of times. A caller's decision is therefore always made on the object as it is
  when the write lands (an ended Reservation is never made ``Available`` again because an
  older read said it was still pending).
- :meth:`Writer.patch`: one merge patch without a version (an annotation, a condition, a
  gate removed: a field only Berth writes, where the last writer should win), with the same
  bounded retry on 409 and the same handling of every other failure.
- :meth:`Writer.create`: create an object unless one of its name exists (``UNCHANGED``
  then: what is there is kept, never overwritten; the default Queue, capacity requests and
  their PodTemplates); ``GONE`` when its collection is not served.
- :meth:`Writer.delete`: delete the object with a ``uid`` precondition, so an object of the
  same name created since is never the one deleted (a garbage collector acting for the
  leader).
- **Fencing**: a writer built with the leader's :class:`~berth.kube.transport.fencing.Fence` checks
  it after ``change`` decided and immediately before the patch is sent, so a write prepared
  before a pause is dropped; the fenced API client checks again when the body is written to
  the socket. A refused write is :attr:`Outcome.FENCED`, never retried.
- **Throttled logging**: a failure is logged once per kind and object per window
  (:class:`ThrottledLog`), then at debug level, so a flapping API server or one bad object
  does not write a line per cycle.

Nothing here raises for an API failure: the :class:`Written` result says what happened and
callers decide (most only count it).
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import logging
import time
import typing

import typing_extensions

from berth.api import objects
from berth.kube.transport import errors, fencing, rest

if typing.TYPE_CHECKING:
    import kubernetes_asyncio.client

__all__ = ["Change", "Outcome", "Retry", "ThrottledLog", "Writer", "Written"]

logger = logging.getLogger(__name__)

_Object = typing_extensions.TypeVar("_Object", bound=objects.KubeObject, default=objects.KubeObject)
"""The kind's record of what a write reads or answers (``core.Pod``, ``dra.ResourceClaim``)."""

Change = collections.abc.Callable[[_Object], collections.abc.Mapping[str, object] | None]
"""Given the object as read, the merge patch to send (``None`` or ``{}``: nothing to write): any
JSON object, ``null`` where a field is to go (so not the kind's record)."""


class Outcome(enum.Enum):
    """What one write came to."""

    WRITTEN = "Written"
    """The API server accepted the patch."""
    UNCHANGED = "Unchanged"
    """The object already was as wanted: nothing sent."""
    GONE = "Gone"
    """The object does not exist (any more)."""
    CONFLICTED = "Conflicted"
    """It changed under every attempt: given up after :attr:`Retry.attempts`."""
    FENCED = "Fenced"
    """Not sent: this replica may not write for the leader (any more)."""
    FAILED = "Failed"
    """Any other failure (refused, unreachable, timed out); logged, throttled."""


@dataclasses.dataclass(frozen=True)
class Written(typing.Generic[_Object]):
    """The result of a write: its outcome and the object as the API server answered (the
    object as read for ``UNCHANGED``; None otherwise)."""

    outcome: Outcome
    object: _Object | None = None

    @property
    def ok(self) -> bool:
        """The object is as wanted (written now or already)."""
        return self.outcome in (Outcome.WRITTEN, Outcome.UNCHANGED)


@dataclasses.dataclass(frozen=True)
class Retry:
    """How often a conflicted write is tried and how long it waits in between: ``first``
    seconds, doubling, never more than ``cap``."""

    attempts: int = 5
    first: float = 0.05
    cap: float = 1.0

    def delays(self) -> collections.abc.Iterator[float]:
        """The waits before the 2nd, 3rd, ... attempt."""
        delay = self.first
        for _ in range(self.attempts - 1):
            yield min(delay, self.cap)
            delay *= 2


class ThrottledLog:
    """A warning once per (kind, subject) per ``window`` seconds; repeats at debug level.

    The map of last warnings is bounded: the oldest entries go first."""

    def __init__(
        self,
        log: logging.Logger = logger,
        *,
        window: float = 300.0,
        limit: int = 4096,
        now: collections.abc.Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._window = window
        self._limit = limit
        self._now = now
        self._last: dict[tuple[str, str], float] = {}

    def warning(self, kind: str, subject: str, message: str) -> bool:
        """Log ``message``; True when it went out as a warning (not throttled)."""
        key = (kind, subject)
        now = self._now()
        last = self._last.get(key)
        if last is not None and now - last < self._window:
            self._log.debug("%s (again)", message)
            return False
        if last is None and len(self._last) >= self._limit:
            del self._last[next(iter(self._last))]
        self._last.pop(key, None)
        self._last[key] = now
        self._log.warning("%s", message)
        return True


class Writer:
    """Berth's write primitive over one API client; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        fence: fencing.Fence | None = None,
        retry: Retry = Retry(),
        log: ThrottledLog | None = None,
        timeout: float = 30.0,
        sleep: collections.abc.Callable[[float], collections.abc.Awaitable[None]] = asyncio.sleep,
        field_manager: str | None = None,
    ) -> None:
        self._api = api
        # Who writes, as the API server records it (managedFields, the audit log).
        self._query = {"fieldManager": field_manager} if field_manager else None
        self._fence = fence
        self._retry = retry
        self._log = log or ThrottledLog()
        self._timeout = timeout
        self._sleep = sleep
        self.sent = 0
        """Patches and deletions the API server accepted (tests, metrics)."""

    async def update(
        self,
        path: str,
        change: Change[_Object],
        *,
        subresource: str = "",
        what: str = "",
        known: _Object | None = None,
    ) -> Written[_Object]:
        """Read ``path``, patch it with ``change(object)`` at the version read; on 409 again.

        ``subresource`` (``"status"``) is where the patch goes; the read is always of the
        object itself. ``known``: the object as the caller last saw it (an informer's copy,
        an earlier write's answer), with its ``resourceVersion``: the first attempt is made
        at that version without reading, and a 409 reads as usual."""
        what = what or path
        target = f"{path}/{subresource}" if subresource else path
        delays = self._retry.delays()
        while True:
            guessed = known is not None
            if known is not None:
                current, known = known, None
            else:
                try:
                    answer = await rest.request(
                        self._api, method="GET", path=path, timeout=self._timeout
                    )
                    current = typing.cast(_Object, answer)  # the object at path: the caller's kind
                except errors.NotFound:
                    return Written(Outcome.GONE)
                except errors.KubeError as exc:
                    return Written(self._failed(what, f"reading {what}: {exc}"))
            patch = change(current)
            if not patch:
                if guessed:
                    continue  # nothing to do as the caller saw it: make sure, on a fresh read
                return Written(Outcome.UNCHANGED, current)
            seen: objects.KubeObject = current
            read = seen.get("metadata")
            version = read.get("resourceVersion") if read else None
            meta = patch.get("metadata")
            body = {
                **patch,
                "metadata": {
                    **(meta if isinstance(meta, collections.abc.Mapping) else {}),
                    "resourceVersion": version,
                },
            }
            written = await self._send(target, body, rest.MERGE_PATCH, what=what)
            if written is not None:
                # The API server answers with the object patched: the caller's kind.
                return Written(written.outcome, typing.cast(_Object | None, written.object))
            delay = next(delays, None)
            if delay is None:
                message = f"{what} kept changing ({self._retry.attempts} attempts); skipped"
                return Written(self._failed(what, message, outcome=Outcome.CONFLICTED))
            await self._sleep(delay)

    async def patch(
        self,
        path: str,
        body: collections.abc.Mapping[str, object],  # any JSON object: a merge patch
        *,
        content_type: str = rest.MERGE_PATCH,
        what: str = "",
        retry: bool = True,
    ) -> Written:
        """Send ``body`` as one patch to ``path``; on 409 again, bounded. ``retry=False`` for a
        body that names the version it was decided on: a 409 then means it is stale, and
        sending it again cannot help."""
        what = what or path
        delays = self._retry.delays() if retry else iter(())
        for delay in (*delays, None):
            written = await self._send(path, body, content_type, what=what)
            if written is not None:
                return written
            if delay is None:
                break
            await self._sleep(delay)
        if not retry:
            message = f"{what} changed since the version the patch names"
        else:
            message = f"{what} kept conflicting ({self._retry.attempts} attempts)"
        return Written(self._failed(what, message, outcome=Outcome.CONFLICTED))

    async def create(
        self, path: str, body: collections.abc.Mapping[str, object], *, what: str = ""
    ) -> Written:
        """POST ``body`` to the collection at ``path``: ``WRITTEN`` with the object created,
        ``UNCHANGED`` when an object of its name exists already (left as it is), ``GONE`` when
        the collection is not served (its CRD not installed, or its namespace gone)."""
        what = what or path
        try:
            if self._fence is not None:
                self._fence.check(what)
            answer = await rest.request(
                self._api,
                method="POST",
                path=path,
                query=self._query,
                body=body,
                timeout=self._timeout,
            )
        except errors.NotLeader:
            return Written(Outcome.FENCED)
        except errors.Conflict:
            return Written(Outcome.UNCHANGED)  # 409 AlreadyExists: someone's object is kept
        except errors.NotFound:
            return Written(Outcome.GONE)
        except errors.KubeError as exc:
            return Written(self._failed(what, f"creating {what}: {exc}"))
        self.sent += 1
        return Written(Outcome.WRITTEN, typing.cast(objects.KubeObject, answer))

    async def delete(self, path: str, *, uid: str, what: str = "") -> Written:
        """Delete the object at ``path`` if it still is the one with ``uid``: ``WRITTEN``
        when deleted, ``GONE`` when it is gone already or another object has its name now."""
        what = what or path
        try:
            if self._fence is not None:
                self._fence.check(what)
            await rest.request(
                self._api,
                method="DELETE",
                path=path,
                body={"preconditions": {"uid": uid}},
                timeout=self._timeout,
            )
        except errors.NotLeader:
            return Written(Outcome.FENCED)
        except (errors.NotFound, errors.Conflict):
            return Written(Outcome.GONE)  # a 409 here: the uid precondition failed
        except errors.KubeError as exc:
            return Written(self._failed(what, f"deleting {what}: {exc}"))
        self.sent += 1
        return Written(Outcome.WRITTEN)

    async def _send(
        self, path: str, body: collections.abc.Mapping[str, object], content_type: str, *, what: str
    ) -> Written | None:
        """One PATCH; None for a 409 (the caller retries)."""
        try:
            if self._fence is not None:
                self._fence.check(what)
            answer = await rest.request(
                self._api,
                method="PATCH",
                path=path,
                query=self._query,
                body=body,
                content_type=content_type,
                timeout=self._timeout,
            )
        except errors.NotLeader:
            return Written(Outcome.FENCED)  # the fence logs once per episode
        except errors.Conflict:
            return None
        except errors.NotFound:
            return Written(Outcome.GONE)
        except errors.KubeError as exc:
            return Written(self._failed(what, f"writing {what}: {exc}"))
        self.sent += 1
        return Written(Outcome.WRITTEN, typing.cast(objects.KubeObject, answer))

    def _failed(self, what: str, message: str, *, outcome: Outcome = Outcome.FAILED) -> Outcome:
        self._log.warning(outcome.value, what, message)
        return outcome
