"""The three-node cluster the allocation score tables share, with the arithmetic written out.

Node ``a``: cpu 4, memory 32Gi, 1 cpu and 4Gi used. Node ``b``: cpu 8, memory 16Gi, empty.
Node ``c``: cpu 2, memory 8Gi, 1500m used. The pod asks for 1 cpu and 4Gi.
"""

from __future__ import annotations

from tests.scheduler import builders as b

NODES = [
    b.node("a", cpu="4", memory="32Gi"),
    b.node("b", cpu="8", memory="16Gi"),
    b.node("c", cpu="2", memory="8Gi"),
    b.pod("on-a", node="a", cpu="1", memory="4Gi"),
    b.pod("on-c", node="c", cpu="1500m", memory=None),
]
POD = {"cpu": "1", "memory": "4Gi"}
