"""The Reservation plugin package: capacity held on one node for named owners.

Self-contained: :mod:`.plugin` implements the extension points and the session hooks the
framework offers every plugin (``job_first``, ``evictable``, ``reserved_credit``), and
:mod:`.books` its per-session books. The framework and the actions know nothing of
reservations beyond those generic hooks. The Reservation controller (lifetime of the objects in
the API, garbage collection) lives with the other controllers in :mod:`berth.controllers`,
since it talks to the API server and this package stays pure; docs/architecture.md draws the
line.
"""

from berth.scheduler.plugins.reservation.plugin import (
    MATCHES_KEY,
    NAME,
    ROUTE,
    Matches,
    Reservation,
    get_matches,
    new,
)

__all__ = ["MATCHES_KEY", "NAME", "ROUTE", "Matches", "Reservation", "get_matches", "new"]
