"""In-memory cluster and virtual clock: the same scheduler without an API server (``berth sim``)."""
