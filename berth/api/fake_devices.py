"""What a fake DRA driver publishes for simulated nodes: a DeviceClass and ResourceSlices.

``berth up`` (the emulator's kubelets) and the real control plane's KWOK nodes give nodes
devices from a node pool's ``devices=DRIVER:COUNT`` (:func:`berth.emulator.kubelets.parse_pool`):
no kubelet plugin runs, so this stands in for the driver's ResourceSlice publishing —

- :func:`node_slice`: one slice per node and driver, its pool named after the node
  (generation 1, one slice), with ``COUNT`` devices ``<kind>-<i>`` (``gpu-0``... for
  ``gpu.example.com``), each with the attribute ``index``;
- :func:`device_class`: a DeviceClass named after the driver, selecting its devices
  (``device.driver == "<driver>"``), as real drivers ship one (NVIDIA's ``gpu.nvidia.com``).
"""

from __future__ import annotations

import re

from berth.api import dra

__all__ = ["DRIVER_PATTERN", "device_class", "device_prefix", "node_slice"]

DRIVER_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
"""A driver name: a DNS subdomain with at least one dot, as the API server requires."""


def device_prefix(driver: str) -> str:
    """Devices of ``driver`` are named ``<its first label>-<i>`` (``gpu-0``)."""
    return driver.partition(".")[0]


def node_slice(*, driver: str, node: str, count: int) -> dra.ResourceSlice:
    """The ResourceSlice of ``node``'s ``count`` devices of ``driver``."""
    prefix = device_prefix(driver)
    devices = [
        dra.Device(name=f"{prefix}-{i}", attributes={"index": dra.DeviceAttribute(int=i)})
        for i in range(count)
    ]
    return dra.ResourceSlice(
        apiVersion=dra.API_VERSION,
        kind="ResourceSlice",
        metadata=dra.ObjectMeta(name=f"{node}-{driver}"),
        spec=dra.ResourceSliceSpec(
            driver=driver,
            nodeName=node,
            pool=dra.ResourcePool(name=node, generation=1, resourceSliceCount=1),
            devices=devices,
        ),
    )


def device_class(driver: str) -> dra.DeviceClass:
    """The DeviceClass named ``driver`` selecting every device of that driver."""
    return dra.DeviceClass(
        apiVersion=dra.API_VERSION,
        kind="DeviceClass",
        metadata=dra.ObjectMeta(name=driver),
        spec=dra.DeviceClassSpec(
            selectors=[
                dra.DeviceSelector(cel=dra.CelSelector(expression=f'device.driver == "{driver}"'))
            ]
        ),
    )
