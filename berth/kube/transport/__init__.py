"""Talking to the API server: clients, raw REST, list and watch, the fenced writes, Events.

The bottom of :mod:`berth.kube`: every other package of it reaches the API server through these
modules, and none of these imports another package of :mod:`berth.kube` (import-linter checks).
"""
