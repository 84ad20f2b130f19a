"""The chaos harnesses on the real control plane, counted by kube-apiserver's own audit log.

We test these aspects:

- SIGSTOP of the leader past its Lease at short timings (4 s / 3 s / 0.5 s), a few runs: two
  ``berth run`` replicas as the chart's ServiceAccount, each from its own stand-in pod (whose
  every request the audit policy records, told apart by user agent; the chart's leader
  fence refuses the old leader's writes at the server); 0 successful writes from the old
  leader after the new one's first, 0 pods failed, none bound twice, the other tenant's
  canary untouched and its limited queue not over its limit, the survivor still scheduling,
  and the old leader exits non-zero (it lost the Lease);
- the hostile-tenant fuzzer for a bounded number of objects (well under 2 minutes) through the
  Python client and the real kubectl, with Berth running behind the fault proxy, which resets
  its connections for a moment every 2 s and adds latency in between (faults after the server
  acted: a binding sent may land with its answer lost): no 5xx from the real API server, every
  pod bound at most once (audit log), the well-behaved queue at its limit, the canary bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time

import pytest

from berth.chaos import fuzz, partition, proxy, sigstop
from berth.realcluster import controlplane, install
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

RUNS = 3
FUZZ_EXAMPLES = 90


@pytest.mark.timeout(900)
def test_a_resumed_leader_writes_nothing_after_its_successor(
    real: cluster.RealCluster, tmp_path: pathlib.Path
) -> None:
    real.use_webhooks(False)  # scheduler mode: nobody answers the admission webhook
    experiment = sigstop.Experiment(
        kubeconfig=real.plane.admin_kubeconfig,
        replica_service_account=f"{install.NAMESPACE}/{install.SERVICE_ACCOUNT}",
        audit_log=real.plane.audit_log,
        workdir=tmp_path / "replicas",
        namespace=real.namespace(),
        tenant_namespace=real.namespace(),
        lease_namespace=install.NAMESPACE,
        pods=40,
        cpu="100m",
        hold=1.0,
        timeout=90.0,
    )
    summary = asyncio.run(sigstop.run_many(experiment, runs=RUNS))
    assert summary.incomplete == [] and len(summary.runs) == RUNS
    assert summary.as_dict()["violations"] == []
    for result in summary.runs:
        assert result.new_leader_writes > 0, result
        assert result.late_writes == 0, result
        assert result.failed_pods == 0, result
        assert result.bound == experiment.pods, result
        assert result.old_leader_exit == 1, result


async def _blips(through: proxy.ThreadedProxy, stop: asyncio.Event) -> None:
    """Reset every connection for 0.2 s every 2 s, with 50 ms of latency every other time:
    short of the renew deadline, so the leader stays and its requests are cut mid-way."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2.0)
        through.set_fault(proxy.Fault.RESET)
        await asyncio.sleep(0.2)
        through.set_fault(proxy.Fault.NONE)
        through.set_latency(0.05 if through.proxy.latency == 0 else 0.0)


async def _fuzz_with_faults(real: cluster.RealCluster, through: proxy.ThreadedProxy) -> fuzz.Report:
    stop = asyncio.Event()
    blips = asyncio.create_task(_blips(through, stop))
    try:
        return await fuzz.run(
            kubeconfig=real.plane.admin_kubeconfig,
            examples=FUZZ_EXAMPLES,
            seed=20,
            kubectl=controlplane.find_kubectl(),
            audit_log=real.plane.audit_log,
            namespace=real.namespace(),
            tenant_namespace=real.namespace(),
        )
    finally:
        stop.set()
        await blips


@pytest.mark.timeout(300)
def test_the_fuzzer_finds_nothing_on_the_real_api_server(
    real: cluster.RealCluster, tmp_path: pathlib.Path
) -> None:
    real.use_webhooks(False)
    theirs = real.installation.replica("fuzzed")
    with proxy.ThreadedProxy(partition.upstream(theirs)) as through:
        proxied = partition.proxied_kubeconfig(theirs, port=through.port, to=tmp_path / "kc")
        real.berth(identity="fuzzed", settings={"BERTH_KUBECONFIG": str(proxied)})
        started = time.monotonic()
        report = asyncio.run(_fuzz_with_faults(real, through))
        elapsed = time.monotonic() - started
        counters = through.counters
        real.stop_berth()
    print(f"fuzz: {report.as_dict()} faults injected: {counters.faults} in {elapsed:.0f}s")
    assert report.violations == [], report.as_dict()
    assert report.tried == FUZZ_EXAMPLES
    assert report.through_kubectl == FUZZ_EXAMPLES // 3
    assert counters.faults > 0 and counters.resets > 0
