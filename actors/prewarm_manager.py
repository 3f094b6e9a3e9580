"""PrewarmManager: warms the embedder or reranker in the background, once.

Requests coalesce: a request made before the last warm of that target
finished is already served. After a failed warm, requests are ignored for
30 s so repeated searches do not repeat a doomed start; a successful warm
sets no cooldown (re-warming a running model is a cheap reuse).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pykka

from actors.events import RequestWarm

log = logging.getLogger(__name__)

FAILED_WARM_COOLDOWN_S = 30.0


class PrewarmManager(pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self, warmers: dict[str, Callable[[], None]], *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.warmers = warmers
        self.clock = clock
        self.finished_at: dict[str, float] = {}
        self.cooldown_until: dict[str, float] = {}
        self.warm_count: dict[str, int] = {}

    def on_receive(self, message: object) -> object:
        if not isinstance(message, RequestWarm):
            return None
        target = message.target
        warm = self.warmers.get(target)
        if warm is None:
            return None
        if self.finished_at.get(target, float("-inf")) >= message.requested_at:
            return None  # coalesced into a warm that finished after this request
        if self.clock() < self.cooldown_until.get(target, float("-inf")):
            return None
        self.warm_count[target] = self.warm_count.get(target, 0) + 1
        try:
            warm()
            self.cooldown_until.pop(target, None)
        except Exception as exc:  # noqa: BLE001 - a failed warm only delays the next one
            self.cooldown_until[target] = self.clock() + FAILED_WARM_COOLDOWN_S
            log.warning("warming %s failed: %s", target, type(exc).__name__)
        self.finished_at[target] = self.clock()
        return None


def request_warm(manager: pykka.ActorRef, target: str, *, clock: Callable[[], float] = time.monotonic) -> None:
    """Ask for a warm without waiting for it."""
    manager.tell(RequestWarm(target, clock()))
