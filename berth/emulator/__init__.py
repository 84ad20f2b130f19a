"""An in-memory Kubernetes API server with simulated nodes.

It is the test bed for every real-client test and the cluster behind ``berth up``.
"""
