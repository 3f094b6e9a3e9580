"""The first PostgreSQL schema: the SQLite catalog as of its migrations 0001-0006,
the encrypted blobs, the lexical index with its BM25 statistics, and vectors.

Mirrored from SQLite (same tables, columns and meanings; REAL times stay
seconds since the epoch, BLOBs are ``bytea``): ``node_meta``, ``collection``,
``document`` (with ``source_id``), ``status_history``, ``section``, ``chunk``,
``source``, ``source_file``, ``removed_document``; SQLite's ``vector`` is
``chunk_vector`` (pgvector's type is called ``vector``).

What differs, and why:

- ``chunk.search_vector``: the weighted ``tsvector`` of the four columns FTS5
  indexes, path (A), heading (B), symbol (C) and body (D), written by
  :mod:`store.postgres.lexical` from the same tokens FTS5's ``porter unicode61
  remove_diacritics 2`` makes. ``column_tokens`` holds each column's token
  count (BM25's document length is their sum, ``token_count``).
- ``lexeme_stat`` and ``lexical_total``: the BM25 statistics (how many chunks
  hold each lexeme; how many chunks and tokens there are), kept in step by
  statement triggers on ``chunk``, so every path that adds or deletes chunks
  (cascades included) keeps them right. The triggers take one transaction
  lock first: two index commits touching the same lexemes would otherwise
  lock their rows in different orders and deadlock.
- CJK: ``has_cjk`` marks chunks holding Han, kana or Hangul; a pg_trgm index
  over their text answers substring matches (the SQLite ``chunk_cjk`` table).
- ``chunk_vector.embedding`` is pgvector's ``vector`` of any width, with the
  chunk's collection and document beside it for filtered searches; one HNSW index per identity and
  width is made on first use (``vector_index`` lists them).
- ``blob`` and ``blob_segment``: the encrypted sources in the database, one row
  per 64 KiB segment (the ``store.blobs`` format).
- ``removed_document`` is filled by a trigger as in SQLite.
"""

NAME = "initial"

# pg_advisory_xact_lock key that serialises updates of the lexical statistics ("kbtu" "i-lx").
LEXICON_LOCK = 0x6B627475_692D6C78

STATEMENTS = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    """
    CREATE TABLE node_meta (
        key   text PRIMARY KEY,
        value bytea NOT NULL
    )
    """,
    """
    CREATE TABLE collection (
        id         text PRIMARY KEY,
        created_at double precision NOT NULL
    )
    """,
    """
    CREATE TABLE source (
        id                text PRIMARY KEY,
        kind              text NOT NULL,             -- folder | file | git
        collection_id     text NOT NULL REFERENCES collection(id),
        name              bytea NOT NULL,            -- sealed (store.blobs.seal_name)
        root_path         bytea NOT NULL,            -- sealed
        root_digest       text NOT NULL,             -- keyed hash of the root path
        include_sensitive integer NOT NULL DEFAULT 0,
        watching          integer NOT NULL DEFAULT 1,
        watch_state       text,                      -- events | polling, while a node watches it
        created_at        double precision NOT NULL,
        last_scan_at      double precision,
        last_scan_status  text,                      -- completed | incomplete | failed
        last_scan_report  bytea,                     -- sealed JSON
        last_commit       text,                      -- git: HEAD when last scanned
        UNIQUE (root_digest, collection_id)
    )
    """,
    """
    CREATE TABLE document (
        id              text PRIMARY KEY,
        collection_id   text NOT NULL REFERENCES collection(id),
        content_hash    text NOT NULL,
        display_name    bytea NOT NULL,              -- sealed (store.blobs.seal_name)
        format          text NOT NULL,
        source_path     text,                        -- relative path within its source; NULL for uploads
        source_id       text,                        -- the owning source (no foreign key, as in SQLite)
        size_bytes      bigint NOT NULL,
        status          text NOT NULL,
        failure_reason  text,
        progress        double precision NOT NULL DEFAULT 0,
        parser_version  integer,
        chunker_version integer,
        vector_identity text,
        vector_dim      integer,
        chunk_count     integer NOT NULL DEFAULT 0,
        created_at      double precision NOT NULL,
        updated_at      double precision NOT NULL,
        indexed_at      double precision
    )
    """,
    """
    CREATE UNIQUE INDEX document_upload_content
        ON document(collection_id, content_hash) WHERE source_path IS NULL
    """,
    """
    CREATE UNIQUE INDEX document_source_file
        ON document(source_id, source_path) WHERE source_id IS NOT NULL
    """,
    """
    CREATE UNIQUE INDEX document_loose_path
        ON document(collection_id, source_path) WHERE source_path IS NOT NULL AND source_id IS NULL
    """,
    "CREATE INDEX document_status_created ON document(status, created_at, id)",
    """
    CREATE TABLE status_history (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        document_id text NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        status      text NOT NULL,
        reason      text,
        at          double precision NOT NULL
    )
    """,
    "CREATE INDEX status_history_document ON status_history(document_id, id)",
    """
    CREATE TABLE section (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        document_id  text NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        ordinal      integer NOT NULL,
        heading_path text NOT NULL,
        level        integer NOT NULL,
        start_offset integer NOT NULL,
        end_offset   integer NOT NULL,
        page         integer
    )
    """,
    "CREATE INDEX section_document ON section(document_id, ordinal)",
    # A sequence never hands out a value twice: chunk ids are never reused.
    """
    CREATE TABLE chunk (
        id             bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        chunk_uid      text NOT NULL UNIQUE,
        document_id    text NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        section_id     bigint REFERENCES section(id) ON DELETE SET NULL,
        collection_id  text NOT NULL,
        ordinal        integer NOT NULL,
        content        text NOT NULL,
        content_hash   text NOT NULL,                -- hash of the contextual (embedded) text
        heading_path   text NOT NULL DEFAULT '',
        source_path    text NOT NULL DEFAULT '',
        symbol         text NOT NULL DEFAULT '',
        kind           text NOT NULL DEFAULT 'prose',
        language       text,
        page           integer,
        start_offset   integer NOT NULL,
        end_offset     integer NOT NULL,
        token_estimate integer NOT NULL,
        search_vector  tsvector NOT NULL,            -- path A, heading B, symbol C, body D
        column_tokens  integer[] NOT NULL,           -- tokens of path, heading, symbol, body
        token_count    integer GENERATED ALWAYS AS
                       (column_tokens[1] + column_tokens[2] + column_tokens[3] + column_tokens[4]) STORED,
        has_cjk        boolean NOT NULL,
        CHECK (cardinality(column_tokens) = 4)
    ) WITH (toast_tuple_target = 8160)
    """,
    # The search vector stays in the row, uncompressed: every matching row's is read to
    # score it, and a detoasted one cost ten times more (benchmarks/search_postgres.py).
    "ALTER TABLE chunk ALTER COLUMN search_vector SET STORAGE EXTERNAL",
    "CREATE INDEX chunk_document ON chunk(document_id, ordinal)",
    "CREATE INDEX chunk_content_hash ON chunk(content_hash)",
    "CREATE INDEX chunk_search ON chunk USING gin (search_vector)",
    "CREATE INDEX chunk_cjk ON chunk USING gin (content gin_trgm_ops) WHERE has_cjk",
    "CREATE INDEX chunk_cjk_newest ON chunk(id) WHERE has_cjk",
    """
    CREATE TABLE chunk_vector (
        chunk_id      bigint PRIMARY KEY REFERENCES chunk(id) ON DELETE CASCADE,
        collection_id text NOT NULL,                 -- the chunk's (never changes), for filtered index scans
        document_id   text NOT NULL,                 -- the chunk's: visibility without joining chunk
        identity      text NOT NULL,
        dim           integer NOT NULL,
        embedding     vector NOT NULL,
        CHECK (vector_dims(embedding) = dim)
    )
    """,
    "CREATE INDEX chunk_vector_identity ON chunk_vector(identity, dim, collection_id, chunk_id)",
    """
    CREATE TABLE vector_index (
        identity   text NOT NULL,
        dim        integer NOT NULL,
        name       text NOT NULL UNIQUE,
        created_at double precision NOT NULL,
        PRIMARY KEY (identity, dim)
    )
    """,
    """
    CREATE TABLE source_file (
        document_id text PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        size        bigint NOT NULL,
        mtime_ns    bigint NOT NULL,
        ctime_ns    bigint NOT NULL,
        inode       bigint NOT NULL,
        device      bigint NOT NULL,
        checked_ns  bigint NOT NULL
    )
    """,
    """
    CREATE TABLE removed_document (
        id         text PRIMARY KEY,
        removed_at double precision NOT NULL
    )
    """,
    """
    CREATE FUNCTION document_removed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO removed_document(id, removed_at) VALUES (OLD.id, extract(epoch FROM clock_timestamp()))
            ON CONFLICT (id) DO UPDATE SET removed_at = EXCLUDED.removed_at;
        RETURN NULL;
    END $$
    """,
    "CREATE TRIGGER document_removed AFTER DELETE ON document FOR EACH ROW EXECUTE FUNCTION document_removed()",
    # Document ids are never reused; should one come back, it is no orphan.
    """
    CREATE FUNCTION document_restored() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM removed_document WHERE id = NEW.id;
        RETURN NULL;
    END $$
    """,
    "CREATE TRIGGER document_restored AFTER INSERT ON document FOR EACH ROW EXECUTE FUNCTION document_restored()",
    """
    INSERT INTO node_meta(key, value)
        VALUES ('vector_index_epoch', convert_to(md5(random()::text || clock_timestamp()::text), 'UTF8'))
    """,
    # -- the encrypted sources (store.postgres.blobs)
    """
    CREATE TABLE blob (
        id         text PRIMARY KEY,
        header     bytea NOT NULL,                   -- MAGIC | version | segment size | salt | nonce prefix
        size       bigint NOT NULL,                  -- plaintext bytes
        segments   integer NOT NULL,
        created_at double precision NOT NULL
    )
    """,
    """
    CREATE TABLE blob_segment (
        blob_id text NOT NULL REFERENCES blob(id) ON DELETE CASCADE,
        counter integer NOT NULL,
        record  bytea NOT NULL,                      -- AES-GCM(segment) with its tag
        PRIMARY KEY (blob_id, counter)
    )
    """,
    # -- BM25 statistics of the lexical index, kept by triggers on chunk
    """
    CREATE TABLE lexeme_stat (
        lexeme text PRIMARY KEY,
        chunks bigint NOT NULL                        -- chunks holding it (its document frequency)
    )
    """,
    """
    CREATE TABLE lexical_total (
        id         boolean PRIMARY KEY DEFAULT true CHECK (id),
        chunks     bigint NOT NULL,
        tokens     bigint NOT NULL,                   -- over all four columns of every chunk
        cjk_chunks bigint NOT NULL,
        cjk_chars  bigint NOT NULL
    )
    """,
    "INSERT INTO lexical_total(chunks, tokens, cjk_chunks, cjk_chars) VALUES (0, 0, 0, 0)",
    f"""
    CREATE FUNCTION chunk_lexicon_added() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock({LEXICON_LOCK});
        INSERT INTO lexeme_stat AS s (lexeme, chunks)
            SELECT l.lexeme, count(*) FROM added, unnest(tsvector_to_array(added.search_vector)) AS l(lexeme)
            GROUP BY l.lexeme ORDER BY l.lexeme
            ON CONFLICT (lexeme) DO UPDATE SET chunks = s.chunks + EXCLUDED.chunks;
        UPDATE lexical_total SET
            chunks = chunks + (SELECT count(*) FROM added),
            tokens = tokens + (SELECT coalesce(sum(token_count), 0) FROM added),
            cjk_chunks = cjk_chunks + (SELECT count(*) FROM added WHERE has_cjk),
            cjk_chars = cjk_chars + (SELECT coalesce(sum(char_length(content)), 0) FROM added WHERE has_cjk);
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION chunk_lexicon_removed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock({LEXICON_LOCK});
        WITH gone AS (
            SELECT l.lexeme, count(*) AS n FROM removed, unnest(tsvector_to_array(removed.search_vector)) AS l(lexeme)
            GROUP BY l.lexeme
        )
        UPDATE lexeme_stat AS s SET chunks = s.chunks - gone.n FROM gone WHERE s.lexeme = gone.lexeme;
        DELETE FROM lexeme_stat WHERE chunks <= 0;
        UPDATE lexical_total SET
            chunks = chunks - (SELECT count(*) FROM removed),
            tokens = tokens - (SELECT coalesce(sum(token_count), 0) FROM removed),
            cjk_chunks = cjk_chunks - (SELECT count(*) FROM removed WHERE has_cjk),
            cjk_chars = cjk_chars - (SELECT coalesce(sum(char_length(content)), 0) FROM removed WHERE has_cjk);
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER chunk_lexicon_added AFTER INSERT ON chunk REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION chunk_lexicon_added()
    """,
    """
    CREATE TRIGGER chunk_lexicon_removed AFTER DELETE ON chunk REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION chunk_lexicon_removed()
    """,
    # Chunk rows are written once and replaced whole; an update would bypass the statistics.
    """
    CREATE FUNCTION chunk_unchanged() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'chunk rows are replaced, never updated in their indexed columns';
    END $$
    """,
    """
    CREATE TRIGGER chunk_unchanged BEFORE UPDATE OF search_vector, column_tokens, content ON chunk
        FOR EACH ROW EXECUTE FUNCTION chunk_unchanged()
    """,
]
