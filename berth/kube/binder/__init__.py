"""The binder: a cycle's decisions sent to the API server, as kube-scheduler's binding cycle.

:class:`~berth.kube.binder.decisions.ApiSink` binds, evicts, annotates and explains; before a
binding it waits, as kube-scheduler's PreBind plugins do, for the preemption victims to be gone
and the pod's PersistentVolumeClaims to be bound; and it writes the waiting pods' ``PodScheduled``
conditions a gang at a time.
"""
