"""The only package that talks to the Kubernetes API: clients, informers, decision sink, leases."""
