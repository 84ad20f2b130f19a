"""What Berth writes of devices: ResourceClaims' allocations, shared GPUs' reservation pods.

:mod:`~berth.kube.devices.claim_reservations` is kube-scheduler's DynamicResources PreBind and
Unreserve for the binder; :mod:`~berth.kube.devices.gpu_reservations` keeps KAI-Scheduler's
reservation pods of shared GPUs after every cycle.
"""
