"""Hybrid retrieval: lexical (FTS5 BM25) and semantic arms fused by rank."""
