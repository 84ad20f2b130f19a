"""The ``coordination.k8s.io/v1`` Lease as it crosses the wire: a typed record.

Leader election (:mod:`berth.kube.transport.leases`) reads and replaces one Lease; its times
are RFC 3339 with microseconds (``MicroTime``), as the API server serves them.
"""

from __future__ import annotations

import typing_extensions

from berth.api import objects

__all__ = ["Lease", "LeaseSpec"]


class LeaseSpec(typing_extensions.TypedDict, total=False):
    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class Lease(objects.KubeObject, total=False):
    spec: LeaseSpec
