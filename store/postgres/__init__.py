"""The PostgreSQL store (``KBTUI_DATABASE_URL=postgresql://...``): catalog, chunks,
vectors (pgvector) and the encrypted blobs, all in one database.

Each module mirrors one module of the SQLite store with the same inputs, result
types and semantics, taking the connection as its first argument instead of
the global SQLite database:

- :mod:`store.postgres.connection`: settings, connecting in bounded time, the
  masked URL, server errors as the store's own errors;
- :mod:`store.postgres.migrations`: the schema, numbered like ``store/migrations``;
- :mod:`store.postgres.keys`: the node key's fingerprint, kept in the database;
- :mod:`store.postgres.blobs`: ``store.blobs.BlobStore`` in chunked rows;
- :mod:`store.postgres.catalog`: the writes that make chunks visible
  (``store.catalog``'s commit, purge and status transitions);
- :mod:`store.postgres.lexical`: ``store.fts`` on full-text search with BM25;
- :mod:`store.postgres.vectors`: ``store.vectors`` and ``store.ann`` on pgvector.
"""
