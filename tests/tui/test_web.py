"""``kbtui web`` in a real browser: headless Chromium opens the served UI, the
test presses ``/``, types a query and reads the search screen back from the
page's terminal (xterm.js) over the DevTools protocol.

CI installs Chromium (``.ci/run``); there this test fails rather than skips
when Chromium cannot run. Elsewhere it is skipped without a Chromium.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import aiohttp
import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")

# textual-serve keeps its xterm.js Terminal in a closure; catch it as the page
# assigns it (``this.terminal = new Terminal(...)``) so its buffer can be read.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, 'terminal', {
  configurable: true,
  get() { return undefined; },
  set(value) {
    if (value && value.buffer && value.buffer.active) { window.__kbtuiTerminal = value; }
    Object.defineProperty(this, 'terminal', {value, writable: true, configurable: true, enumerable: true});
  },
});
"""
SCREEN_TEXT = """(() => {
  const t = window.__kbtuiTerminal;
  if (!t) return '';
  const b = t.buffer.active, rows = [];
  for (let i = 0; i < t.rows; i++) { const l = b.getLine(b.viewportY + i); rows.push(l ? l.translateToString(true) : ''); }
  return rows.join('\\n');
})()"""


def browser() -> str:
    found = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed: .ci/run installs it (apt-get install chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_line_matching(stream, pattern: str, timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            time.sleep(0.05)
            continue
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    raise AssertionError(f"never printed {pattern!r}; got: {''.join(seen)[-2000:]}")


class DevTools:
    """Just enough of the Chrome DevTools protocol: commands over one page's websocket."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.next_id = 0

    async def send(self, method: str, **params: object) -> dict:
        self.next_id += 1
        await self.socket.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.socket.receive_json(), timeout=30)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def screen(self) -> str:
        result = await self.send("Runtime.evaluate", expression=SCREEN_TEXT, returnByValue=True)
        return result.get("result", {}).get("value", "")

    async def wait_for(self, predicate, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = await self.screen()
            if predicate(shown):
                return shown
            await asyncio.sleep(0.2)
        raise AssertionError("the page never showed it; last screen:\n" + shown)

    async def key(self, text: str) -> None:
        for char in text:
            await self.send("Input.dispatchKeyEvent", type="keyDown", key=char, text=char, unmodifiedText=char)
            await self.send("Input.dispatchKeyEvent", type="keyUp", key=char)


def test_the_browser_view_renders_the_search_screen(indexed_node, home, tmp_path):
    chromium = browser()
    indexed_node.close()  # the served UI opens the data directory itself
    port = free_port()
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "web", "--port", str(port)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    chrome = None
    try:
        url = read_line_matching(server.stdout, r"(http://127\.0\.0\.1:\d+/\?token=\S+)", 60).group(1)
        chrome = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--window-size=1280,900", "--remote-debugging-port=0",
             f"--user-data-dir={tmp_path / 'chrome'}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        devtools = read_line_matching(chrome.stderr, r"DevTools listening on (ws://\S+)", 60).group(1)
        asyncio.run(drive(devtools, url))
    finally:
        for process in (chrome, server):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)


async def drive(browser_socket: str, url: str) -> None:
    http = "http://" + browser_socket.split("//", 1)[1].split("/", 1)[0]
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{http}/json/list") as listed:
            pages = [t for t in json.loads(await listed.text()) if t["type"] == "page"]
        async with session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as socket:
            page = DevTools(socket)
            await page.send("Page.enable")
            await page.send("Page.addScriptToEvaluateOnNewDocument", source=CATCH_TERMINAL)
            await page.send("Page.navigate", url=url)
            # The served UI runs the node itself (its header says so once the node and its API are up).
            await page.wait_for(lambda s: "Indexed 6" in s and "● node DEFAULT" in s)
            await page.send("Runtime.evaluate", expression="window.__kbtuiTerminal.focus()")
            await page.key("/")
            await page.wait_for(lambda s: "Search DEFAULT" in s)
            await page.key("restore the database")
            # Type-ahead answers while the keys still arrive: wait for the answer to the whole query.
            shown = await page.wait_for(lambda s: "hits in DEFAULT" in s and "restore the database" in s)
            assert re.search(r"1\. .*(Postgres|restore|Restore)", shown), shown


def test_the_token_moves_into_a_cookie_the_url_comes_clean_and_sessions_are_capped(home):
    """A real ``kbtui web`` and a real HTTP client: the printed URL's token is
    turned into an HTTP-only cookie and the browser sent to the address
    without it; nothing else takes the token in a URL; and no more browser
    sessions run than the cap (each is a kbtui process)."""
    port = free_port()
    env = {**os.environ, "KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "kbtui", "web", "--port", str(port), "--max-sessions", "1"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        url = read_line_matching(server.stdout, r"(http://127\.0\.0\.1:\d+/\?token=(\S+))", 60)
        asyncio.run(check_token_and_sessions(url.group(1), url.group(2), f"http://127.0.0.1:{port}"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


async def check_token_and_sessions(url: str, token: str, base: str) -> None:
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(base + "/") as page:
            assert page.status == 403
        async with anonymous.get(base + f"/ws?token={token}") as websocket:
            assert websocket.status == 403  # a token in a URL opens the page only
    jar = aiohttp.CookieJar(unsafe=True)  # cookies for an IP address
    async with aiohttp.ClientSession(cookie_jar=jar) as browser:
        async with browser.get(url + "&fontsize=14", allow_redirects=False) as opened:
            assert opened.status == 303
            assert opened.headers["Location"] == "/?fontsize=14"  # the same page, without the token
            cookie = opened.cookies["kbtui_web_token"]
            assert cookie.value == token and cookie["httponly"] and cookie["samesite"] == "Strict"
        async with browser.get(base + "/?fontsize=14") as page:
            assert page.status == 200 and token not in await page.text()
        origin = {"Origin": base}
        first = await browser.ws_connect(base + "/ws", headers=origin)
        try:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await browser.ws_connect(base + "/ws", headers=origin)
            assert refused.value.status == 503
        finally:
            await first.close()
        deadline = time.monotonic() + 30
        while True:  # the session is let go once its process has stopped
            try:
                again = await browser.ws_connect(base + "/ws", headers=origin)
                break
            except aiohttp.WSServerHandshakeError as still:
                assert still.status == 503 and time.monotonic() < deadline
                await asyncio.sleep(0.2)
        await again.close()
