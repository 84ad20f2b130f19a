"""What the API server was asked, read from its ``/metrics``: requests by verb and resource.

A race's rates are bound by the API server on this machine (docs/performance.md), so what a
scheduler asks of it per pod is part of what the scheduler costs: its bindings, and whatever
else it writes (Events, statuses, claim allocations). kube-apiserver counts every request it
served in ``apiserver_request_total`` (labels ``verb``, ``resource``, ``subresource``, ``code``
...), whoever sent it; read before and after a race's window, the difference is the window's
requests, every client's together (the bench's creates, KWOK's pod statuses, the controllers'
writes, the scheduler's). Requests to no resource (``/metrics``, ``/healthz``) are not counted.
"""

from __future__ import annotations

import collections

import aiohttp
import prometheus_client.parser

__all__ = ["METRIC", "Requests", "count", "read"]

METRIC = "apiserver_request_total"

Requests = collections.Counter[str]
"""Requests by ``"<VERB> <resource>[/<subresource>]"``, e.g. ``"POST pods/binding"``."""


def count(text: str) -> Requests:
    """The requests the ``/metrics`` ``text`` counts, by verb and resource, every response
    code, group and version together."""
    # The whole text is megabytes of histograms: parse only the counter's own samples.
    lines = "\n".join(line for line in text.splitlines() if line.startswith(METRIC + "{"))
    counts: Requests = collections.Counter()
    for family in prometheus_client.parser.text_string_to_metric_families(lines):
        for sample in family.samples:
            labels = sample.labels
            resource = labels.get("resource", "")
            if sample.name != METRIC or not resource:
                continue
            if subresource := labels.get("subresource", ""):
                resource = f"{resource}/{subresource}"
            counts[f"{labels.get('verb', '')} {resource}"] += int(sample.value)
    return counts


async def read(session: aiohttp.ClientSession) -> Requests | None:
    """The API server's requests so far, through ``session`` (its base URL the server's);
    None when it serves no such counter (the emulator) or cannot be read."""
    try:
        async with session.get("/metrics") as response:
            if response.status != 200:
                return None
            counts = count(await response.text())
    except aiohttp.ClientError:
        return None
    return counts or None
