"""The per-cycle cluster view.

NodeInfo, PodInfo, PodGroupInfo, QueueInfo, ReservationInfo, and the vectorised node table.
"""
