"""Which autoscaler APIs the cluster serves, asked of the API server's discovery.

:func:`discover` asks for ``autoscaling.x-k8s.io/v1`` (ProvisioningRequests: Cluster
Autoscaler), ``autoscaling.x-k8s.io/v1beta1`` (CapacityBuffers: Karpenter ≥ 1.15 with its
gate, Cluster Autoscaler's buffer controller) and ``karpenter.sh/v1`` (NodePools: Karpenter is
installed, so an autoscaler is expected to act on ``Unschedulable`` pods).
:class:`~berth.kube.autoscaling.capacity_requests.CapacityRequests` asks at start and every
:data:`INTERVAL` seconds, so that an autoscaler installed later is found. A group version
that is not there is not served; one that cannot be read keeps what was known of it (a
verdict must not flap with the network).
"""

from __future__ import annotations

import dataclasses
import logging

import kubernetes_asyncio.client

from berth.kube.autoscaling import request_objects
from berth.kube.transport import errors, rest
from berth.status import capacity_requests as plans

__all__ = ["INTERVAL", "Served", "discover"]

logger = logging.getLogger(__name__)

INTERVAL = 300.0
"""Seconds between two discoveries."""
_KARPENTER_PATH = "/apis/karpenter.sh/v1"  # NodePools served: Karpenter is installed


@dataclasses.dataclass(frozen=True)
class Served:
    """What the cluster serves."""

    kinds: frozenset[plans.Kind]
    """The request kinds Berth can make."""
    karpenter: bool
    """Karpenter's NodePools are served (an autoscaler is expected to act)."""


async def discover(api: kubernetes_asyncio.client.ApiClient, *, known: Served | None) -> Served:
    """What the cluster serves now (``known``: what it served when last asked)."""
    served: set[plans.Kind] = set()
    for kind, (version, plural) in request_objects.PATHS.items():
        try:
            listing = await rest.request(api, method="GET", path=version, timeout=10.0)
        except errors.NotFound:
            continue
        except errors.KubeError as exc:
            logger.warning("capacity requests: discovery of %s failed: %s", version, exc)
            if known is not None and kind in known.kinds:
                served.add(kind)  # keep what was known
            continue
        names = {r.get("name") for r in listing.get("resources") or [] if isinstance(r, dict)}
        if plural in names:
            served.add(kind)
    karpenter = known.karpenter if known is not None else False
    try:
        listing = await rest.request(api, method="GET", path=_KARPENTER_PATH, timeout=10.0)
        karpenter = any(
            isinstance(r, dict) and r.get("name") == "nodepools"
            for r in listing.get("resources") or []
        )
    except errors.NotFound:
        karpenter = False
    except errors.KubeError as exc:
        logger.warning("capacity requests: discovery of %s failed: %s", _KARPENTER_PATH, exc)
    if known is None or frozenset(served) != known.kinds:
        logger.info(
            "capacity requests: the cluster serves %s",
            ", ".join(sorted(k.value for k in served))
            or "neither ProvisioningRequest nor CapacityBuffer",
        )
    return Served(frozenset(served), karpenter)
