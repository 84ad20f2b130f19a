"""Workloads users submit, on the real control plane: a batch/v1 Job.

We test these aspects:
- the real Job controller creates the pods of a Job whose template names Berth's scheduler;
  Berth binds them, KWOK runs them to completion, and the Job completes.
"""

from __future__ import annotations

import pytest

from berth.api import keys
from berth.realcluster import install
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster


def test_a_job_created_by_the_user_is_scheduled_by_berth(real: cluster.RealCluster) -> None:
    real.berth()
    namespace = real.namespace()
    pod = pods.pod("unused", cpu="1", queue="default", duration="2s")
    template = {"metadata": {"labels": pod["metadata"]["labels"],
                             "annotations": pod["metadata"]["annotations"]},
                "spec": pod["spec"]}  # fmt: skip
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "crunch"},
        "spec": {"parallelism": 3, "completions": 3, "backoffLimit": 0, "template": template},
    }
    real.create(job, namespace=namespace)
    real.kubectl(
        "wait",
        "-n",
        namespace,
        "job/crunch",
        "--for=condition=Complete",
        f"--timeout={cluster.WAIT}",
    )
    created = real.pods(namespace)
    assert len(created) == 3
    assert all(p["spec"]["schedulerName"] == keys.DEFAULT_SCHEDULER_NAME for p in created)
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in created)
    binders = {
        r.name: r.user
        for r in real.audited()
        if r.resource == "pods/binding" and r.succeeded and r.namespace == namespace
    }
    assert binders == {p["metadata"]["name"]: install.USER for p in created}
