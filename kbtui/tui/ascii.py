"""ASCII only, for terminals that cannot draw the rest.

Under a C or POSIX locale, or on the Linux console (``TERM=linux``, ``vt100``),
box drawing, blocks, bullets and arrows come out as ``x``, ``_`` or ``?``.
There the app draws everything in ASCII: a Textual line filter
(:class:`AsciiFilter`) replaces each character outside ASCII after the
widgets are rendered, with one of the same width (``│`` ``|``, ``─`` ``-``,
corners ``+``, ``▰`` ``#``, ``●`` ``*``, ``…`` ``~``, an accented letter its
base letter, anything else ``?``), so every border, glyph and icon of every
widget, Textual's own included, follows, and columns stay aligned.
``kbtui --ascii`` forces it anywhere.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Mapping

from rich.cells import cell_len
from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

# TERM values whose terminals draw (next to) nothing beyond ASCII.
ASCII_TERMS = ("linux", "vt100", "vt102", "vt220", "dumb", "ansi")

# One ASCII character for each non-ASCII one the app and Textual draw.
_GLYPHS = {
    # light, heavy and double lines; corners and joints
    **dict.fromkeys("─━═╌╍┄┅┈┉╴╶╸╺╼╾", "-"),
    **dict.fromkeys("│┃║╎╏┆┇┊┋╵╷╹╻╽╿", "|"),
    **dict.fromkeys("┌┍┎┏┐┑┒┓└┕┖┗┘┙┚┛├┝┞┟┠┡┢┣┤┥┦┧┨┩┪┫┬┭┮┯┰┱┲┳┴┵┶┷┸┹┺┻┼┽┾┿╀╁╂╃╄╅╆╇╈╉╊╋"
                    "╒╓╔╕╖╗╘╙╚╛╜╝╞╟╠╡╢╣╤╥╦╧╨╩╪╫╬╭╮╯╰", "+"),
    # blocks: borders of thick frames, scrollbars, the queue sparkline (lowest to fullest)
    "▁": "_", "▂": ".", "▃": ":", "▄": "=", "▅": "+", "▆": "*", "▇": "#", "█": "#",
    **dict.fromkeys("▀▔", "-"),
    **dict.fromkeys("▌▐▍▎▏▊▋▉▕", "|"),
    **dict.fromkeys("░▒▓▖▗▘▙▚▛▜▝▞▟", "#"),
    # progress, bullets, marks, arrows
    "▰": "#", "▱": "-", "●": "*", "○": "o", "•": "*", "·": ".", "◦": "o", "◆": "*", "◇": "o",
    "…": "~", "–": "-", "—": "-", "‒": "-", "›": ">", "‹": "<", "»": ">", "«": "<",
    "“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "′": "'",
    "←": "<", "→": ">", "↑": "^", "↓": "v", "⇧": "^", "⏎": "<", "↵": "<",
    "▲": "^", "▼": "v", "▶": ">", "◀": "<", "▸": ">", "◂": "<", "▴": "^", "▾": "v",
    "✓": "v", "✔": "v", "✗": "x", "✘": "x", "×": "x", "±": "+", "ƒ": "f", "�": "?",
    "\N{NO-BREAK SPACE}": " ",
}


def _ascii_for(char: str) -> str:
    """The ASCII stand-in for ``char``, as many cells wide."""
    if char in _GLYPHS:
        return _GLYPHS[char]
    base = "".join(c for c in unicodedata.normalize("NFKD", char) if c.isascii() and c.isprintable())
    width = cell_len(char)
    if len(base) == 1 and width == 1:
        return base  # é -> e
    return "?" * width  # a wide character keeps its two cells; a zero-width one takes none


@functools.lru_cache(maxsize=4096)
def ascii_text(text: str) -> str:
    """``text`` in ASCII, cell for cell."""
    if text.isascii():
        return text
    return "".join(char if char.isascii() else _ascii_for(char) for char in text)


class AsciiFilter(LineFilter):
    """Every rendered line in ASCII (see the module's docstring)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [
            segment if segment.control or segment.text.isascii() else Segment(ascii_text(segment.text), segment.style)
            for segment in segments
        ]


def wants_ascii(environ: Mapping[str, str], *, utf8_mode: bool | None = None) -> bool:
    """Whether the terminal described by ``environ`` needs ASCII: a locale that is
    not UTF-8 (``LC_ALL``, else ``LC_CTYPE``, else ``LANG``), or an ASCII-only TERM.

    Python started under the C locale sets ``LC_CTYPE=C.UTF-8`` for itself and
    turns on its UTF-8 mode (PEP 538, 540); that is not the terminal's doing:
    ``utf8_mode`` (default: this interpreter's) without an explicit request for
    it (``PYTHONUTF8``) means the locale was C or POSIX.
    """
    if environ.get("TERM", "").lower() in ASCII_TERMS:
        return True
    if utf8_mode is None:
        utf8_mode = bool(sys.flags.utf8_mode) and "utf8" not in getattr(sys, "_xoptions", {})
    if utf8_mode and not environ.get("PYTHONUTF8"):
        return True
    locale = environ.get("LC_ALL") or environ.get("LC_CTYPE") or environ.get("LANG") or ""
    return not locale.lower().replace("-", "").endswith("utf8") and ".utf8@" not in locale.lower().replace("-", "")
