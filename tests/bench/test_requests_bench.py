"""``berth bench requests``: the client CPU of one API request, sent as Berth sends it.

We test these aspects:
- every binding is sent and answered (a failed one fails the bench), and the report gives the
  client's CPU per request and the rate;
- the command prints one JSON object with the options it was given.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from berth.cli import bench, bench_requests


def test_the_bench_sends_every_binding_and_reports_the_clients_cpu() -> None:
    report = bench_requests.run(requests=300, in_flight=8)
    assert (report["bench"], report["requests"], report["in_flight"]) == ("requests", 300, 8)
    # A request costs the client tens to hundreds of microseconds; zero means nothing was timed.
    assert 1.0 < report["client_cpu_us_per_request"] < 100_000
    assert report["requests_per_second"] > 0
    assert set(report["machine"]) == {"load_before", "load_after"}


def test_the_command_prints_one_json_object() -> None:
    result = CliRunner().invoke(bench.command, ["requests", "--requests", "50", "--in-flight", "4"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["requests"], report["in_flight"]) == (50, 4)
