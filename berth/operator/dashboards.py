"""The read-only dashboard: one HTML page, served at ``/dashboard``, with no build step.

The page (``dashboard.html`` beside this module, plain HTML, CSS and JavaScript) fetches
``/apis/v1/overview`` (:meth:`berth.operator.visibility.Visibility.overview`) every few seconds
and draws the queue tree with usage against guarantee and fair share over the last hour, the
waiting groups with their reasons and positions, reservations and node usage. It only reads;
every text from the cluster is inserted as text, never as markup.
"""

from __future__ import annotations

import functools
import importlib.resources

__all__ = ["page"]


@functools.cache
def page() -> str:
    """The dashboard's HTML."""
    return importlib.resources.files(__package__).joinpath("dashboard.html").read_text("utf-8")
