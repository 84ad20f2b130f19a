"""Fixtures for the status owners' tests: the ``berth.kube`` tests' emulator connection and CRDs.

- ``connection``: an async connection to the threaded ``emulator`` fixture;
- ``berth_crds``: that emulator with Berth's CRDs installed.
"""

from __future__ import annotations

from tests.kube.conftest import berth_crds, connection

__all__ = ["berth_crds", "connection"]
