"""Gangs of ``batch/v1`` Jobs and ``jobset.x-k8s.io`` JobSets.

A Job's gang is the pods it runs at once: ``parallelism`` (default 1), capped by the
completions still to go (``completions`` minus ``status.succeeded``), so the tail of a Job whose
completions are not a multiple of its parallelism does not wait for pods that will never come.
Indexed Jobs size the same way. A JobSet's gang is the sum over its replicated Jobs of
``replicas`` x that Job's size, leaving out the replicated Jobs that start later: those with
``dependsOn`` (they wait for another to finish or be ready) and, under
``startupPolicy.startupPolicyOrder: InOrder``, every one after the first (each waits for the one
before it to be ready); a gang counting them would wait for ever.
"""

from __future__ import annotations

from berth.workloads import fields, gangs

__all__ = ["job", "job_size", "jobset"]


def job_size(spec: fields.Raw, /, *, path: str, succeeded: int = 0) -> tuple[int, str]:
    """The pods a Job's ``spec`` runs at once (at least 1), and how that was computed."""
    parallelism = fields.integer(spec, "parallelism", path=path, default=1)
    completions = fields.integer(spec, "completions", path=path)
    if completions is None:
        return max(parallelism, 1), f"parallelism {parallelism}"
    remaining = max(completions - succeeded, 0)
    size = max(min(parallelism, remaining), 1)
    done = f", {succeeded} succeeded" if succeeded else ""
    return size, f"parallelism {parallelism}, completions {completions}{done}"


def job(owner: fields.Raw, /, *, pod: fields.Raw) -> gangs.Gang:
    """The gang of a ``batch/v1`` Job."""
    spec = fields.mapping(owner, "spec", path="Job", required=True)
    status = fields.mapping(owner, "status", path="Job")
    succeeded = fields.integer(status, "succeeded", path="status", default=0)
    size, why = job_size(spec, path="spec", succeeded=succeeded)
    mode = fields.text(spec, "completionMode", path="spec")
    indexed = ", Indexed" if mode == "Indexed" else ""
    return gangs.Gang(min_member=size, why=f"{why}{indexed}")


def jobset(owner: fields.Raw, /, *, pod: fields.Raw) -> gangs.Gang:
    """The gang of a JobSet (``jobset.x-k8s.io/v1alpha2``)."""
    spec = fields.mapping(owner, "spec", path="JobSet", required=True)
    rjobs = fields.sequence(spec, "replicatedJobs", path="spec", required=True)
    if not rjobs:
        raise gangs.OwnerSpecError("spec.replicatedJobs is empty")
    startup = fields.mapping(spec, "startupPolicy", path="spec")
    in_order = fields.text(startup, "startupPolicyOrder", path="spec.startupPolicy") == "InOrder"
    total, parts, later = 0, [], []
    for i, rjob in enumerate(rjobs):
        path = f"spec.replicatedJobs[{i}]"
        name = fields.text(rjob, "name", path=path) or str(i)
        replicas = fields.integer(rjob, "replicas", path=path, default=1)
        template = fields.mapping(rjob, "template", path=path, required=True)
        job_spec = fields.mapping(template, "spec", path=f"{path}.template", required=True)
        size, _ = job_size(job_spec, path=f"{path}.template.spec")
        if fields.sequence(rjob, "dependsOn", path=path) or (in_order and i > 0):
            later.append(name)
            continue
        total += replicas * size
        parts.append(f"{name} {replicas}x{size}")
    why = " + ".join(parts)
    if later:
        why += f" (starting later, not in the gang: {', '.join(later)})"
    return gangs.Gang(min_member=max(total, 1), why=why)
