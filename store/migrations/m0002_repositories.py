"""Registered Git repositories and which documents each import owns."""

NAME = "repositories"

STATEMENTS = [
    # The root path and the operator's label are private: both are sealed with
    # the node key (store.blobs.seal_name). ``root_digest`` is a keyed hash of
    # the root so one folder cannot be registered twice without storing it in
    # the clear.
    """
    CREATE TABLE repository (
        id                 TEXT PRIMARY KEY,
        name               BLOB NOT NULL,
        root_path          BLOB NOT NULL,
        root_digest        TEXT NOT NULL UNIQUE,
        created_at         REAL NOT NULL,
        last_import_at     REAL,
        last_import_status TEXT              -- completed | incomplete | failed
    )
    """,
    # A document imported from a repository. Deleting the document (purge) or
    # unregistering the repository drops the link; the document's identity
    # stays (collection_id, source_path) on the document row itself.
    """
    CREATE TABLE repository_document (
        document_id   TEXT PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        repository_id TEXT NOT NULL REFERENCES repository(id) ON DELETE CASCADE
    )
    """,
    "CREATE INDEX repository_document_repository ON repository_document(repository_id)",
]
