"""``overnight status``: where a run stands, running or finished, read from its files. Light
to start: no night, no model; rich and the panel are imported only for the live panel drawn
on a terminal (or with ``--watch``), the plain lines of ``render_status`` need neither.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from overnight.cli.status import read_status, render_status
from overnight.core.text import printable


def cmd_status(args: argparse.Namespace) -> int:
    status = read_status(args.run_dir)
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
    elif args.watch or sys.stdout.isatty():
        _panel_loop(args.run_dir, watch=args.watch)
    else:
        print(printable(render_status(status)))
    return 0


def _panel_loop(run_dir: Path, *, watch: bool) -> None:
    from rich.console import Console
    from rich.live import Live

    from overnight.cli.output import progress_line
    from overnight.cli.panel import last_event, render_panel
    from overnight.night.events import event_of

    def frame() -> Any:
        event = last_event(run_dir / "trace.jsonl")
        return render_panel(read_status(run_dir), progress_line(event_of(event)) if event else None)

    console = Console()
    if not watch:
        console.print(frame())
        return
    with Live(frame(), console=console, refresh_per_second=2) as live:
        while read_status(run_dir)["state"] == "running":
            time.sleep(0.5)
            live.update(frame())
        live.update(frame())
