"""The first schema: collections, documents, sections, chunks, vectors and FTS5."""

NAME = "initial"

STATEMENTS = [
    """
    CREATE TABLE node_meta (
        key   TEXT PRIMARY KEY,
        value BLOB NOT NULL
    )
    """,
    """
    CREATE TABLE collection (
        id         TEXT PRIMARY KEY,
        created_at REAL NOT NULL
    )
    """,
    """
    CREATE TABLE document (
        id              TEXT PRIMARY KEY,
        collection_id   TEXT NOT NULL REFERENCES collection(id),
        content_hash    TEXT NOT NULL,
        display_name    BLOB NOT NULL,          -- encrypted (store.blobs.seal_name)
        format          TEXT NOT NULL,          -- reader chosen from the extension
        source_path     TEXT,                   -- relative repository path; NULL for uploads
        size_bytes      INTEGER NOT NULL,
        status          TEXT NOT NULL,
        failure_reason  TEXT,
        progress        REAL NOT NULL DEFAULT 0,
        parser_version  INTEGER,
        chunker_version INTEGER,
        vector_identity TEXT,
        vector_dim      INTEGER,
        chunk_count     INTEGER NOT NULL DEFAULT 0,
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        indexed_at      REAL
    )
    """,
    # Uploads de-duplicate on content within a collection; repository documents
    # are identified by their path, so identical bytes at two paths stay two rows.
    """
    CREATE UNIQUE INDEX document_upload_content
        ON document(collection_id, content_hash) WHERE source_path IS NULL
    """,
    """
    CREATE UNIQUE INDEX document_source_path
        ON document(collection_id, source_path) WHERE source_path IS NOT NULL
    """,
    "CREATE INDEX document_status ON document(status)",
    """
    CREATE TABLE status_history (
        id          INTEGER PRIMARY KEY,
        document_id TEXT NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        status      TEXT NOT NULL,
        reason      TEXT,
        at          REAL NOT NULL
    )
    """,
    "CREATE INDEX status_history_document ON status_history(document_id, id)",
    """
    CREATE TABLE section (
        id           INTEGER PRIMARY KEY,
        document_id  TEXT NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        ordinal      INTEGER NOT NULL,
        heading_path TEXT NOT NULL,
        level        INTEGER NOT NULL,
        start_offset INTEGER NOT NULL,
        end_offset   INTEGER NOT NULL,
        page         INTEGER
    )
    """,
    "CREATE INDEX section_document ON section(document_id, ordinal)",
    # AUTOINCREMENT: chunk ids label ANN index entries and must never be reused.
    """
    CREATE TABLE chunk (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        chunk_uid      TEXT NOT NULL UNIQUE,
        document_id    TEXT NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        section_id     INTEGER REFERENCES section(id) ON DELETE SET NULL,
        collection_id  TEXT NOT NULL,
        ordinal        INTEGER NOT NULL,
        content        TEXT NOT NULL,
        content_hash   TEXT NOT NULL,           -- hash of the contextual (embedded) text
        heading_path   TEXT NOT NULL DEFAULT '',
        source_path    TEXT NOT NULL DEFAULT '',
        symbol         TEXT NOT NULL DEFAULT '',
        kind           TEXT NOT NULL DEFAULT 'prose',
        language       TEXT,
        page           INTEGER,
        start_offset   INTEGER NOT NULL,
        end_offset     INTEGER NOT NULL,
        token_estimate INTEGER NOT NULL
    )
    """,
    "CREATE INDEX chunk_document ON chunk(document_id, ordinal)",
    "CREATE INDEX chunk_content_hash ON chunk(content_hash)",
    """
    CREATE TABLE vector (
        chunk_id  INTEGER PRIMARY KEY REFERENCES chunk(id) ON DELETE CASCADE,
        identity  TEXT NOT NULL,
        dim       INTEGER NOT NULL,
        embedding BLOB NOT NULL                 -- float32, little-endian, dim values
    )
    """,
    "CREATE INDEX vector_identity ON vector(identity, dim)",
    # External-content FTS5 over the chunk table; the triggers keep it in step,
    # including rows removed by ON DELETE CASCADE.
    """
    CREATE VIRTUAL TABLE chunk_fts USING fts5(
        source_path, heading_path, symbol, content,
        collection_id UNINDEXED, document_id UNINDEXED,
        content='chunk', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER chunk_ai AFTER INSERT ON chunk BEGIN
        INSERT INTO chunk_fts(rowid, source_path, heading_path, symbol, content,
                              collection_id, document_id)
        VALUES (new.id, new.source_path, new.heading_path, new.symbol, new.content,
                new.collection_id, new.document_id);
    END
    """,
    """
    CREATE TRIGGER chunk_ad AFTER DELETE ON chunk BEGIN
        INSERT INTO chunk_fts(chunk_fts, rowid, source_path, heading_path, symbol, content,
                              collection_id, document_id)
        VALUES ('delete', old.id, old.source_path, old.heading_path, old.symbol, old.content,
                old.collection_id, old.document_id);
    END
    """,
]
