"""``overnight replay RUN``: a recorded night run again offline, answered from its recording."""

from __future__ import annotations

import argparse
import json
import sys

from overnight.cli.parser import SHIPPED_NAME
from overnight.replay import recording_of_run, render_replay, replay, shipped_recording


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
