"""The live panel: where a night stands, drawn from its files.

``overnight run`` shows it on a terminal while the night runs; ``overnight status`` shows the
same panel for a run started elsewhere. It reads only what the run writes (checkpoint, spend
journal, trace, result, the outage going on), so watching never disturbs the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from overnight.cli.status import (
    bands_text,
    drift_text,
    elapsed_text,
    has_money,
    outage_text,
    spent_text,
)
from overnight.core.text import printable

BANDS = ((0.70, "notice"), (0.90, "no new task"), (0.92, "enforced"))
BAR = 50


def last_event(trace: Path, max_bytes: int = 16_384) -> dict[str, Any] | None:
    """The newest complete line of the trace (read from its end, whatever its size)."""
    try:
        with open(trace, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            lines = f.read().splitlines()
    except OSError:
        return None
    for raw in reversed(lines):
        try:
            record: dict[str, Any] = json.loads(raw)
            return record
        except ValueError:
            continue
    return None


def spend_bar(spent: float, cap: float) -> Text:
    share = spent / cap if cap > 0 else 0.0
    filled = min(BAR, round(share * BAR))
    marks = {int(f * BAR): "|" for f, _ in BANDS}
    bar = Text()
    for i in range(BAR):
        if i < filled:
            style = "red" if share >= 0.9 else "yellow" if share >= 0.7 else "green"
            bar.append("█", style=style)
        else:
            bar.append(marks.get(i, "·"), style="dim")
    bar.append(f"  ${spent:.4f} of ${cap:.2f} ({100 * share:.0f}%)")
    return bar


def render_panel(status: dict[str, Any], event: str | None = None) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    state = str(status.get("state", "?"))
    if "stop_reason" in status:
        state = f"{state}: {status['stop_reason']} (exit {status.get('exit_code')})"
    table.add_row("run", f"{status.get('run_id')}  {state}")
    outage = outage_text(status)
    if outage is not None:
        table.add_row("model", Text(printable(outage), style="bold red"))
    if not has_money(status):
        table.add_row("money", "none (a night without a model spends no money)")
    elif status.get("spent_usd") is not None and status.get("cap_usd"):
        table.add_row("spend", spend_bar(float(status["spent_usd"]), float(status["cap_usd"])))
        if status.get("wrapup_usd"):
            table.add_row("", f"the closing summary's ${float(status['wrapup_usd']):.4f} included")
        table.add_row("", Text(bands_text(status), style="dim"))
    elif status.get("spent_usd") is not None:
        table.add_row("spend", spent_text(status))
    tasks = status.get("tasks")
    if tasks:
        table.add_row(
            "tasks",
            f"{len(tasks['done'])} done, {len(tasks['parked'])} parked, "
            f"{len(tasks['remaining'])} remaining, {len(tasks['pruned'])} pruned",
        )
        table.add_row("in flight", str(tasks.get("in_progress") or "-"))
        table.add_row("drift", drift_text(status))
        table.add_row("elapsed", elapsed_text(status))
    if event:
        table.add_row("last", Text(printable(event)))
    return Panel(Group(table), title="overnight", border_style="cyan")
