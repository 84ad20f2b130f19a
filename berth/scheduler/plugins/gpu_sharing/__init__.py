"""The GpuSharing plugin package: shares of a GPU, and GPU placement that strands the fewest.

:mod:`.plugin` implements the extension points (KAI-Scheduler's ``gpu-fraction`` /
``gpu-memory`` annotations on the device plugin: which devices, never more than one device's
worth on one, recorded on the pod); :mod:`.policies` scores GPU placements (fragmentation
gradient descent by default, and the baselines it is measured against); :mod:`.fragmentation`
is FGD's measure. The devices themselves are the snapshot's (:mod:`berth.scheduler.snapshot.
gpudevices`); docs/gpu.md tells users what it does.
"""

from berth.scheduler.plugins.gpu_sharing.plugin import NAME, GpuSharing, GpuSharingArgs, new
from berth.scheduler.plugins.gpu_sharing.policies import Policy

__all__ = ["NAME", "GpuSharing", "GpuSharingArgs", "Policy", "new"]
