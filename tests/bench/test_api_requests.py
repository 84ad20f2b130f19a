"""The API server's requests, as a race reads them from its ``/metrics``.

We test these aspects:
- requests are counted by verb and resource (with its subresource), every response code,
  group and version together;
- requests to no resource (``/metrics`` itself) and every other metric are left out;
- a server without the counter (the emulator) reads as None, so a race reports no counts
  rather than zeros.
"""

from __future__ import annotations

import aiohttp

from berth.cli import api_requests
from berth.emulator import testing

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 42
apiserver_request_total{code="200",component="apiserver",dry_run="",group="scheduling.berth.io",resource="podgroups",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 5
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 3
# HELP apiserver_request_duration_seconds Response latency distribution.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1",le="0.005"} 40
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 42
"""  # noqa: E501 (the API server's own lines)


def test_requests_are_counted_by_verb_and_resource() -> None:
    assert api_requests.count(METRICS) == {
        "POST pods/binding": 42,
        "POST pods": 42,
        "PATCH podgroups/status": 5,
    }


async def test_a_server_without_the_counter_reads_as_none(
    emulator: testing.RunningEmulator,
) -> None:
    async with aiohttp.ClientSession(base_url=emulator.url) as session:
        assert await api_requests.read(session) is None
