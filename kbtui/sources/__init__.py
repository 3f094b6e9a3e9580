"""Sources: folders, single files and Git repositories kept in sync with a
collection. One rule set (rules), one safe walk (scan), an incremental sync
keyed by source + normalised relative path (sync), and the watcher a running
node keeps them current with (watch)."""
