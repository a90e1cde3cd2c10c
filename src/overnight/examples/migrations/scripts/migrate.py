"""Apply one migration: write schema/<id>.sql."""

import pathlib
import sys

from migrations import MIGRATIONS

number = sys.argv[1]
target = pathlib.Path("schema") / f"{number}.sql"
target.parent.mkdir(exist_ok=True)
target.write_text(MIGRATIONS[number])
print(f"applied {number}")
