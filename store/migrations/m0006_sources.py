"""Sources: folders, single files and Git repositories, each in one collection.

The ``repository`` table becomes ``source`` (with a ``kind``); a registered
repository keeps its id, sealed name and root, and becomes a Git source of
the collection most of its documents are in (DEFAULT when it imported
nothing). A document's owner moves from the ``repository_document`` link to
``document.source_id``. Documents a repository had imported into other
collections stay, as documents of no source: the next import of that
repository into such a collection adopts them by path instead of adding them
again.

Identity within a source is the relative path (``source_id, source_path``),
so two sources of one collection may both hold a README.md. A path document
of no source (added at a path by eval, or kept when its source was removed)
is still unique per collection and path.

``source_file`` remembers what a file looked like when its bytes were last
read (size, times, inode), so a rescan reads and hashes only the files whose
look changed.
"""

NAME = "sources"

STATEMENTS = [
    """
    CREATE TABLE source (
        id                TEXT PRIMARY KEY,
        kind              TEXT NOT NULL,            -- folder | file | git
        collection_id     TEXT NOT NULL REFERENCES collection(id),
        name              BLOB NOT NULL,            -- sealed (store.blobs.seal_name)
        root_path         BLOB NOT NULL,            -- sealed
        root_digest       TEXT NOT NULL,            -- keyed hash of the root path
        include_sensitive INTEGER NOT NULL DEFAULT 0,
        watching          INTEGER NOT NULL DEFAULT 1,
        watch_state       TEXT,                     -- events | polling, while a node watches it
        created_at        REAL NOT NULL,
        last_scan_at      REAL,
        last_scan_status  TEXT,                     -- completed | incomplete | failed
        last_scan_report  BLOB,                     -- sealed JSON: files added, updated, ... skipped
        last_commit       TEXT,                     -- git: HEAD when last scanned
        UNIQUE (root_digest, collection_id)
    )
    """,
    # A repository that imported nothing becomes a source of DEFAULT, which must exist.
    """
    INSERT OR IGNORE INTO collection(id, created_at)
        SELECT 'DEFAULT', (julianday('now') - 2440587.5) * 86400.0
        WHERE EXISTS (
            SELECT 1 FROM repository r
            WHERE NOT EXISTS (SELECT 1 FROM repository_document rd WHERE rd.repository_id = r.id)
        )
    """,
    """
    INSERT INTO source (id, kind, collection_id, name, root_path, root_digest, created_at,
                        last_scan_at, last_scan_status)
        SELECT r.id, 'git',
               COALESCE((
                   SELECT d.collection_id FROM repository_document rd
                   JOIN document d ON d.id = rd.document_id
                   WHERE rd.repository_id = r.id
                   GROUP BY d.collection_id ORDER BY count(*) DESC, d.collection_id LIMIT 1
               ), 'DEFAULT'),
               r.name, r.root_path, r.root_digest, r.created_at, r.last_import_at, r.last_import_status
        FROM repository r
    """,
    # No foreign key: store.sources removes a source only after purging or
    # releasing its documents (and the column stays droppable).
    "ALTER TABLE document ADD COLUMN source_id TEXT",
    """
    UPDATE document SET source_id = (
        SELECT rd.repository_id FROM repository_document rd
        JOIN source s ON s.id = rd.repository_id
        WHERE rd.document_id = document.id AND s.collection_id = document.collection_id
    )
    WHERE id IN (SELECT document_id FROM repository_document)
    """,
    "DROP INDEX document_source_path",
    """
    CREATE UNIQUE INDEX document_source_file
        ON document(source_id, source_path) WHERE source_id IS NOT NULL
    """,
    """
    CREATE UNIQUE INDEX document_loose_path
        ON document(collection_id, source_path) WHERE source_path IS NOT NULL AND source_id IS NULL
    """,
    """
    CREATE TABLE source_file (
        document_id TEXT PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        size        INTEGER NOT NULL,
        mtime_ns    INTEGER NOT NULL,
        ctime_ns    INTEGER NOT NULL,
        inode       INTEGER NOT NULL,
        device      INTEGER NOT NULL,
        checked_ns  INTEGER NOT NULL               -- when it was read: a change this recent may hide
    )
    """,
    "DROP TABLE repository_document",
    "DROP TABLE repository",
]
