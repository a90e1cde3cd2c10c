"""The reference generated from the code: the ``night.toml`` fields (from the config models'
field docstrings), every command and flag (from the parser), ``result.json`` and the run
directory (from the result models and the run directory's layout), the exit codes (from the
endings' tables), and the JSON Schema of ``night.toml``.

``python -m overnight.reference`` writes them (``docs/reference/*.md``,
``docs/night.schema.json``, the schema shipped in the package); ``--check`` fails naming the
stale ones. The pages say they are generated: they are edited in the code, never by hand.
"""
