"""``overnight schema``: the JSON Schema of ``night.toml`` on stdout, generated from the spec's
models (the same text as the ``night.schema.json`` the package ships and the docs keep)."""

from __future__ import annotations

import argparse
import sys


def cmd_schema(args: argparse.Namespace) -> int:
    # Imported here: the parser and --help stay free of the spec's models.
    from overnight.config.spec_schema import schema_text

    sys.stdout.write(schema_text())
    return 0
