"""Fixtures of the workload tests: the admission tests' throw-away webhook certificates."""

from __future__ import annotations

from tests.admission.conftest import certs

__all__ = ["certs"]
