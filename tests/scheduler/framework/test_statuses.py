"""Statuses: codes, the helpers, attribution and exceptions as statuses.

We test these aspects:
- which codes count as success, rejection, error, skip and wait;
- ``with_plugin`` attributes once and keeps the first attribution;
- ``from_exception`` makes an ERROR naming the exception and the plugin;
- ``message`` joins reasons, or names the code when there are none.
"""

from __future__ import annotations

import pytest

from berth.scheduler.framework import statuses

Code = statuses.Code


@pytest.mark.parametrize(
    ("code", "success", "rejected", "error", "skip", "wait"),
    [
        (Code.SUCCESS, True, False, False, False, False),
        (Code.ERROR, False, False, True, False, False),
        (Code.UNSCHEDULABLE, False, True, False, False, False),
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, False, True, False, False, False),
        (Code.PENDING, False, True, False, False, False),
        (Code.SKIP, False, False, False, True, False),
        (Code.WAIT, False, False, False, False, True),
    ],
    ids=["success", "error", "unschedulable", "unresolvable", "pending", "skip", "wait"],
)
def test_code_predicates(
    code: statuses.Code, success: bool, rejected: bool, error: bool, skip: bool, wait: bool
) -> None:
    status = statuses.new(code, "why")
    assert (status.is_success(), status.is_rejected(), status.is_error()) == (
        success,
        rejected,
        error,
    )
    assert (status.is_skip(), status.is_wait()) == (skip, wait)


def test_success_constant_is_the_default_status() -> None:
    assert statuses.Status() == statuses.SUCCESS
    assert statuses.SUCCESS.is_success()
    assert statuses.SKIP.code is Code.SKIP


def test_with_plugin_attributes_a_status_once() -> None:
    status = statuses.new(Code.UNSCHEDULABLE, "no room")
    first = status.with_plugin("Fit")
    assert first.plugin == "Fit"
    assert first.with_plugin("Other").plugin == "Fit"
    assert status.plugin == ""  # frozen: the original is untouched


def test_from_exception_is_an_error_naming_exception_and_plugin() -> None:
    status = statuses.Status.from_exception(KeyError("cpu"), plugin="Fit")
    assert status == statuses.Status(
        code=Code.ERROR, reasons=("plugin Fit raised KeyError: 'cpu'",), plugin="Fit"
    )
    assert statuses.Status.from_exception(RuntimeError()).reasons == ("RuntimeError",)


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [((), "Unschedulable"), (("a",), "a"), (("a", "b"), "a; b")],
    ids=["none-names-the-code", "one", "two-joined"],
)
def test_message_joins_reasons(reasons: tuple[str, ...], expected: str) -> None:
    assert statuses.new(Code.UNSCHEDULABLE, *reasons).message() == expected
