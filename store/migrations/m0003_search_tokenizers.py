"""The lexical arm's tokenizers: Porter stemming for words, trigrams for CJK.

``chunk_fts`` is rebuilt with the Porter stemmer in front of unicode61 so a
query for "bearings" finds "bearing" (measured on Cranfield and CISI: nDCG@10
up by about .02 to .03). unicode61 keeps a run of CJK characters as one token,
so 東京 would never match inside 東京都に住んでいます: ``chunk_cjk`` indexes
the trigrams of the chunks that contain Han, kana or Hangul (and only those),
contentless, kept in step by triggers like ``chunk_fts``.
"""

from store.fts_match import CJK_GLOB

NAME = "search_tokenizers"

STATEMENTS = [
    "DROP TRIGGER IF EXISTS chunk_ai",
    "DROP TRIGGER IF EXISTS chunk_ad",
    "DROP TABLE IF EXISTS chunk_fts",
    """
    CREATE VIRTUAL TABLE chunk_fts USING fts5(
        source_path, heading_path, symbol, content,
        collection_id UNINDEXED, document_id UNINDEXED,
        content='chunk', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    "INSERT INTO chunk_fts(chunk_fts) VALUES ('rebuild')",
    """
    CREATE VIRTUAL TABLE chunk_cjk USING fts5(
        content, content='', tokenize='trigram'
    )
    """,
    f"""
    INSERT INTO chunk_cjk(rowid, content)
        SELECT id, content FROM chunk WHERE content GLOB '{CJK_GLOB}'
    """,
    f"""
    CREATE TRIGGER chunk_ai AFTER INSERT ON chunk BEGIN
        INSERT INTO chunk_fts(rowid, source_path, heading_path, symbol, content,
                              collection_id, document_id)
        VALUES (new.id, new.source_path, new.heading_path, new.symbol, new.content,
                new.collection_id, new.document_id);
        INSERT INTO chunk_cjk(rowid, content)
            SELECT new.id, new.content WHERE new.content GLOB '{CJK_GLOB}';
    END
    """,
    f"""
    CREATE TRIGGER chunk_ad AFTER DELETE ON chunk BEGIN
        INSERT INTO chunk_fts(chunk_fts, rowid, source_path, heading_path, symbol, content,
                              collection_id, document_id)
        VALUES ('delete', old.id, old.source_path, old.heading_path, old.symbol, old.content,
                old.collection_id, old.document_id);
        INSERT INTO chunk_cjk(chunk_cjk, rowid, content)
            SELECT 'delete', old.id, old.content WHERE old.content GLOB '{CJK_GLOB}';
    END
    """,
]
