"""``overnight replay RUN``: a recorded night run again offline, answered from its recording."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from overnight.replay import recording_of_run, render_replay, replay, shipped_recording

SHIPPED_NAME = "demo"


def add_replay_parser(sub: Any, run_help: str) -> None:
    p = sub.add_parser(
        "replay",
        help="run a recorded night again against a copy of its workspace, the model answering "
        "from the recording (no key, no money); report the first difference",
    )
    p.add_argument(
        "run_dir",
        metavar="RUN",
        help=f"{run_help}; or `{SHIPPED_NAME}` for the demo night shipped with the package",
    )
    p.add_argument(
        "--into",
        type=Path,
        metavar="DIR",
        help="a new or empty directory for the copy and the replay's run "
        "(default: a temporary one)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable")


def cmd_replay(args: argparse.Namespace) -> int:
    from overnight.store.index import resolve_run

    if args.run_dir == SHIPPED_NAME:
        recording = shipped_recording()
    else:
        recording = recording_of_run(resolve_run(args.run_dir))
    report = replay(recording, args.into)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        sys.stdout.write(render_replay(report))
    return report.exit_code
