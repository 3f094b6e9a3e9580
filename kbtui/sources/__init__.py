"""Importing a registered local Git repository: a safe walk, skip rules, limits,
and an incremental import keyed by collection + normalised relative path."""
