"""Source code: one code element per top-level definition, with its symbol.

Symbols are found cheaply, line by line, with a few patterns per language
(no parser): a definition must start in column 0, as top-level definitions
do in idiomatic code. Comments, decorators and attributes directly above a
definition belong to it. Text before the first definition (imports, module
docs) is an element without a symbol. Offsets are into the decoded file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from kbtui.extract import Element

_IDENT = r"[A-Za-z_]\w*"
_JS_IDENT = r"[A-Za-z_$][\w$]*"
_JS_EXPORT = r"(?:export[ \t]+(?:default[ \t]+)?)?(?:declare[ \t]+)?"

_JS_PATTERNS = [
    re.compile(rf"^{_JS_EXPORT}(?:async[ \t]+)?function\b[ \t]*\*?[ \t]*({_JS_IDENT})"),
    re.compile(rf"^{_JS_EXPORT}(?:abstract[ \t]+)?class[ \t]+({_JS_IDENT})"),
    re.compile(
        rf"^(?:export[ \t]+)?(?:const|let|var)[ \t]+({_JS_IDENT})[ \t]*(?::[^=]+)?=[ \t]*(?:async\b[ \t]*)?"
        rf"(?:function\b|\([^)]*\)[ \t]*(?::[^=]+)?=>|{_JS_IDENT}[ \t]*=>)"
    ),
]
_TS_PATTERNS = [
    *_JS_PATTERNS,
    re.compile(rf"^{_JS_EXPORT}(?:const[ \t]+)?(?:interface|type|enum|namespace)[ \t]+({_JS_IDENT})"),
]
_JVM_MODIFIERS = (
    r"(?:(?:public|protected|private|internal|abstract|final|static|sealed|open|data|partial|strictfp|inline|suspend)"
    r"[ \t]+)*"
)

SYMBOL_PATTERNS: dict[str, list[re.Pattern[str]]] = {
    "python": [re.compile(rf"^(?:async[ \t]+)?def[ \t]+({_IDENT})"), re.compile(rf"^class[ \t]+({_IDENT})")],
    "javascript": _JS_PATTERNS,
    "typescript": _TS_PATTERNS,
    "go": [
        # A method is recorded as Type.Method.
        re.compile(rf"^func[ \t]*\([^)]*?\*?({_IDENT})(?:\[[^\]]*\])?\)[ \t]*({_IDENT})"),
        re.compile(rf"^func[ \t]+({_IDENT})"),
        re.compile(rf"^type[ \t]+({_IDENT})"),
    ],
    "rust": [
        re.compile(
            rf"^(?:pub(?:\([^)]*\))?[ \t]+)?(?:default[ \t]+)?(?:const[ \t]+)?(?:async[ \t]+)?(?:unsafe[ \t]+)?"
            rf"(?:extern[ \t]+\"[^\"]*\"[ \t]+)?fn[ \t]+({_IDENT})"
        ),
        re.compile(rf"^(?:pub(?:\([^)]*\))?[ \t]+)?(?:unsafe[ \t]+)?(?:struct|enum|trait|union|mod|type)[ \t]+({_IDENT})"),
        re.compile(rf"^(?:unsafe[ \t]+)?impl\b(?:[ \t]*<[^>]*>)?[ \t]+(?:[\w:]+(?:<[^>]*>)?[ \t]+for[ \t]+)?({_IDENT})"),
    ],
    "java": [re.compile(rf"^{_JVM_MODIFIERS}(?:class|interface|enum|record|@interface)[ \t]+({_IDENT})")],
    "kotlin": [
        re.compile(rf"^{_JVM_MODIFIERS}(?:class|interface|enum[ \t]+class|object)[ \t]+({_IDENT})"),
        re.compile(rf"^{_JVM_MODIFIERS}fun[ \t]+(?:<[^>]*>[ \t]*)?(?:[\w.]+\.)?({_IDENT})"),
    ],
    "csharp": [re.compile(rf"^{_JVM_MODIFIERS}(?:class|interface|enum|record|struct)[ \t]+({_IDENT})")],
}

# C and C++: type definitions, and function definitions (a name followed by
# "(" at column 0 after a return type, where "{" comes before any ";").
_C_TYPE = re.compile(rf"^(?:typedef[ \t]+)?(?:struct|union|enum|class|namespace)[ \t]+({_IDENT})\b[^;]*$")
_C_FUNCTION = re.compile(r"^(?:[A-Za-z_][\w:<>,*& \t]*[ \t*&])?(~?[A-Za-z_][\w]*(?:::~?[A-Za-z_]\w*)*)[ \t]*\(")
_C_NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "else", "do", "case", "defined"}

# Lines directly above a definition that belong to it.
_ATTACHED_PREFIXES: dict[str, tuple[str, ...]] = {
    "python": ("@", "#"),
    "javascript": ("@", "//", "/*", "*"),
    "typescript": ("@", "//", "/*", "*"),
    "go": ("//",),
    "rust": ("#[", "//", "/*", "*"),
    "java": ("@", "//", "/*", "*"),
    "kotlin": ("@", "//", "/*", "*"),
    "csharp": ("[", "//", "/*", "*"),
    "c": ("//", "/*", "*"),
    "cpp": ("//", "/*", "*", "template"),
}


def _pattern_symbol(patterns: Sequence[re.Pattern[str]]) -> Callable[[list[str], int], str | None]:
    def find(lines: list[str], i: int) -> str | None:
        for pattern in patterns:
            match = pattern.match(lines[i])
            if match:
                return ".".join(g for g in match.groups() if g)
        return None

    return find


def _c_symbol(lines: list[str], i: int) -> str | None:
    line = lines[i]
    if not line or line[0].isspace() or line.startswith(("#", "//", "/*", "*", "}")):
        return None
    match = _C_TYPE.match(line)
    if match:
        return match.group(1) if _opens_body(lines, i) else None
    match = _C_FUNCTION.match(line)
    if match and match.group(1) not in _C_NOT_FUNCTIONS and _opens_body(lines, i):
        return match.group(1)
    return None


def _opens_body(lines: list[str], i: int, lookahead: int = 8) -> bool:
    """Whether a "{" comes before any ";" within the next few lines (a definition)."""
    for line in lines[i : i + lookahead]:
        brace, semicolon = line.find("{"), line.find(";")
        if brace >= 0 and (semicolon < 0 or brace < semicolon):
            return True
        if semicolon >= 0:
            return False
    return False


def symbol_finder(language: str) -> Callable[[list[str], int], str | None] | None:
    """A function giving the symbol a line defines, or None for languages without one."""
    if language in ("c", "cpp"):
        return _c_symbol
    patterns = SYMBOL_PATTERNS.get(language)
    return _pattern_symbol(patterns) if patterns else None


def read_code(text: str, language: str) -> list[Element]:
    """Split source code into code elements at top-level definitions."""
    lines = text.split("\n")
    offsets, offset = [], 0
    for line in lines:
        offsets.append(offset)
        offset += len(line) + 1
    find = symbol_finder(language)
    attached = _ATTACHED_PREFIXES.get(language, ())
    starts: list[tuple[int, str | None]] = [(0, None)]
    if find is not None:
        for i in range(len(lines)):
            symbol = find(lines, i)
            if symbol is None:
                continue
            # Attached lines may reach back into the preamble, never into the previous definition.
            floor = starts[-1][0] + (1 if starts[-1][1] is not None else 0)
            start = i
            while attached and start - 1 >= floor and lines[start - 1].strip().startswith(attached):
                start -= 1
            if start == starts[-1][0]:
                starts[-1] = (start, symbol)  # the file opens with this definition
            else:
                starts.append((start, symbol))
    elements: list[Element] = []
    for index, (first, symbol) in enumerate(starts):
        last = starts[index + 1][0] if index + 1 < len(starts) else len(lines)
        while last > first and not lines[last - 1].strip():
            last -= 1
        while first < last and not lines[first].strip():
            first += 1
        if first >= last:
            continue
        body = "\n".join(lines[first:last])
        start = offsets[first]
        elements.append(
            Element("code", body, start=start, end=start + len(body), language=language, symbol=symbol)
        )
    return elements
