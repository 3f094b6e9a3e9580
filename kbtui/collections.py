"""Canonical collection ids: the namespace boundary every query is scoped by."""

from __future__ import annotations

import re

from kbtui.errors import InvalidCollection

DEFAULT_COLLECTION = "DEFAULT"
MAX_COLLECTION_ID_LENGTH = 128
_ALLOWED = re.compile(r"[A-Z0-9._-]+\Z")


def canonical_collection_id(raw: str | None) -> str:
    """Trim and upper-case ``raw``; missing or blank maps to ``DEFAULT``.

    Raises :class:`InvalidCollection` for anything outside ASCII letters,
    digits, ``-``, ``_`` and ``.``, or longer than 128 characters.
    """
    if raw is None:
        return DEFAULT_COLLECTION
    candidate = raw.strip().upper()
    if not candidate:
        return DEFAULT_COLLECTION
    if len(candidate) > MAX_COLLECTION_ID_LENGTH:
        raise InvalidCollection(
            f"collection id is longer than {MAX_COLLECTION_ID_LENGTH} characters"
        )
    if not _ALLOWED.match(candidate):
        raise InvalidCollection(
            "collection id may only contain ASCII letters, digits, '-', '_' and '.'"
        )
    return candidate
