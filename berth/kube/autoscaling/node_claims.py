"""Whether Karpenter is launching a node: its NodeClaims not yet registered.

A gated gang asking with one CapacityBuffer per pod shape is judged by time
(:func:`berth.status.scale_up.judge_buffers`): a shape still short ``answerTimeout`` after
Berth first read it so, beside one that fits, is one the autoscaler cannot fit. A node the
short shape needs but that the cloud is slow to launch looks the same for as long as the
launch takes. Karpenter says where its launches stand on each NodeClaim (``karpenter.sh/v1``):
``Launched`` once the cloud provider made the instance, ``Registered`` once its Node joined.
:func:`launching` lists them (only while some gang's buffers are being judged so) and says
whether any is still on its way — not ``Registered``, not being deleted — so that the time is
counted from when none is. Karpenter bounds how long that can last: a NodeClaim not registered
within its registration TTL (15 minutes) is deleted.

A list that fails (the API not served, or a chart without the grant) is logged and answers
None: the caller judges as before, by time alone.
"""

from __future__ import annotations

import collections.abc
import logging

import kubernetes_asyncio.client

from berth.kube.transport import errors, rest
from berth.status import capacity_requests as plans
from berth.status import scale_up
from berth.util import clocks

__all__ = ["PATH", "launching", "seen"]

logger = logging.getLogger(__name__)

PATH = "/apis/karpenter.sh/v1/nodeclaims"
REGISTERED = "Registered"


async def launching(api: kubernetes_asyncio.client.ApiClient) -> bool | None:
    """Whether any of Karpenter's NodeClaims is still launching (not ``Registered=True``,
    not being deleted); None when they could not be listed."""
    try:
        listing = await rest.request(api, method="GET", path=PATH, timeout=10.0)
    except errors.KubeError as exc:
        logger.info("node claims: %s", exc)
        return None
    for claim in listing.get("items") or ():
        if not isinstance(claim, dict):
            continue
        metadata = claim.get("metadata")
        if isinstance(metadata, dict) and metadata.get("deletionTimestamp"):
            continue
        status = claim.get("status")
        conditions = status.get("conditions") if isinstance(status, dict) else None
        registered = any(
            isinstance(c, dict) and c.get("type") == REGISTERED and c.get("status") == "True"
            for c in conditions or ()
        )
        if not registered:
            return True
    return False


async def seen(
    api: kubernetes_asyncio.client.ApiClient,
    said: collections.abc.Iterable[collections.abc.Iterable[scale_up.BufferSaid]],
    clock: clocks.Clock,
    last: float | None,
) -> float | None:
    """When a launch was last seen in flight (``last``, or now when one is): looked for only
    while some gang's buffers (``said``, one collection per gang) disagree — one shape fits,
    another is short — the one case judged by time."""
    judged = any({s.fit for s in buffers} >= {plans.Fit.FITS, plans.Fit.SHORT} for buffers in said)
    if judged and await launching(api):
        return clock.now()
    return last
