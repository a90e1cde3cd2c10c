"""``overnight fleet ...`` and ``overnight review --database``: the command line of the fleet.

The arguments are declared in ``overnight.cli.parser``; each command imports
``overnight.fleet`` only when it runs, after checking that the ``fleet`` extra is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any


def _database(args: argparse.Namespace) -> str:
    from overnight.core.errors import ConfigError

    url = getattr(args, "database", None) or os.environ.get("OVERNIGHT_DATABASE")
    if not url:
        raise ConfigError(
            "--database", "no fleet database given", "pass --database URL or set OVERNIGHT_DATABASE"
        )
    return str(url)


def _temporal(args: argparse.Namespace) -> str:
    return str(args.temporal or os.environ.get("OVERNIGHT_TEMPORAL") or "localhost:7233")


def _task_queue(args: argparse.Namespace) -> str:
    from overnight.fleet.submission import DEFAULT_TASK_QUEUE

    return str(args.task_queue or DEFAULT_TASK_QUEUE)


def cmd_fleet(args: argparse.Namespace) -> int:
    from overnight.fleet import require_extra

    require_extra()
    command = args.fleet_command
    if command == "worker":
        return _worker(args)
    if command == "submit":
        return _submit(args)
    if command == "schedule":
        return _schedule(args)
    return _report(args, status=command == "status")


def _worker(args: argparse.Namespace) -> int:
    from overnight.core.errors import ConfigError
    from overnight.fleet.worker import serve

    if args.max_nights < 1:
        raise ConfigError("--max-nights", "must be at least 1", "e.g. --max-nights 32")
    if args.usd_per_day is not None and not args.usd_per_day > 0:
        raise ConfigError("--usd-per-day", "must be a positive amount", "e.g. --usd-per-day 50")
    return asyncio.run(
        serve(
            temporal=_temporal(args),
            database=_database(args),
            runs=args.runs,
            task_queue=_task_queue(args),
            namespace=args.namespace,
            max_nights=args.max_nights,
            usd_per_day=args.usd_per_day,
        )
    )


def _submit(args: argparse.Namespace) -> int:
    from overnight.core.errors import ConfigError
    from overnight.fleet.client import retrying, submission_of, submit, wait_for
    from overnight.fleet.worker import connect

    submission = submission_of(args.spec, args.night_id, heartbeat_s=args.heartbeat_s)

    async def go() -> int:
        nonlocal submission
        client = await connect(_temporal(args), args.namespace)
        if args.retry:
            submission = await retrying(client, submission)
        answer = await submit(client, submission, task_queue=_task_queue(args))
        if args.wait:
            try:
                outcome = await wait_for(client, submission.night_id)
            except ConfigError as exc:
                # Refused by the worker (a workspace that is not a repository, say): the same
                # answer `overnight run` gives, with the night's status on stdout.
                answer.update(workflow_status="FAILED", state="refused", refusal=str(exc))
                answer["exit_code"] = 64
                print(json.dumps(answer, sort_keys=True))
                raise
            answer.update(
                workflow_status="COMPLETED",
                stop_reason=outcome.stop_reason,
                status=outcome.status,
                exit_code=outcome.exit_code,
                run_dir=outcome.run_dir,
                deliveries=outcome.deliveries,
            )
        print(json.dumps(answer, sort_keys=True))
        return int(answer.get("exit_code", 0)) if args.wait else 0

    return asyncio.run(go())


SCHEDULE_ACTIONS = ("list", "pause", "resume", "delete")


def _schedule(args: argparse.Namespace) -> int:
    from overnight.core.errors import ConfigError
    from overnight.fleet import schedules
    from overnight.fleet.client import submission_of
    from overnight.fleet.worker import connect

    what = str(args.what)
    if what in SCHEDULE_ACTIONS[1:] and not args.name:
        raise ConfigError("NAME", f"{what} needs the schedule's name", "see `fleet schedule list`")
    submission = None
    if what not in SCHEDULE_ACTIONS:
        if not args.cron:
            raise ConfigError("--cron", "a schedule needs its cron", 'e.g. --cron "0 22 * * 1-5"')
        submission = submission_of(Path(what), args.night_id, heartbeat_s=args.heartbeat_s)
        if not args.night_id:  # the default id carries the day: a schedule's must not
            submission = submission.model_copy(
                update={"night_id": submission.night_id.rsplit("-", 1)[0]}
            )

    async def go() -> Any:
        client = await connect(_temporal(args), args.namespace)
        if submission is not None:
            return await schedules.create(
                client,
                submission,
                str(args.cron),
                task_queue=_task_queue(args),
                buffer_one=args.buffer_one,
            )
        if what == "list":
            return await schedules.listed(client)
        return await schedules.act(client, what, str(args.name))

    print(json.dumps(asyncio.run(go()), sort_keys=True))
    return 0


def _report(args: argparse.Namespace, *, status: bool) -> int:
    from overnight.core.errors import ConfigError
    from overnight.fleet.database import connect_pool, migrate
    from overnight.fleet.fleet_report import (
        build_report,
        links,
        parse_since,
        render_html,
        render_text,
    )

    since = parse_since("1d" if status else args.since)
    pool = connect_pool(_database(args), max_size=2)
    try:
        migrate(pool)
        report = build_report(pool, None if status else since)
        today = build_report(pool, since) if status else report
    finally:
        pool.close()
    if args.json:
        text = report.model_dump_json(indent=2)
    elif not status and args.html:
        text = render_html(report)
    else:
        text = render_text(report, lines=not status)
        if status:
            running = [n for n in report.lines if n.state in ("running", "queued")]
            text += "".join(
                f"\n  {n.night_id}  {n.state}  on {n.worker or '-'}  {n.run_dir}{links(n)}"
                for n in running
            )
            refused = [n for n in report.lines if n.state == "refused"]
            text += "".join(
                f"\n  {n.night_id}  refused: {' '.join((n.refusal or '').split())}{links(n)}"
                for n in refused
            )
            ended = [n for n in today.lines if n.state == "finished"]
            text += "".join(
                f"\n  {n.night_id}  {n.stop_reason}  {n.run_dir}{links(n)}" for n in ended
            )
    out = getattr(args, "out", None)
    if out is not None:
        try:
            Path(out).write_text(text + "\n")
        except OSError as exc:
            raise ConfigError("--out", f"cannot write {out}: {exc.strerror or exc}") from exc
        print(out)
    else:
        sys.stdout.write(text + "\n")
    return 0


def cmd_fleet_review(args: argparse.Namespace) -> int:
    """``overnight review --database URL``: the review queue of every night of the fleet,
    their effects and the resolutions in the fleet database."""
    from overnight.core.errors import ConfigError
    from overnight.effects.review import queue, render, resolve
    from overnight.fleet import require_extra

    require_extra()
    from overnight.fleet.database import connect_pool, migrate
    from overnight.fleet.effects import PostgresEffectStore
    from overnight.fleet.nights import Nights
    from overnight.store.rundir import RunDir

    pool = connect_pool(_database(args), max_size=2)
    try:
        migrate(pool)
        ledger = PostgresEffectStore(pool)
        runs = [RunDir(Path(n.run_dir)) for n in Nights(pool).since(None)]
        runs = [rd for rd in runs if rd.is_run()]
        if args.action == "resolve":
            if not args.item:
                raise ConfigError("ITEM", "resolve needs an item id", "overnight review resolve ID")
            item = resolve(
                None, ledger, args.item, args.note, runs=runs, ledger=ledger, outcome=args.outcome
            )
            print(f"resolved {item.id}: {item.resolved}")
            return 0
        items = queue(None, ledger, include_resolved=args.all, runs=runs, ledger=ledger)
    finally:
        pool.close()
    if args.json:
        print(json.dumps([i.as_dict() for i in items], indent=2, sort_keys=True))
    else:
        print(render(items))
    return 0
