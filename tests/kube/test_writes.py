"""Berth's write primitive (:mod:`berth.kube.transport.writes`) against the emulator.

We test these aspects:

- ``update`` reads, asks ``change`` and writes at the version read; a write landing in between
  makes the API server answer 409, and the retry decides again on the fresh object (nothing
  the other writer wrote is lost);
- an object changing under every attempt gives up after the bounded attempts (``CONFLICTED``),
  waiting the capped, doubling backoff in between;
- nothing to change sends nothing (``UNCHANGED``); a missing object is ``GONE``;
- ``update`` from an object the caller knows writes at its version without reading; when that
  version is stale (409), or nothing is to be done as the caller saw it, it reads and decides
  again;
- a revoked fence sends nothing (``FENCED``), and the object is untouched;
- ``patch`` writes an annotation; failures are logged once per object per window;
- ``delete`` deletes the object with the uid it was decided on, never a namesake created
  since (``GONE``), and a revoked fence deletes nothing.
"""

from __future__ import annotations

import copy
import logging
import typing

import pytest

from berth.emulator import testing
from berth.kube.transport import clients, fencing, rest, writes
from tests.kube.conftest import create, pod

PATH = "/api/v1/namespaces/default/pods/p"


def labels_of(emulator: testing.RunningEmulator) -> dict[str, str]:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")
    stored = emulator.call(api.get, resource, namespace="default", name="p")
    return dict(stored["metadata"].get("labels") or {})


def label_from(emulator: testing.RunningEmulator, key: str, value: str) -> None:
    """Another writer sets a label (the resourceVersion moves)."""
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")

    def write() -> None:
        stored = copy.deepcopy(dict(api.get(resource, namespace="default", name="p")))
        stored["metadata"].setdefault("labels", {})[key] = value
        api.replace(resource, stored, namespace="default", name="p")

    emulator.call(write)


class Sleeps:
    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


async def test_update_retries_a_conflict_on_the_fresh_object(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    create(emulator, pod("p"), plural="pods")
    sleeps = Sleeps()
    writer = writes.Writer(connection.api, sleep=sleeps)
    seen: list[dict[str, str]] = []

    def change(current: rest.Body) -> rest.Body | None:
        labels = dict(current["metadata"].get("labels") or {})
        seen.append(labels)
        if len(seen) == 1:
            label_from(emulator, "other", "yes")  # lands between our read and our write
        return {"metadata": {"labels": {"count": str(len(labels))}}}

    written = await writer.update(PATH, change, what="pod default/p")
    assert written.outcome is writes.Outcome.WRITTEN
    assert seen == [{}, {"other": "yes"}]  # decided again on what the other writer left
    assert labels_of(emulator) == {"other": "yes", "count": "1"}
    assert sleeps.waited == [0.05]
    assert writer.sent == 1  # the 409 is not counted


async def test_update_from_a_known_version_reads_only_when_it_must(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    known = create(emulator, pod("p"), plural="pods")
    sleeps = Sleeps()
    writer = writes.Writer(connection.api, sleep=sleeps)
    reads = emulator.server.requests_by_path

    def count(current: rest.Body) -> rest.Body | None:
        labels = dict(current["metadata"].get("labels") or {})
        if labels.get("count"):
            return None
        return {"metadata": {"labels": {"count": str(len(labels))}}}

    written = await writer.update(PATH, count, what="pod default/p", known=known)
    assert written.outcome is writes.Outcome.WRITTEN
    assert reads[("GET", PATH)] == 0  # written at the version known
    # Stale now: the 409 makes it read and decide again.
    label_from(emulator, "other", "yes")
    stale = {**known, "metadata": {**known["metadata"], "labels": {}}}
    rewritten = await writer.update(
        PATH, lambda c: {"metadata": {"labels": {"mine": "x"}}}, known=stale
    )
    assert rewritten.outcome is writes.Outcome.WRITTEN
    assert reads[("GET", PATH)] == 1
    assert labels_of(emulator) == {"count": "0", "other": "yes", "mine": "x"}
    # Nothing to do as the caller saw it is made sure of on a fresh read.
    done = {**known, "metadata": {**known["metadata"], "labels": {"count": "9"}}}
    assert (await writer.update(PATH, count, known=done)).outcome is writes.Outcome.UNCHANGED
    assert reads[("GET", PATH)] == 2


async def test_update_gives_up_after_the_bounded_attempts(
    emulator: testing.RunningEmulator,
    connection: clients.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    create(emulator, pod("p"), plural="pods")
    sleeps = Sleeps()
    writer = writes.Writer(
        connection.api, retry=writes.Retry(attempts=4, first=0.1, cap=0.3), sleep=sleeps
    )
    rounds = 0

    def change(current: rest.Body) -> rest.Body:
        nonlocal rounds
        rounds += 1
        label_from(emulator, "round", str(rounds))  # every read is stale by the write
        return {"metadata": {"labels": {"mine": "x"}}}

    with caplog.at_level(logging.WARNING, logger="berth.kube.transport.writes"):
        written = await writer.update(PATH, change, what="pod default/p")
    assert written.outcome is writes.Outcome.CONFLICTED
    assert rounds == 4
    assert sleeps.waited == [0.1, 0.2, 0.3]
    assert "mine" not in labels_of(emulator)
    assert [r.getMessage() for r in caplog.records] == [
        "pod default/p kept changing (4 attempts); skipped"
    ]


async def test_nothing_to_change_sends_nothing_and_a_missing_object_is_gone(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    create(emulator, pod("p"), plural="pods")
    writer = writes.Writer(connection.api)
    unchanged = await writer.update(PATH, lambda current: None)
    assert unchanged.outcome is writes.Outcome.UNCHANGED
    assert unchanged.object is not None and unchanged.object["metadata"]["name"] == "p"
    gone = await writer.update(PATH.replace("/p", "/q"), lambda current: {"x": 1})
    assert gone.outcome is writes.Outcome.GONE
    assert writer.sent == 0


async def test_a_revoked_fence_sends_nothing(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    create(emulator, pod("p"), plural="pods")
    now = 100.0
    fence = fencing.Fence(renew_deadline=3.0, now=lambda: now)
    fence.renewed(99.0)
    writer = writes.Writer(connection.api, fence=fence)
    body: rest.Body = {"metadata": {"annotations": {"a": "1"}}}
    assert (await writer.patch(PATH, body)).outcome is writes.Outcome.WRITTEN
    now = 103.0  # past the renew deadline: a paused leader resuming
    late: rest.Body = {"metadata": {"labels": {"late": "yes"}}}

    def change(current: rest.Body) -> rest.Body:
        return late

    assert (await writer.update(PATH, change)).outcome is writes.Outcome.FENCED
    assert (await writer.patch(PATH, late)).outcome is writes.Outcome.FENCED
    assert labels_of(emulator) == {}
    assert writer.sent == 1
    assert fence.refused == 2


async def test_patch_writes_and_failures_are_logged_once_per_window(
    emulator: testing.RunningEmulator,
    connection: clients.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    create(emulator, pod("p"), plural="pods")
    clock = [0.0]
    log = writes.ThrottledLog(window=60.0, now=lambda: clock[0])
    writer = writes.Writer(connection.api, log=log)
    written = await writer.patch(PATH, {"metadata": {"annotations": {"berth": "yes"}}})
    assert written.ok
    assert typing.cast(rest.Body, written.object)["metadata"]["annotations"] == {"berth": "yes"}
    bad: rest.Body = {"spec": {"containers": "not a list"}}  # refused (422)
    with caplog.at_level(logging.DEBUG, logger="berth.kube.transport.writes"):
        for at in (0.0, 30.0, 61.0):
            clock[0] = at
            failed = await writer.patch(PATH, bad, what="pod default/p")
            assert failed.outcome is writes.Outcome.FAILED
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.WARNING, logging.DEBUG, logging.WARNING]


def stored_uid(emulator: testing.RunningEmulator) -> str | None:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")
    found = emulator.call(api.storage.get, resource.key, "default", "p")
    return None if found is None else str(found["metadata"]["uid"])


async def test_delete_takes_only_the_object_it_was_decided_on(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    old = str(create(emulator, pod("p"), plural="pods")["metadata"]["uid"])
    now = 100.0
    fence = fencing.Fence(renew_deadline=3.0, now=lambda: now)
    fence.renewed(99.0)
    writer = writes.Writer(connection.api, fence=fence)
    assert (await writer.delete(PATH, uid=old)).outcome is writes.Outcome.WRITTEN
    assert stored_uid(emulator) is None
    assert (await writer.delete(PATH, uid=old)).outcome is writes.Outcome.GONE
    namesake = str(create(emulator, pod("p"), plural="pods")["metadata"]["uid"])
    assert namesake != old
    assert (await writer.delete(PATH, uid=old)).outcome is writes.Outcome.GONE
    now = 103.0  # past the renew deadline
    assert (await writer.delete(PATH, uid=namesake)).outcome is writes.Outcome.FENCED
    assert stored_uid(emulator) == namesake
    assert writer.sent == 1
