"""The footer every screen shows: its keys, and always ``?`` for the rest.

Textual's footer lists the active keys from the left and cuts what does not
fit; the app's own keys come last, so ``?`` was the first to go on a narrow
terminal. Here ``?`` is docked at the right, beside the palette's key.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

HELP_ACTION = "help"


class KeysFooter(Footer):
    DEFAULT_CSS = """
    KeysFooter .footer-right { dock: right; width: auto; background: $footer-background; }
    KeysFooter .footer-right FooterKey { margin-left: 1; }
    """

    def __init__(self) -> None:
        super().__init__(show_command_palette=False)  # shown on the right, beside ?

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if not (isinstance(widget, FooterKey) and widget.action == HELP_ACTION):
                yield widget
        if not self._bindings_ready:
            return
        # A class, not an id: Textual's recompose does not wait for the removal of a child
        # whose message pump has not started yet, so for a moment the old group and the
        # new one are siblings (an id made that DuplicateIds and took the app down).
        with HorizontalGroup(classes="footer-right"):
            yield FooterKey("question_mark", "?", "Keys", HELP_ACTION).data_bind(compact=Footer.compact)
            palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
            if palette is not None:
                binding = palette.binding
                yield FooterKey(binding.key, self.app.get_key_display(binding), "", binding.action,
                                tooltip=binding.description).data_bind(compact=Footer.compact)
