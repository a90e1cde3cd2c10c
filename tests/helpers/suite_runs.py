"""What a night's trace says of the commands it ran: each run of a check by the harness (the
start check, a base record, a verify, a predicate), and the seconds of every command, the
agent's own included, to set against the night's wall time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def trace_events(run_dir: Path) -> list[dict[str, Any]]:
    events = []
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def suite_runs(events: list[dict[str, Any]]) -> list[str]:
    """Each run of a check by the harness, in order: ``start check``, ``base record``,
    ``verify``, ``predicate``. A predicate judged again from a verify's run
    (``from_verify``) ran nothing."""
    runs = []
    for e in events:
        if e.get("tool") == "predicate" and "exit_code" in e:
            if e.get("from_start_check"):
                runs.append("start check")
            elif not e.get("from_verify"):
                runs.append("predicate")
        elif e.get("tool") == "verify" and "exit_code" in e:
            runs.append("verify")
        elif e.get("decision") == "base_tests" and e.get("seconds", 0) > 0:
            runs.append("base record")
    return runs


def command_seconds(events: list[dict[str, Any]]) -> float:
    """The seconds of the commands the night ran: its checks, its set-up and the agent's
    own commands (``run_command``, from its start to its end)."""
    total = 0.0
    for e in events:
        tool = e.get("tool")
        ran = tool in ("predicate", "verify", "setup") and "exit_code" in e
        if (ran and not e.get("from_verify")) or e.get("decision") == "base_tests":
            total += float(e.get("seconds") or 0.0)
        elif tool == "run_command" and "t_start" in e:
            total += float(e["t"]) - float(e["t_start"])
    return total
