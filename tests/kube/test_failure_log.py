"""The binder's failure log: a flapping API server warns once per kind, not once per pod."""

from __future__ import annotations

import logging

import pytest

from berth.kube.binder import failure_log


def test_the_first_failure_of_a_kind_warns_and_repeats_are_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = failure_log.FailureLog(logging.getLogger("berth.test.failures"))
    with caplog.at_level(logging.DEBUG, logger="berth.test.failures"):
        for pod in ("a", "b", "c"):
            log.failed("bind", f"binding pod {pod} failed")
        log.failed("evict", "evicting pod d failed")
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert levels == [
        (logging.WARNING, "binding pod a failed"),
        (logging.DEBUG, "binding pod b failed"),
        (logging.DEBUG, "binding pod c failed"),
        (logging.WARNING, "evicting pod d failed"),
    ]
