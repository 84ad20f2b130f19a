"""The process's stop signals (SIGINT, SIGTERM) on its event loop, kept when a library takes them.

``berth run`` and ``berth up`` stop gracefully on Ctrl+C and SIGTERM: :func:`on_stop` installs
the loop's handlers for both and remembers them. Kopf, embedded on the same loop, installs its
own handlers for the same signals when it starts on the main thread (``kopf.spawn_tasks``), which
would stop Kopf alone and leave the process running; :func:`reclaim`, called right after, puts
the process's handlers back (or, where none were installed, removes Kopf's, so that the signals
do what they did before). Handlers are per loop; a loop that cannot handle signals (not on the
main thread, or a platform without them) is left alone.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import signal
import weakref

__all__ = ["STOP_SIGNALS", "on_stop", "reclaim", "remove"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_installed: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, collections.abc.Callable[[], None]
] = weakref.WeakKeyDictionary()


def on_stop(callback: collections.abc.Callable[[], None]) -> None:
    """Call ``callback`` on SIGINT or SIGTERM, on the running loop (where it can)."""
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, callback)
    _installed[loop] = callback


def remove() -> None:
    """Remove the stop signals' handlers from the running loop (the defaults apply again)."""
    loop = asyncio.get_running_loop()
    _installed.pop(loop, None)
    for signum in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signum)


def reclaim() -> None:
    """Put the process's stop handlers back on the running loop after a library replaced them
    (with none installed, remove whatever handlers were put there)."""
    loop = asyncio.get_running_loop()
    callback = _installed.get(loop)
    if callback is None:
        for signum in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        return
    on_stop(callback)
