"""``python -m overnight.replay``: record the shipped demo night again (after a harness change
that alters what it asks, which ``overnight replay demo`` then reports)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from overnight.cli.demo import run_demo
from overnight.replay.run import SHIPPED, save_recording


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="overnight-recording-"))
    # under a long path: a replay under any other asks the same (the harness writes the run's
    # paths relative or as placeholders before it cuts what a model is shown)
    where = base / ("x" * 100)
    try:
        code = run_demo(where, quiet=True, example=SHIPPED)
        if code != 0:
            return code
        target = Path(__file__).parent / "recordings" / SHIPPED
        save_recording(where / "run", target, SHIPPED)
        print(f"recorded the {SHIPPED} demo night into {target}")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
