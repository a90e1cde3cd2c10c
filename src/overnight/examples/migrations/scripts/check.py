"""Verify one migration: 0 applied, 1 not applied, 2 applied wrongly (needs a human)."""

import pathlib
import sys

from migrations import MIGRATIONS

number = sys.argv[1]
target = pathlib.Path("schema") / f"{number}.sql"
if not target.exists():
    print(f"{number}: not applied")
    sys.exit(1)
if target.read_text() != MIGRATIONS[number]:
    print(f"{number}: present but different from the migration")
    sys.exit(2)
print(f"{number}: applied")
