"""Whether the API server serves Dynamic Resource Allocation (``resource.k8s.io/v1``).

The informers (:class:`~berth.kube.informers.cluster_informers.ClusterInformers`) watch
DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates only where the cluster
serves them: ``resource.k8s.io/v1`` is GA and on by default since Kubernetes 1.34; an older cluster,
or one with the API turned off (``--runtime-config``), answers 404 for the group version, or lists
it without all four kinds. :func:`served` asks discovery once, at start; without DRA the informers
say so in one log line (:data:`NOT_SERVED`) and the scheduler goes on without devices — pods
with ``spec.resourceClaims`` are then refused in scheduler mode (with a reason saying why) and
left to kube-scheduler in admission mode.
"""

from __future__ import annotations

import typing

from berth.api import dra
from berth.kube.transport import errors, rest

if typing.TYPE_CHECKING:
    import kubernetes_asyncio.client

__all__ = ["KINDS", "NOT_SERVED", "PATH", "served"]

PATH = f"/apis/{dra.API_VERSION}"
KINDS = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
"""The plurals the informers watch, in the order they are listed."""
NOT_SERVED = (
    f"the API server does not serve {dra.API_VERSION} (Dynamic Resource Allocation; "
    "Kubernetes 1.34 or newer serves it by default): devices are not scheduled; pods with "
    "spec.resourceClaims are refused in scheduler mode and left to kube-scheduler in "
    "admission mode"
)


async def served(api: kubernetes_asyncio.client.ApiClient, *, timeout: float = 30.0) -> bool:
    """Whether ``resource.k8s.io/v1`` is served with all four kinds. Raises
    :class:`~berth.kube.transport.errors.KubeError` for anything but a clear answer (the caller
    retries: an API server that cannot be reached yet says nothing about DRA)."""
    try:
        listing = await rest.request(api, method="GET", path=PATH, timeout=timeout)
    except errors.NotFound:
        return False
    names = {
        str(item.get("name"))
        for item in listing.get("resources") or ()
        if isinstance(item, dict) and item.get("name")
    }
    return set(KINDS) <= names
