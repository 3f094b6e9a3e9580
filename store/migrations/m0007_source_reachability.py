"""A scan that cannot see is not a deletion.

A source remembers the identity (device and inode) of the directory it was
registered at (the folder, the working tree, or a single file's folder), so
a root that is now another directory - an unmounted file system leaves its
empty mount point behind - is told apart from a folder whose files were
deleted. Until the files come back, or the operator prunes on purpose, the
source says why it cannot be seen (``unreachable_reason``) and each document
its scan could not prove gone is listed in ``unreachable_document`` with a
reason: kept, searchable, and flagged.
"""

NAME = "source_reachability"

STATEMENTS = [
    "ALTER TABLE source ADD COLUMN root_device INTEGER",
    "ALTER TABLE source ADD COLUMN root_inode INTEGER",
    "ALTER TABLE source ADD COLUMN unreachable_reason TEXT",  # root_missing | root_replaced | root_empty
    "ALTER TABLE source ADD COLUMN unreachable_since REAL",
    """
    CREATE TABLE unreachable_document (
        document_id TEXT PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        source_id   TEXT NOT NULL,
        reason      TEXT NOT NULL,   -- root_replaced | root_empty | folder_unreadable | unreadable | other_device
        since       REAL NOT NULL
    )
    """,
    "CREATE INDEX unreachable_document_source ON unreachable_document(source_id)",
]
