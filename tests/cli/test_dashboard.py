"""The dashboard ``berth up`` serves, looked at in headless Chromium: what it says and its layout.

We test these aspects, on a GPU cluster with a queue tree, a running GPU pod, a pod that cannot
fit and a reservation for a label selector:

- ``berth up`` prints the dashboard's address;
- the page (its JavaScript run by the browser) shows the queue tree, an invalid queue as such,
  the waiting pod with its position and the scheduler's reason, the reservation's owners as a
  selector (``app=train``), and amounts in units people read (cores, GiB, GPUs: no raw
  milli-units anywhere);
- the layout, measured in the rendered page: every queue row has one chart per charted
  resource — cpu and, on this GPU cluster, GPUs — each inside its row's band and centred on it
  (not half a row below), rows one under the other; each chart has a scale (its top value with
  a unit, at or above everything it draws) and the last point of the allocation line sits
  where the scale says that allocation belongs;
- a screenshot of the whole page is written (docs/dashboard.png is one).

Needs Debian's ``chromium`` (``apt-get install chromium``, ``hack/setup`` does); skipped,
saying so, without it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import typing
import urllib.error
import urllib.request

import pytest

from berth.emulator import testing
from tests.cli import browser

BERTH = str(pathlib.Path(sys.executable).parent / "berth")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        browser.CHROMIUM is None,
        reason="headless Chromium is not installed (apt-get install chromium)",
    ),
]

OBJECTS = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: research}
spec: {guaranteed: {cpu: "4", nvidia.com/gpu: "2"}}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: team-a}
spec: {parent: research, guaranteed: {cpu: "2", nvidia.com/gpu: "2"}}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: team-b}
spec: {parent: research}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: orphan}
spec: {parent: nowhere}
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels: {scheduling.berth.io/queue: team-a}
  annotations: {sim.berth.io/duration: 10h}
spec:
  schedulerName: berth-scheduler
  containers:
  - name: c
    image: busybox
    resources:
      requests: {cpu: "3", memory: 6Gi}
      limits: {nvidia.com/gpu: "2"}
---
apiVersion: v1
kind: Pod
metadata: {name: huge, labels: {scheduling.berth.io/queue: team-b}}
spec:
  schedulerName: berth-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Reservation
metadata: {name: for-training}
spec:
  owners: [{labelSelector: {matchLabels: {app: train}}}]
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""

# Every queue row, its cells and its charts, as laid out (CSS pixels, page coordinates).
LAYOUT = """
[...document.querySelectorAll('#queues tbody tr[data-queue]')].map(tr => {
  const box = r => { const b = r.getBoundingClientRect();
                     return {top: b.top + scrollY, bottom: b.bottom + scrollY}; };
  return {
    queue: tr.dataset.queue,
    row: box(tr),
    name: box(tr.querySelector('.queue-name')),
    text: tr.innerText,
    charts: [...tr.querySelectorAll('svg.chart')].map(c => ({
      resource: c.dataset.resource,
      box: box(c),
      height: c.height.baseVal.value,
      top: (c.querySelector('text.scale-top') || {}).textContent || null,
      gridTop: c.querySelector('line') ? c.querySelector('line').y1.baseVal.value : null,
      zero: c.querySelectorAll('line')[1] ? c.querySelectorAll('line')[1].y1.baseVal.value : null,
      allocated: c.querySelector('polyline.allocated')
        ? c.querySelector('polyline.allocated').getAttribute('points') : null,
    })),
  };
})
"""


def _overview(base: str) -> dict[str, typing.Any]:
    """The overview, or nothing while the API answers 503 (no leader's view yet: try again)."""
    try:
        with urllib.request.urlopen(f"{base}/berth/v1/overview") as answer:
            loaded: dict[str, typing.Any] = json.loads(answer.read())
            return loaded
    except urllib.error.HTTPError as refused:
        if refused.code != 503:
            raise
        return {"queues": []}


async def _look(url: str, profile: pathlib.Path) -> tuple[list[dict[str, typing.Any]], str, bytes]:
    async with browser.open_page(url, profile=profile) as page:
        # Rendered, with the charts of the team's queue drawn (not "collecting…").
        await page.wait_for(
            "document.querySelectorAll('#queues tr[data-queue=\"team-a\"] polyline').length > 0"
        )
        layout = await page.evaluate(LAYOUT)
        text = await page.evaluate("document.body.innerText")
        shot = await page.screenshot()
    return layout, text, shot


def test_the_dashboard_shows_queues_with_charts_aligned_and_scaled(
    tmp_path: pathlib.Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env.pop("KUBECONFIG", None)
    env |= {"HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [BERTH, "up", "--nodes", "2x cpu=8,memory=32Gi,nvidia.com/gpu=4", "--log-level",
         "warning"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        printed = []
        for line in process.stdout:
            printed.append(line)
            if "Press Ctrl+C" in line:
                break
        (dashboard,) = [line.split()[-1] for line in printed if "dashboard:" in line]
        base = dashboard.removesuffix("/dashboard")
        kubeconfig = tmp_path / ".local" / "state" / "berth" / "up" / "kubeconfig"
        subprocess.run(
            [testing.kubectl_binary(), "apply", "-f", "-"],
            input=OBJECTS, env=env | {"KUBECONFIG": str(kubeconfig)},
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        # Two history samples (one every 10 s) with the trainer's GPUs allocated, and the
        # huge pod waiting: the charts have something to draw.
        deadline = time.monotonic() + 120  # a bound a loaded machine meets
        overview: dict[str, typing.Any] = {}
        while time.monotonic() < deadline:
            overview = _overview(base)
            queues = {q["name"]: q for q in overview["queues"]}
            history = queues.get("team-a", {}).get("history", [])
            allocated = [s["allocated"].get("nvidia.com/gpu", 0) for s in history]
            waiting = queues.get("team-b", {}).get("line")
            if len(allocated) >= 2 and allocated[-1] == 2000 and waiting:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the dashboard's data never settled: {overview}")
        assert overview["resources"] == ["cpu", "memory", "nvidia.com/gpu"]

        layout, text, shot = asyncio.run(_look(dashboard, tmp_path / "chromium"))

        # What it says.
        for expected in (
            "research", "└ team-a", "└ team-b", "orphan", "Invalid",
            "parent queue nowhere does not exist",
            "default/huge", "1 of 1", "0/2 nodes fit: 2 Insufficient cpu",
            "app=train",
            "3 cores", "6 GiB", "2 GPUs", "of 8 cores", "of 32 GiB", "of 4 GPUs",
        ):  # fmt: skip
            assert expected in text, expected
        assert not re.search(r"\d{7,}", text), "raw milli-units on the page"

        # The layout.
        order = [q["queue"] for q in layout]
        assert {"default", "orphan"} <= set(order)  # default holds the reservation
        start = order.index("research")
        assert order[start : start + 3] == ["research", "team-a", "team-b"]  # the tree
        for above, below in itertools.pairwise(layout):
            assert above["row"]["bottom"] <= below["row"]["top"] + 0.5
        shown = queues["team-a"]["history"]
        for queue in layout:
            row, name = queue["row"], queue["name"]
            assert [c["resource"] for c in queue["charts"]] == ["cpu", "nvidia.com/gpu"]
            middle = (name["top"] + name["bottom"]) / 2
            for c in queue["charts"]:
                assert row["top"] - 0.5 <= c["box"]["top"], (queue["queue"], c, row)
                assert c["box"]["bottom"] <= row["bottom"] + 0.5, (queue["queue"], c, row)
                centre = (c["box"]["top"] + c["box"]["bottom"]) / 2
                assert abs(centre - middle) <= (row["bottom"] - row["top"]) / 4, (queue, c)
        (team_a,) = [q for q in layout if q["queue"] == "team-a"]
        units = {"cpu": "cores", "nvidia.com/gpu": "GPUs"}
        for c in team_a["charts"]:
            resource = c["resource"]
            assert c["top"] is not None and c["top"].endswith(" " + units[resource]), c
            scale = float(c["top"].split()[0])
            peak = max(
                s[f].get(resource, 0) / 1000
                for s in shown
                for f in ("allocated", "fairShare", "guaranteed")
            )
            assert scale >= peak, (c, peak)
            # The allocation line's last point is where the scale puts the allocation.
            last_y = float(c["allocated"].split()[-1].split(",")[1])
            value = shown[-1]["allocated"].get(resource, 0) / 1000
            assert c["gridTop"] is not None and c["zero"] is not None
            expected_y = c["zero"] - value / scale * (c["zero"] - c["gridTop"])
            assert abs(last_y - expected_y) <= 1.0, (c, value, scale)

        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        (tmp_path / "dashboard.png").write_bytes(shot)
        if os.environ.get("BERTH_WRITE_DASHBOARD_PNG"):
            pathlib.Path(os.environ["BERTH_WRITE_DASHBOARD_PNG"]).write_bytes(shot)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
