"""The goal predicate: every migration is applied exactly as written."""

import pathlib
import sys

from migrations import MIGRATIONS

missing = [
    n
    for n, sql in MIGRATIONS.items()
    if not (pathlib.Path("schema") / f"{n}.sql").exists()
    or (pathlib.Path("schema") / f"{n}.sql").read_text() != sql
]
if missing:
    print("not applied: " + ", ".join(missing))
    sys.exit(1)
print("schema complete")
