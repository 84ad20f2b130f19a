"""The scheduling component: pure and synchronous, apart from :mod:`berth.scheduler.loop`."""
