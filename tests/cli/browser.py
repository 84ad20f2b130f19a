"""Headless Chromium driven over the DevTools protocol, for tests that look at a page's layout.

:func:`open_page` starts Debian's ``chromium`` with a private profile and a remote-debugging port
on 127.0.0.1, navigates its page to a URL and yields a :class:`Page`: ``evaluate`` runs
JavaScript in it (the result returned by value), ``wait_for`` polls an expression until it is
truthy, ``screenshot`` returns a PNG of the whole page. The protocol runs over aiohttp's
websocket client; nothing else is needed.
"""

from __future__ import annotations

import asyncio
import base64
import collections.abc
import contextlib
import itertools
import json
import pathlib
import re
import shutil
import time
import typing

import aiohttp

__all__ = ["CHROMIUM", "Page", "open_page"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_LISTENING = re.compile(r"DevTools listening on (ws://[^\s]+)")


class Page:
    """One browser tab, spoken to over its DevTools websocket."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._events: list[dict[str, typing.Any]] = []

    async def call(self, method: str, **params: typing.Any) -> dict[str, typing.Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        number = next(self._ids)
        await self._socket.send_json({"id": number, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self._socket.receive_json(), timeout=60)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, typing.Any] = message.get("result") or {}
                return result
            if "method" in message:
                self._events.append(message)

    async def event(self, method: str, *, timeout: float = 60) -> dict[str, typing.Any]:
        """Wait for the next event ``method`` (or take one that already came)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, seen in enumerate(self._events):
                if seen["method"] == method:
                    return self._events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} within {timeout}s")
            message = await asyncio.wait_for(self._socket.receive_json(), timeout=left)
            if "method" in message:
                self._events.append(message)

    async def evaluate(self, expression: str) -> typing.Any:
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, *, timeout: float = 60) -> typing.Any:
        """Poll ``expression`` until it is truthy (the page renders asynchronously)."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression} stayed falsy for {timeout}s")
            await asyncio.sleep(0.2)

    async def screenshot(self) -> bytes:
        """A PNG of the whole page, beyond the viewport."""
        result = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        return base64.b64decode(result["data"])


@contextlib.asynccontextmanager
async def open_page(
    url: str, *, profile: pathlib.Path, width: int = 1400, height: int = 900
) -> collections.abc.AsyncIterator[Page]:
    """Chromium showing ``url`` at ``width`` x ``height`` CSS pixels; stopped on exit."""
    assert CHROMIUM is not None, "headless Chromium is not installed"
    process = await asyncio.create_subprocess_exec(
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
        f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        address = None
        while address is None:
            line = await asyncio.wait_for(process.stderr.readline(), timeout=60)
            if not line:
                raise RuntimeError(f"chromium exited {await process.wait()} before listening")
            found = _LISTENING.search(line.decode(errors="replace"))
            address = found[1] if found else None
        stderr = process.stderr

        async def discard() -> None:
            while await stderr.readline():
                pass

        drain = asyncio.create_task(discard())
        base = "http://" + address.removeprefix("ws://").split("/", 1)[0]
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/json/list") as answer:
                targets = json.loads(await answer.text())
            (target,) = [t for t in targets if t.get("type") == "page"]
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                await page.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width, height=height, deviceScaleFactor=1, mobile=False,
                )  # fmt: skip
                await page.call("Page.navigate", url=url)
                await page.event("Page.loadEventFired")
                yield page
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        if drain is not None:
            drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain
