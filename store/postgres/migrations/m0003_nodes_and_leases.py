"""Many nodes on one database: the node registry and leases on work.

- ``node``: each node that has run a pipeline (or searched) against this
  database, by the stable id of its data directory, with its host, pid, role,
  model identity, heartbeat and what it has in hand. Times come from the
  server's clock, so machines whose clocks disagree still agree on leases.
- ``document.lease_node`` / ``lease_until``: the node working on a document
  and until when its claim holds without a heartbeat. A document is claimed
  with ``FOR UPDATE SKIP LOCKED``; a stage's write is refused when the lease
  has passed to another node, so no document is indexed twice.
- ``document.indexed_by`` and ``status_history.node``: which node did the work.
- ``source.owner_node``: a watched folder belongs to the node on whose machine
  it lives; other nodes do not scan it.
"""

NAME = "nodes_and_leases"

STATEMENTS = [
    """
    CREATE TABLE node (
        id             text PRIMARY KEY,          -- the data directory's node.id
        host           text NOT NULL,
        pid            integer NOT NULL,
        role           text NOT NULL,             -- pipeline | search
        model_identity text,
        lease_s        double precision NOT NULL,
        started_at     double precision NOT NULL,
        heartbeat_at   double precision NOT NULL,
        stopped_at     double precision,
        in_flight      integer NOT NULL DEFAULT 0
    )
    """,
    "ALTER TABLE document ADD COLUMN lease_node text",
    "ALTER TABLE document ADD COLUMN lease_until double precision",
    "ALTER TABLE document ADD COLUMN indexed_by text",
    "ALTER TABLE status_history ADD COLUMN node text",
    "ALTER TABLE source ADD COLUMN owner_node text",
    # The claimable work, oldest first; the leases a node holds.
    "CREATE INDEX document_work ON document(created_at, id) WHERE status NOT IN ('Indexed', 'Failed')",
    "CREATE INDEX document_lease ON document(lease_node) WHERE lease_node IS NOT NULL",
    "CREATE INDEX document_indexed_at ON document(indexed_at) WHERE indexed_at IS NOT NULL",
]
