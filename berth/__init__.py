"""Berth: a batch scheduler for Kubernetes.

The package is layered (docs/architecture.md, "Layers"): :mod:`berth.util` and
:mod:`berth.api` at the bottom, the pure scheduling core in :mod:`berth.scheduler`, the only
API client code in :mod:`berth.kube`, and the processes (operator, simulator, emulator, CLI)
on top.
"""

__version__ = "0.1.0"
