"""What makes a read-only open possible and the orphan sweep safe.

``removed_document`` remembers every document row deleted, by a trigger, so
whatever code path deletes one. The orphan sweep deletes a blob only when
this catalog says its document was removed: a blob the catalog has never
heard of (a catalog restored from an older backup, or a crash between the
blob write and the row) is kept, never deleted on the catalog's silence.

The vector index epoch is made here instead of on first use, so a read-only
search never has to write it.
"""

NAME = "data_safety"

STATEMENTS = [
    """
    CREATE TABLE removed_document (
        id         TEXT PRIMARY KEY,
        removed_at REAL NOT NULL
    )
    """,
    """
    CREATE TRIGGER document_removed AFTER DELETE ON document BEGIN
        INSERT OR REPLACE INTO removed_document(id, removed_at)
        VALUES (old.id, (julianday('now') - 2440587.5) * 86400.0);
    END
    """,
    # Document ids are never reused; should one come back, it is no orphan.
    """
    CREATE TRIGGER document_restored AFTER INSERT ON document BEGIN
        DELETE FROM removed_document WHERE id = new.id;
    END
    """,
    """
    INSERT OR IGNORE INTO node_meta(key, value)
        VALUES ('vector_index_epoch', CAST(lower(hex(randomblob(16))) AS BLOB))
    """,
]
