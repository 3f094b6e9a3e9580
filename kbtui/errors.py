"""Errors an operator sees: one clear, content-free line and a non-zero exit."""

from __future__ import annotations


class KbtuiError(Exception):
    """An expected failure with a message fit for the operator.

    The message must never contain document text, chunk text, file names of
    stored documents or query text: it may be printed and logged.
    """

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidCollection(KbtuiError):
    pass


class KeyProblem(KbtuiError):
    """The node key is missing, wrong or unsafe: the program must not start."""

    exit_code = 3


class BlobCorrupt(KbtuiError):
    """An encrypted blob failed authentication (tampered, truncated or swapped)."""


class NotFound(KbtuiError):
    pass


class DataDirectoryProblem(KbtuiError):
    """The data directory cannot be used as it is (not a directory, writable by
    others, read-only for a command that writes): nothing was changed."""

    exit_code = 3


class CatalogProblem(KbtuiError):
    """The catalog (``kb.sqlite3``) is missing, empty, damaged, newer than this
    kbtui, or not this data directory's: the program must not go on, and above
    all must not sweep the encrypted sources against it."""

    exit_code = 3


class NoKnowledgeBase(KbtuiError):
    """A command that only reads found no knowledge base in the data directory."""
