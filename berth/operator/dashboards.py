"""The read-only dashboard: one HTML page, served at ``/dashboard``, with no build step.

The page (``dashboard.html`` beside this module, plain HTML, CSS and JavaScript) fetches
:data:`OVERVIEW_PATH` (:meth:`berth.operator.visibility.Visibility.overview`) every few seconds
and draws the queue tree — each queue's allocation against its guarantee and fair share now, in
cores, GiB and GPUs, and over the last hour on charts with a scale, one per resource the cluster
schedules (GPUs too on a GPU cluster) — the waiting groups with their reasons and positions,
reservations with their owners as selectors, and node usage. It only reads; every text from the
cluster is inserted as text, never as markup.

The paths the page is served at and reads from are defined here and nowhere else: the HTTP
server routes them from these names (:mod:`berth.operator.http`), and :func:`page` writes them
into the page, so moving the API is a one-line change.
"""

from __future__ import annotations

import functools
import importlib.resources
import json

__all__ = ["DASHBOARD_PATH", "OVERVIEW_PATH", "page"]

DASHBOARD_PATH = "/dashboard"
"""Where the page is served."""
OVERVIEW_PATH = "/berth/v1/overview"
"""What the page draws: the overview's JSON."""
_DATA_URLS = "/*BERTH_DATA_URLS*/"


@functools.cache
def page() -> str:
    """The dashboard's HTML, with the data URLs it reads written in."""
    html = importlib.resources.files(__package__).joinpath("dashboard.html").read_text("utf-8")
    urls = json.dumps({"overview": OVERVIEW_PATH})
    return html.replace(_DATA_URLS, f"const DATA = {urls};")
