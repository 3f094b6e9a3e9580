"""The drain sweep reads the oldest Pending documents on every free slot: an
index in that order keeps it from sorting the whole backlog each time."""

NAME = "pending_order"

STATEMENTS = [
    "CREATE INDEX document_status_created ON document(status, created_at, id)",
    "DROP INDEX document_status",
]
