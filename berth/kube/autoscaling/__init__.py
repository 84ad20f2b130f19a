"""Asking the cluster's autoscalers for capacity, and keeping them off the nodes Berth holds.

:mod:`~berth.kube.autoscaling.capacity_requests` makes ProvisioningRequests and CapacityBuffers
and reads back their answers, and what the autoscalers said in their Events
(:mod:`~berth.kube.autoscaling.autoscaler_events`); :mod:`~berth.kube.autoscaling.node_protection`
keeps the autoscalers' scale-down opt-outs on the nodes Berth holds. What to ask and what to write
is decided purely in :mod:`berth.status`.
"""
