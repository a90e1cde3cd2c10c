"""The spec: one model per section of ``night.toml``, parsed and checked before anything is
written."""
