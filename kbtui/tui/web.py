"""``kbtui web``: the same terminal UI in a browser, served by textual-serve.

Each browser session runs ``kbtui`` (the TUI) in its own process on this
machine, so it is the node or a client of the running node exactly as in a
terminal. textual-serve has no access control of its own, and the page shows
decrypted names and document text, so:

- it listens on the loopback address unless told otherwise;
- every session needs a random token made at start, printed once in a URL:
  opening it moves the token into a same-site, HTTP-only cookie and
  redirects to the address without it (so it is not left in the address bar,
  the history or a Referer); every other request needs the cookie. Another
  user of the machine cannot open the page;
- at most ``max_sessions`` browser sessions run at once (each is a ``kbtui``
  process): more are refused (503) until one closes;
- the websocket accepts only this server's own origin (a web page elsewhere
  in the operator's browser cannot drive it);
- the page loads nothing from the internet (textual-serve's page asks Google
  for a font; that line is dropped) and requests are not logged (the URL
  carries the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import secrets
import shlex
import signal
import sys
from importlib.resources import files
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server

TOKEN_COOKIE = "kbtui_web_token"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8023
DEFAULT_MAX_SESSIONS = 4
_FONT_LINE = "fonts.googleapis.com"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only answers this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def offline_page() -> str:
    """textual-serve's page without the line that fetches a web font from the internet."""
    text = files("textual_serve").joinpath("templates/app_index.html").read_text(encoding="utf-8")
    # The font link spans lines: <link rel="stylesheet" href="https://fonts.googleapis.com/..." />
    start = text.find(_FONT_LINE)
    if start >= 0:
        open_at = text.rfind("<link", 0, start)
        close_at = text.find("/>", start)
        if open_at >= 0 and close_at >= 0:
            text = text[:open_at] + text[close_at + 2 :]
    return text


class KbtuiWebServer(Server):
    """textual-serve's server with a session token, an origin check and no request log."""

    def __init__(
        self, command: str, *, host: str, port: int, token: str, max_sessions: int = DEFAULT_MAX_SESSIONS
    ) -> None:
        super().__init__(command, host=host, port=port, title="kbtui")
        self.token = token
        self.max_sessions = max_sessions
        self.sessions = 0

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": offline_page()}))
        return app

    def _is_token(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self.token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/static/"):
            return await handler(request)  # the page's own scripts, styles and fonts: nothing private
        offered = request.query.get("token")
        if offered is not None:
            if request.path != "/" or not self._is_token(offered):
                raise web.HTTPForbidden(text="kbtui web: open the URL printed when the server started (it carries a token)")
            # The token leaves the address at once: into the cookie, then the same page without it.
            clean = request.rel_url.with_query({k: v for k, v in request.query.items() if k != "token"})
            redirect = web.HTTPSeeOther(str(clean), headers={"Referrer-Policy": "no-referrer"})
            redirect.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict")
            raise redirect
        if not self._is_token(request.cookies.get(TOKEN_COOKIE, "")):
            raise web.HTTPForbidden(text="kbtui web: open the URL printed when the server started (it carries a token)")
        if request.path != "/ws":
            return await handler(request)
        origin = request.headers.get("Origin")
        if origin is not None and origin != self.public_url:
            raise web.HTTPForbidden(text="kbtui web: wrong origin")
        if self.sessions >= self.max_sessions:
            raise web.HTTPServiceUnavailable(
                text=f"kbtui web: {self.max_sessions} browser session(s) are open, the most it runs; close one"
            )
        self.sessions += 1  # the websocket's handler lasts as long as its session
        try:
            return await handler(request)
        finally:
            self.sessions -= 1

    async def on_startup(self, app: web.Application) -> None:
        """Nothing to announce yet: the startup signal comes before the port is bound."""

    def _announce(self, *_aiohttp_banner: object) -> None:
        # aiohttp "prints" its banner once the site listens; the URL is printed
        # then, so whoever reads it can connect at once.
        print(f"kbtui web: serving the terminal UI on {self.public_url}/?token={self.token}", flush=True)
        print("kbtui web: each browser session runs kbtui on this machine; Ctrl-C stops the server", flush=True)

    def serve(self, debug: bool = False) -> None:
        """Run until SIGINT or SIGTERM (no request log: URLs carry the token)."""
        self.debug = debug
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(signum, self.request_exit)
        web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                    access_log=None, print=self._announce)


def serve_web(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, max_sessions: int = DEFAULT_MAX_SESSIONS) -> int:
    """Serve ``kbtui`` (the terminal UI) to browsers until interrupted."""
    command = f"{shlex.quote(sys.executable)} -m kbtui"
    KbtuiWebServer(
        command, host=host, port=port, token=secrets.token_urlsafe(24), max_sessions=max_sessions
    ).serve()
    return 0
