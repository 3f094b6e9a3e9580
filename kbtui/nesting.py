"""How deep dicts and lists nest in parsed data (TOML, JSON), measured without recursion."""

from __future__ import annotations


def nesting_depth(value: object, *, limit: int) -> int:
    """How deep tables/objects and arrays nest in ``value`` (a scalar: 0),
    counted only as far as ``limit + 1``: enough to refuse what is too deep."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        current, level = pending.pop()
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level <= limit:
            pending.extend((child, level + 1) for child in children)
    return deepest
