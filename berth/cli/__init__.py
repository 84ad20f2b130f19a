"""The ``berth`` console script and the kubectl plugins."""
