"""Gangs derived from the workloads people submit: owner object -> gang spec, pure.

A pod of a ``batch/v1`` Job, a JobSet, a Kubeflow training job, a Ray cluster, a Spark
application or a LeaderWorkerSet carries no Berth group; its owners say how many pods must start
together. This package reads those owners (as the API returns them,
:class:`~berth.api.objects.ForeignObject`s whose specs :mod:`.fields` checks field by field)
and says what group the pod belongs to (:mod:`.plans`), with one module per family of kinds
(:mod:`.batch`, :mod:`.kubeflow`, :mod:`.ray`, :mod:`.spark`, :mod:`.lws`) and the table of the
kinds it knows (:mod:`.kinds`). No I/O: :mod:`berth.kube.grouping.owner_groups` walks the owners and
writes the PodGroups; the tests feed owner objects straight in.
"""
