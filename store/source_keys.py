"""How a source's private values are kept, whichever store holds them: the
sealing context of its name, root and last scan report, and the keyed digest
that finds a root again without storing the path in the clear."""

from __future__ import annotations

import hashlib
import hmac

SOURCE_KINDS = ("folder", "file", "git")
# Unchanged since the repository table: existing registrations keep their digests.
_ROOT_DIGEST_LABEL = b"kbtui repository root v1|"


def root_digest(node_key: bytes, root: str) -> str:
    """A keyed hash of a root path: equal roots compare equal, the path stays secret."""
    return hmac.new(node_key, _ROOT_DIGEST_LABEL + root.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


# The sealing contexts keep their repository-era names: migrated registrations
# were sealed under them.
def name_context(source_id: str) -> str:
    return f"repository-name:{source_id}"


def root_context(source_id: str) -> str:
    return f"repository-root:{source_id}"


def report_context(source_id: str) -> str:
    return f"source-report:{source_id}"
