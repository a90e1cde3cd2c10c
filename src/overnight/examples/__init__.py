"""Bundled example nights (data files; see each folder's night.toml)."""
