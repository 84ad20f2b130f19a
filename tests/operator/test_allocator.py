"""The operator process's C heap under asyncio's socket reads (``berth.util.allocator``).

We test these aspects:

- the cause of the soak's RSS creep, as a control: in a process with glibc's adjusting mmap
  threshold, once a 256 KiB block has been freed, socket reads of 256 KiB (asyncio's read
  size) that keep a little data alive grow the heap many times over what it holds;
- with the threshold pinned, the same reads keep the heap at about what is in use;
- ``berth.operator.main.run`` pins it before anything else, even when it then fails.

Each case runs in a fresh interpreter: a threshold raised or pinned is process-wide and for
good, so the test process's own history would decide the outcome.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from berth.util import allocator

pytestmark = pytest.mark.skipif(allocator.heap() is None, reason="needs glibc >= 2.33")

READS = 3000

_SCRIPT = """
import asyncio, collections, json, pathlib, random, socket, sys
from berth.util import allocator

mode, reads = sys.argv[1], int(sys.argv[2])
if mode == "pinned":
    assert allocator.pin_mmap_threshold()
elif mode == "operator":
    from berth.kube.transport import errors
    from berth.operator import main, settings

    config = settings.Settings(
        kubeconfig=pathlib.Path("/nonexistent"), http_host="127.0.0.1", http_port=0
    )
    try:
        asyncio.run(main.run(config, stop=asyncio.Event()))
    except errors.ConfigError:
        pass
random.seed(20)
block = bytes(262144)  # one full 256 KiB read, freed: glibc raises its threshold past it
del block
a, b = socket.socketpair()
start = allocator.heap()
recent = collections.deque(maxlen=20)  # reads still queued
kept = collections.deque(maxlen=200)  # what earlier reads were parsed into
for _ in range(reads):
    a.send(b"y" * random.randint(100, 8000))
    recent.append(b.recv(262144))
    kept.append(bytes(random.randint(600, 3000)))
end = allocator.heap()
print(json.dumps({"grew": end.obtained - start.obtained, "in_use": end.in_use - start.in_use}))
"""


def heap_growth(mode: str) -> tuple[int, int]:
    """(heap obtained, heap in use) growth in bytes over the reads, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode, str(READS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    return result["grew"], result["in_use"]


def test_reads_fragment_the_heap_when_glibc_adjusts_its_threshold() -> None:
    grew, in_use = heap_growth("adjusting")
    assert grew > 4 * in_use + 2**20, (grew, in_use)


@pytest.mark.parametrize("mode", ["pinned", "operator"])
def test_a_pinned_threshold_keeps_the_heap_at_what_it_holds(mode: str) -> None:
    grew, in_use = heap_growth(mode)
    assert in_use > 0
    assert grew < in_use + 2**20, (grew, in_use)
