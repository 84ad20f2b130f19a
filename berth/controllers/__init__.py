"""Kopf handlers, one module per CRD: queues, podgroups, reservations."""
