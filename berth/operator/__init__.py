"""The operator process: settings, leadership, HTTP (health, metrics, debug API), main."""
