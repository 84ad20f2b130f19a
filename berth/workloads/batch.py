"""Gangs of ``batch/v1`` Jobs and ``jobset.x-k8s.io`` JobSets.

A Job's gang is the pods it runs at once: ``parallelism`` (default 1), capped by the
completions still to go (``completions`` minus ``status.succeeded``), so the tail of a Job whose
completions are not a multiple of its parallelism does not wait for pods that will never come.
Indexed Jobs size the same way. A JobSet's gang is the sum over its replicated Jobs of
``replicas`` x that Job's size — per **stage**: replicated Jobs with ``dependsOn`` wait for
others to be ready or complete, and under ``startupPolicy.startupPolicyOrder: InOrder`` each waits
for the one before it, so one gang counting them all would wait for ever. Replicated Jobs that
start together (none of them waits, or they wait for the same replicated Jobs and statuses; under
``InOrder``, each alone) form one stage and one gang; a pod's stage is its replicated Job (the
JobSet's pod label ``jobset.sigs.k8s.io/replicatedjob-name``). The first stage's gang is the
JobSet's; each later stage's is a gang of its own (:attr:`~.gangs.Gang.replica`: the name of
its first replicated Job).
"""

from __future__ import annotations

from berth.api import core, objects
from berth.workloads import fields, gangs

__all__ = ["REPLICATED_JOB_LABEL", "job", "job_size", "jobset"]

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
"""The label JobSet puts on its Jobs and pods naming their replicated Job."""

_Stage = tuple[int, tuple[tuple[str, str], ...]]
"""When a replicated Job starts: (its place under ``InOrder``, else 0; what it waits for)."""


def job_size(spec: fields.Fields, /, *, path: str, succeeded: int = 0) -> tuple[int, str]:
    """The pods a Job's ``spec`` runs at once (at least 1), and how that was computed."""
    parallelism = fields.integer(spec, "parallelism", path=path, default=1)
    completions = fields.integer(spec, "completions", path=path)
    if completions is None:
        return max(parallelism, 1), f"parallelism {parallelism}"
    remaining = max(completions - succeeded, 0)
    size = max(min(parallelism, remaining), 1)
    done = f", {succeeded} succeeded" if succeeded else ""
    return size, f"parallelism {parallelism}, completions {completions}{done}"


def job(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of a ``batch/v1`` Job."""
    spec = fields.mapping(owner, "spec", path="Job", required=True)
    status = fields.mapping(owner, "status", path="Job")
    succeeded = fields.integer(status, "succeeded", path="status", default=0)
    size, why = job_size(spec, path="spec", succeeded=succeeded)
    mode = fields.text(spec, "completionMode", path="spec")
    indexed = ", Indexed" if mode == "Indexed" else ""
    return gangs.Gang(min_member=size, why=f"{why}{indexed}")


def _stage_key(rjob: fields.Fields, *, index: int, in_order: bool, path: str) -> _Stage:
    """What decides when a replicated Job starts: replicated Jobs with the same key start
    together (under ``InOrder``, its place; else the replicated Jobs and statuses it waits for)."""
    deps: list[tuple[str, str]] = []
    for j, dep in enumerate(fields.sequence(rjob, "dependsOn", path=path)):
        where = f"{path}.dependsOn[{j}]"
        name = fields.text(dep, "name", path=where)
        if name is None:
            raise gangs.OwnerSpecError(f"{where}.name is missing")
        deps.append((name, fields.text(dep, "status", path=where) or "Complete"))
    return (index if in_order else 0, tuple(sorted(deps)))


def _pod_replicated_job(pod: core.Pod) -> str | None:
    return pod.get("metadata", {}).get("labels", {}).get(REPLICATED_JOB_LABEL) or None


def jobset(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of the stage of a JobSet (``jobset.x-k8s.io/v1alpha2``) ``pod`` belongs to."""
    spec = fields.mapping(owner, "spec", path="JobSet", required=True)
    rjobs = fields.sequence(spec, "replicatedJobs", path="spec", required=True)
    if not rjobs:
        raise gangs.OwnerSpecError("spec.replicatedJobs is empty")
    startup = fields.mapping(spec, "startupPolicy", path="spec")
    in_order = fields.text(startup, "startupPolicyOrder", path="spec.startupPolicy") == "InOrder"
    # Stage key -> [(replicated Job name, replicas, Job size)], in the spec's order.
    stages: dict[_Stage, list[tuple[str, int, int]]] = {}
    stage_of: dict[str, _Stage] = {}
    for i, rjob in enumerate(rjobs):
        path = f"spec.replicatedJobs[{i}]"
        name = fields.text(rjob, "name", path=path) or str(i)
        replicas = fields.integer(rjob, "replicas", path=path, default=1)
        template = fields.mapping(rjob, "template", path=path, required=True)
        job_spec = fields.mapping(template, "spec", path=f"{path}.template", required=True)
        size, _ = job_size(job_spec, path=f"{path}.template.spec")
        key = _stage_key(rjob, index=i, in_order=in_order, path=path)
        for dep, _status in key[1]:
            if dep not in stage_of:
                raise gangs.OwnerSpecError(
                    f"{path}.dependsOn names {dep!r}, not a replicated Job before it"
                )
        stages.setdefault(key, []).append((name, replicas, size))
        stage_of[name] = key
    first = next(iter(stages))
    if len(stages) == 1:
        key = first
    else:
        mine = _pod_replicated_job(pod)
        if mine is None:
            raise gangs.OwnerSpecError(
                f"the pod has no {REPLICATED_JOB_LABEL} label saying which replicated Job it "
                "belongs to (the JobSet starts its replicated Jobs in stages)"
            )
        if mine not in stage_of:
            raise gangs.OwnerSpecError(
                f"the pod's {REPLICATED_JOB_LABEL} label names {mine!r}, "
                "not a replicated Job of spec.replicatedJobs"
            )
        key = stage_of[mine]
    members = stages[key]
    total = sum(replicas * size for _, replicas, size in members)
    why = " + ".join(f"{name} {replicas}x{size}" for name, replicas, size in members)
    if key != first:
        after = ", ".join(f"{dep} {status}" for dep, status in key[1]) or "the one before Ready"
        why = f"stage {members[0][0]} (starts after {after}): {why}"
        return gangs.Gang(min_member=max(total, 1), why=why, replica=members[0][0])
    later = [name for k, part in stages.items() if k != first for name, _, _ in part]
    if later:
        why += f" (starting later, each stage its own gang: {', '.join(later)})"
    return gangs.Gang(min_member=max(total, 1), why=why)
