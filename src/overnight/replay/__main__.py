"""``python -m overnight.replay``: record the shipped demo night again (after a harness change
that alters what it asks, which ``overnight replay demo`` then reports)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from overnight import api
from overnight.demo import start_demo
from overnight.replay.run import SHIPPED, save_recording


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="overnight-recording-"))
    # under a long path: a replay under any other asks the same (the harness writes the run's
    # paths relative or as placeholders before it cuts what a model is shown)
    where = base / ("x" * 100)
    try:
        result = api.run(start_demo(where, SHIPPED).night)
        print(f"ending:  {result.stop_reason} ({result.status}, exit {result.exit_code})")
        if result.exit_code != 0:
            return int(result.exit_code)
        target = Path(__file__).parent / "recordings" / SHIPPED
        save_recording(where / "run", target, SHIPPED)
        print(f"recorded the {SHIPPED} demo night into {target}")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
