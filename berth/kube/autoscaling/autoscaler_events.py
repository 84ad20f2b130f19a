"""Reading what the cluster's autoscaler said about pods: its Events.

Karpenter and Cluster Autoscaler say what they did for an ``Unschedulable`` pod only in Events
on the pod (:mod:`berth.status.scale_up` says which, and what each means). :func:`sightings`
lists them in the namespaces of the gangs Berth waits on: one list per namespace and source,
filtered by the API server (``involvedObject.kind=Pod,source=<karpenter|cluster-autoscaler>``),
made only while some gang waits for an autoscaler
(:class:`berth.kube.autoscaling.capacity_requests.CapacityRequests` calls it on its pass, every
few seconds). A list that fails is logged, and the pass keeps the sightings it read before.
"""

from __future__ import annotations

import collections.abc
import logging
import typing

import kubernetes_asyncio.client

from berth.api import core
from berth.kube.transport import errors, rest
from berth.status import scale_up

__all__ = ["sightings"]

logger = logging.getLogger(__name__)


async def sightings(
    api: kubernetes_asyncio.client.ApiClient, namespaces: collections.abc.Iterable[str]
) -> list[scale_up.Sighting] | None:
    """The autoscalers' Events on pods in ``namespaces``, read as sightings; None when a list
    failed (the caller keeps what it read before: a verdict must not flap with the network)."""
    found: list[scale_up.Sighting] = []
    for namespace in sorted(set(namespaces)):
        for source in scale_up.SOURCES:
            try:
                listing = await rest.request(
                    api,
                    method="GET",
                    path=f"/api/v1/namespaces/{namespace}/events",
                    query={"fieldSelector": f"involvedObject.kind=Pod,source={source}"},
                    timeout=10.0,
                )
            except errors.KubeError as exc:
                logger.info("autoscaler events: %s's in %s: %s", source, namespace, exc)
                return None
            for event in listing.get("items") or ():
                if isinstance(event, dict):
                    seen = scale_up.sighting_of(typing.cast(core.Event, event))  # Events listed
                    if seen is not None:
                        found.append(seen)
    return found
