"""Berth's API, group ``scheduling.berth.io/v1alpha1``.

Pydantic models of the CRDs (Queue, PodGroup, Reservation), quantities, resource lists
and CRD rendering.
"""
