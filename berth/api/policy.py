"""Cluster-wide scheduling policy kinds as they cross the wire: typed records.

``scheduling.k8s.io/v1`` PriorityClass (what a pod's ``priorityClassName`` resolves to) and
``policy/v1`` PodDisruptionBudget (what an eviction must respect), spelt as the API server
serves them. The emulator's priority admission and eviction subresource
(:mod:`berth.emulator.pods`) read them. See :mod:`berth.api.objects` for what ``total=False``
promises.
"""

from __future__ import annotations

import typing_extensions

from berth.api import objects

__all__ = ["PodDisruptionBudget", "PodDisruptionBudgetSpec", "PriorityClass"]


class PriorityClass(objects.KubeObject, total=False):
    value: int
    globalDefault: bool
    preemptionPolicy: str  # PreemptLowerPriority (default), Never
    description: str


class PodDisruptionBudgetSpec(typing_extensions.TypedDict, total=False):
    selector: objects.LabelSelector
    minAvailable: int | str  # a count or a percentage ("50%")
    maxUnavailable: int | str


class PodDisruptionBudget(objects.KubeObject, total=False):
    spec: PodDisruptionBudgetSpec
