"""``overnight``: run, resume, status, report, review, audit, pr, list, clean, demo, init,
check, estimate, calibrate, fleet, reprice, replay, completion, schema.

Exit codes: 0 success, 2 partial, 3 failure, 4 unrecoverable (the run's own verdict);
64 a usage or spec error (nothing was written); 66 a run directory with no result yet.

The arguments are parsed first (``overnight.cli.parser``, which imports nothing heavy); the
module of the command's handler is imported only then, from ``HANDLERS``, so that a command
loads what it uses and no more: ``--version`` and ``--help`` load no product module at all,
``list`` and ``status`` no night.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from overnight.cli.parser import EXIT_USAGE, build_parser
from overnight.cli.pipes import flush_standard_streams, guard_standard_streams
from overnight.core.errors import ConfigError, OvernightError

#: Each command's handler, as ``module:function``: imported when the command runs.
HANDLERS: dict[str, str] = {
    "run": "overnight.cli.handlers:cmd_run",
    "resume": "overnight.cli.handlers:cmd_resume",
    "status": "overnight.cli.glance:cmd_status",
    "report": "overnight.cli.handlers:cmd_report",
    "audit": "overnight.cli.handlers:cmd_audit",
    "review": "overnight.cli.handlers:cmd_review",
    "list": "overnight.cli.listing:cmd_list",
    "clean": "overnight.cli.clean:cmd_clean",
    "demo": "overnight.cli.handlers:cmd_demo",
    "init": "overnight.cli.handlers:cmd_init",
    "check": "overnight.cli.handlers:cmd_check",
    "fleet": "overnight.cli.fleet:cmd_fleet",
    "pr": "overnight.cli.pr:cmd_pr",
    "reprice": "overnight.cli.reprice:cmd_reprice",
    "replay": "overnight.cli.replay:cmd_replay",
    "estimate": "overnight.cli.handlers:cmd_estimate",
    "calibrate": "overnight.cli.handlers:cmd_calibrate",
    "completion": "overnight.cli.completion:cmd_completion",
    "schema": "overnight.cli.schema:cmd_schema",
}

Handler = Callable[[argparse.Namespace], int]


def handler_of(command: str) -> Handler:
    """The handler of ``command``, its module imported now."""
    module, _, name = HANDLERS[command].partition(":")
    handler: Handler = getattr(importlib.import_module(module), name)
    return handler


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # a process of its own: a reader that goes away is not its failure
        guard_standard_streams()
    args = build_parser().parse_args(argv)
    code = dispatch(args)
    flush_standard_streams()
    if args.command == "fleet" and argv is None:
        # The Temporal SDK's native threads can abort the interpreter while it finalizes
        # (exit 134 after a clean run): a fleet command's process ends here, flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def dispatch(args: argparse.Namespace) -> int:
    try:
        return handler_of(args.command)(args)
    except ConfigError as exc:
        print(f"overnight: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OvernightError as exc:  # a run error that escaped the run: never a bare traceback
        print(f"overnight: unrecoverable: {exc}", file=sys.stderr)
        return 4
    except Exception as exc:  # a bug: say so plainly, with the exit code of an unrecoverable end
        print(f"overnight: internal error: {exc!r}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    raise SystemExit(main())
