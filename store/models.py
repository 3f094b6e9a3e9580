"""peewee models over the tables created in ``store/migrations``."""

from __future__ import annotations

from peewee import (
    AutoField,
    BlobField,
    FloatField,
    ForeignKeyField,
    IntegerField,
    Model,
    TextField,
)

from store.db import database
from store.records import NON_TERMINAL, Status

# Re-exported: the store's own modules name them from here.
__all__ = ["NON_TERMINAL", "Status"]


# Which documents search may serve, as a condition on the document alias ``d``.
# Chunk rows only ever exist for a committed index (written by one atomic
# transaction), so a document being re-indexed keeps serving its previous
# index until the new one commits; a Failed document serves nothing.
SERVED_DOCUMENT_SQL = "d.status <> 'Failed'"


class BaseModel(Model):
    class Meta:
        database = database
        legacy_table_names = False


class NodeMeta(BaseModel):
    key = TextField(primary_key=True)
    value = BlobField()


class Collection(BaseModel):
    id = TextField(primary_key=True)
    created_at = FloatField()


class Document(BaseModel):
    id = TextField(primary_key=True)
    collection = ForeignKeyField(Collection, column_name="collection_id", backref="documents")
    content_hash = TextField()
    display_name = BlobField()
    format = TextField()
    source_path = TextField(null=True)  # relative path within its source (or an eval id); None for uploads
    source_id = TextField(null=True)  # the source that owns it (store.sources), if any
    size_bytes = IntegerField()
    status = TextField()
    failure_reason = TextField(null=True)
    progress = FloatField(default=0.0)
    parser_version = IntegerField(null=True)
    chunker_version = IntegerField(null=True)
    vector_identity = TextField(null=True)
    vector_dim = IntegerField(null=True)
    chunk_count = IntegerField(default=0)
    created_at = FloatField()
    updated_at = FloatField()
    indexed_at = FloatField(null=True)


class StatusHistory(BaseModel):
    id = AutoField()
    document = ForeignKeyField(Document, column_name="document_id", on_delete="CASCADE")
    status = TextField()
    reason = TextField(null=True)
    at = FloatField()


class Section(BaseModel):
    id = AutoField()
    document = ForeignKeyField(Document, column_name="document_id", on_delete="CASCADE")
    ordinal = IntegerField()
    heading_path = TextField()
    level = IntegerField()
    start_offset = IntegerField()
    end_offset = IntegerField()
    page = IntegerField(null=True)


class Chunk(BaseModel):
    id = AutoField()
    chunk_uid = TextField(unique=True)
    document = ForeignKeyField(Document, column_name="document_id", on_delete="CASCADE")
    section = ForeignKeyField(Section, column_name="section_id", null=True, on_delete="SET NULL")
    collection_id = TextField()
    ordinal = IntegerField()
    content = TextField()
    content_hash = TextField()
    heading_path = TextField(default="")
    source_path = TextField(default="")
    symbol = TextField(default="")
    kind = TextField(default="prose")
    language = TextField(null=True)
    page = IntegerField(null=True)
    start_offset = IntegerField()
    end_offset = IntegerField()
    token_estimate = IntegerField()


class Vector(BaseModel):
    chunk = ForeignKeyField(Chunk, column_name="chunk_id", primary_key=True, on_delete="CASCADE")
    identity = TextField()
    dim = IntegerField()
    embedding = BlobField()


ALL_MODELS = [NodeMeta, Collection, Document, StatusHistory, Section, Chunk, Vector]
