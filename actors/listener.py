"""Mopidy-style event fan-out: events reach every listener actor by ``tell``.

Listeners are told, never asked, so a slow or stuck listener can never block
the actor that published (and no actor ever waits on another). A listener
whose handler raises logs the exception type and carries on.
"""

from __future__ import annotations

import logging

import pykka

from actors.events import Event

log = logging.getLogger(__name__)


class EventListener(pykka.ThreadingActor):
    """Base for actors that receive pipeline events.

    Subclasses implement ``on_<event name>(event)`` for the events they want,
    e.g. ``on_document_status_changed``; other events are ignored.
    """

    use_daemon_thread = True

    def on_receive(self, message: object) -> object:
        if hasattr(message, "name") and isinstance(getattr(type(message), "name", None), str):
            self.on_event(message)  # type: ignore[arg-type]
            return None
        return self.on_command(message)

    def on_event(self, event: Event) -> None:
        handler = getattr(self, f"on_{event.name}", None)
        if handler is None:
            return
        try:
            handler(event)
        except Exception as exc:  # noqa: BLE001 - a bad listener must not stop the fan-out
            log.error("listener %s failed on %s: %s", type(self).__name__, event.name, type(exc).__name__)

    def on_command(self, message: object) -> object:
        """Messages that are not events (subclasses override)."""
        log.warning("%s ignored a message of type %s", type(self).__name__, type(message).__name__)
        return None


def publish(event: Event) -> None:
    """Tell every running listener about ``event``."""
    for ref in pykka.ActorRegistry.get_by_class(EventListener):
        try:
            ref.tell(event)
        except pykka.ActorDeadError:
            continue


class _PykkaRedaction(logging.Filter):
    """Pykka logs whole messages and tracebacks; both can carry document text.

    Keep its life-cycle lines (which name actors only) and reduce everything
    else to a fixed line with the exception type.
    """

    _SAFE_PREFIXES = ("Starting ", "Stopped ", "Registered ", "Unregistered ")

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if message.startswith(self._SAFE_PREFIXES) and not record.exc_info:
            return True
        exc_type = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
        record.msg = "pykka reported a problem" + (f" ({exc_type})" if exc_type else "") + "; details withheld"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


logging.getLogger("pykka").addFilter(_PykkaRedaction())
