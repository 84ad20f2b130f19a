"""Reservations' statuses from the scheduler's facts: the facts' inbox and the writes.

The binder publishes each cycle's Reservation facts in
:class:`~berth.kube.reservations.reservation_statuses.ReservationFacts`; Berth's Kopf handler
for Reservations (:mod:`berth.controllers.reservation_statuses`) has them written.
"""
