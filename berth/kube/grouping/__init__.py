"""Grouping: the PodGroups Berth derives or honours, and the Queue work goes to when it names none.

Pods without a group get one derived from their owners; other schedulers' gangs (scheduler-plugins,
Volcano, Kubernetes' own) are honoured as they are; and the ``default`` Queue exists as an object.
"""
