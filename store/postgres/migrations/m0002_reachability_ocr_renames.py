"""What the SQLite catalog gained in its migrations 0007 and 0008, and renames.

- Source reachability (SQLite 0007): a source remembers the device and inode
  of the directory it was registered at, and why it cannot be seen now
  (``unreachable_reason`` since ``unreachable_since``); each document a scan
  could not prove gone is listed in ``unreachable_document`` with a reason.
- OCR (SQLite 0008): ``document_extraction`` records the parser version of a
  document's last extraction, ``ocr_page`` each page OCR ran on.
- A rename moves a document's chunks to another path without extracting or
  embedding again, so a chunk's path column (and its ``tsvector``) is updated
  in place: the statistics triggers now follow updates too (old rows out,
  new rows in, under the same lock), instead of refusing them.
"""

from store.postgres.migrations.m0001_initial import LEXICON_LOCK

NAME = "reachability_ocr_renames"

STATEMENTS = [
    "ALTER TABLE source ADD COLUMN root_device bigint",
    "ALTER TABLE source ADD COLUMN root_inode bigint",
    "ALTER TABLE source ADD COLUMN unreachable_reason text",  # root_missing | root_replaced | root_empty
    "ALTER TABLE source ADD COLUMN unreachable_since double precision",
    """
    CREATE TABLE unreachable_document (
        document_id text PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        source_id   text NOT NULL,
        reason      text NOT NULL,   -- root_replaced | root_empty | folder_unreadable | unreadable | other_device
        since       double precision NOT NULL
    )
    """,
    "CREATE INDEX unreachable_document_source ON unreachable_document(source_id)",
    """
    CREATE TABLE document_extraction (
        document_id    text PRIMARY KEY REFERENCES document(id) ON DELETE CASCADE,
        parser_version integer NOT NULL,
        extracted_at   double precision NOT NULL
    )
    """,
    """
    CREATE TABLE ocr_page (
        document_id text NOT NULL REFERENCES document(id) ON DELETE CASCADE,
        page        integer NOT NULL,           -- 1-based; an image file is page 1
        confidence  double precision,           -- mean word confidence 0..1; NULL: no text
        words       integer NOT NULL DEFAULT 0,
        seconds     double precision NOT NULL DEFAULT 0,
        reason      text,                       -- why it gave no text (ocr_no_text, ocr_timeout, ...)
        PRIMARY KEY (document_id, page)
    )
    """,
    "CREATE INDEX document_extraction_at ON document_extraction(extracted_at)",
    "CREATE INDEX document_source ON document(source_id) WHERE source_id IS NOT NULL",
    "DROP TRIGGER chunk_unchanged ON chunk",
    "DROP FUNCTION chunk_unchanged()",
    f"""
    CREATE FUNCTION chunk_lexicon_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock({LEXICON_LOCK});
        WITH before AS (
            SELECT l.lexeme, -count(*) AS n FROM removed, unnest(tsvector_to_array(removed.search_vector)) AS l(lexeme)
            GROUP BY l.lexeme
        ), after AS (
            SELECT l.lexeme, count(*) AS n FROM added, unnest(tsvector_to_array(added.search_vector)) AS l(lexeme)
            GROUP BY l.lexeme
        ), change AS (
            SELECT lexeme, sum(n) AS n FROM (SELECT * FROM before UNION ALL SELECT * FROM after) AS both_sides
            GROUP BY lexeme HAVING sum(n) <> 0
        )
        INSERT INTO lexeme_stat AS s (lexeme, chunks)
            SELECT lexeme, n FROM change ORDER BY lexeme
            ON CONFLICT (lexeme) DO UPDATE SET chunks = s.chunks + EXCLUDED.chunks;
        DELETE FROM lexeme_stat WHERE chunks <= 0;
        UPDATE lexical_total SET
            tokens = tokens + (SELECT coalesce(sum(token_count), 0) FROM added)
                            - (SELECT coalesce(sum(token_count), 0) FROM removed),
            cjk_chunks = cjk_chunks + (SELECT count(*) FROM added WHERE has_cjk)
                                    - (SELECT count(*) FROM removed WHERE has_cjk),
            cjk_chars = cjk_chars + (SELECT coalesce(sum(char_length(content)), 0) FROM added WHERE has_cjk)
                                  - (SELECT coalesce(sum(char_length(content)), 0) FROM removed WHERE has_cjk);
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER chunk_lexicon_changed AFTER UPDATE ON chunk
        REFERENCING OLD TABLE AS removed NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION chunk_lexicon_changed()
    """,
]
