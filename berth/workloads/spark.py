"""Gangs of Spark applications (``sparkoperator.k8s.io/v1beta2`` SparkApplication).

The executors are created by the driver once it runs, so a gang counting them would never
start: the group is the driver alone (``minMember`` 1) with ``minResources`` covering the
driver and every executor it starts with (``executor.instances``, or under dynamic allocation
``initialExecutors``, else ``minExecutors``), as the Spark operator's own PodGroups do. Memory
is Spark's notation (``512m`` is 512 MiB) plus Spark's overhead: ``memoryOverhead`` when given,
else 10% with a floor of 384 MiB.
"""

from __future__ import annotations

import re

from berth.api import core, objects
from berth.workloads import fields, gangs

__all__ = ["spark_application", "spark_memory"]

_MIB = 1024 * 1024
_SPARK_MEMORY = re.compile(r"^(\d+)([kmgt]?)b?$", re.IGNORECASE)
_FACTOR = {"": 1 / _MIB, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def spark_memory(value: object, /, *, path: str) -> int:
    """Spark's memory notation (``512m``, ``2g``; a bare number is bytes) in MiB."""
    match = _SPARK_MEMORY.match(str(value).strip()) if isinstance(value, str | int) else None
    if match is None:
        raise gangs.OwnerSpecError(f"{path} is {value!r}, not a Spark memory size like 512m")
    return max(int(int(match.group(1)) * _FACTOR[match.group(2).lower()]), 1)


def _role(spec: fields.Fields, role: str) -> tuple[int, int]:
    """(millicores, MiB) of one driver or executor pod."""
    part = fields.mapping(spec, role, path="spec")
    cores = fields.integer(part, "cores", path=f"spec.{role}", default=1, minimum=1)
    memory = spark_memory(part.get("memory", "1g"), path=f"spec.{role}.memory")
    overhead_text = part.get("memoryOverhead")
    overhead = (
        spark_memory(overhead_text, path=f"spec.{role}.memoryOverhead")
        if overhead_text is not None
        else max(memory // 10, 384)
    )
    return cores * 1000, memory + overhead


def spark_application(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of a SparkApplication: the driver, with room for its executors."""
    spec = fields.mapping(owner, "spec", path="SparkApplication", required=True)
    executor = fields.mapping(spec, "executor", path="spec")
    dynamic = fields.mapping(spec, "dynamicAllocation", path="spec")
    if dynamic.get("enabled") is True:
        where = "spec.dynamicAllocation"
        executors = fields.integer(dynamic, "initialExecutors", path=where)
        if executors is None:
            executors = fields.integer(dynamic, "minExecutors", path=where, default=0)
    else:
        executors = fields.integer(executor, "instances", path="spec.executor", default=1)
    driver_cpu, driver_mem = _role(spec, "driver")
    exec_cpu, exec_mem = _role(spec, "executor")
    cpu = driver_cpu + executors * exec_cpu
    memory = driver_mem + executors * exec_mem
    return gangs.Gang(
        min_member=1,
        min_resources={"cpu": f"{cpu}m", "memory": f"{memory}Mi"},
        why=f"driver + {executors} executors by resources (minMember 1: "
        "the driver creates the executors)",
    )
