"""The handlers of the commands that run or read a night through the whole product (the
night, the model, the spec): ``overnight run``, ``resume``, ``report``, ``audit``, ``review``,
``init``, ``check``, ``demo``, ``estimate``, ``calibrate``. ``overnight.cli.main`` imports
this module only when one of them runs; the lighter commands have handlers of their own
(``overnight.cli.glance``, ``clean``, ``pr``, ``fleet``, ``reprice``, ``replay``,
``completion``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from overnight import api
from overnight.cli.output import EventStream, Progress, finish_output
from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError
from overnight.core.text import printable
from overnight.night.resolve import resolve
from overnight.store.result import TerminalResult

EXIT_NO_RESULT = 66


def _warn_uncommitted(spec: Any, spec_path: Path) -> None:
    """A night starts from the workspace's committed HEAD: say what it will and will not see
    when the checkout holds uncommitted work."""
    from overnight.cli.uncommitted import uncommitted_note

    note = uncommitted_note(spec, spec_path)
    if note is not None:
        print(printable(note), file=sys.stderr)


def _warn_running(spec: Any) -> None:
    """Two nights may share a workspace, each on its own branch; say so when one is running,
    so that a second start is a choice and not a surprise."""
    from overnight.store.index import running_on

    for run, pid in running_on(spec.workspace_path()):
        held = f" (pid {pid})" if pid else ""
        print(
            printable(
                f"overnight: note: night {run.run_id}{held} is already running on "
                f"{spec.workspace_path()} ({run.path}); this night runs beside it, on its own "
                "branch and worktree. `overnight status "
                f"{run.run_id}` shows where it stands."
            ),
            file=sys.stderr,
        )


def cmd_run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    night = resolve(spec, Path(args.run_dir) if args.run_dir is not None else None)
    try:
        _warn_uncommitted(spec, Path(args.spec))
        _warn_running(spec)
    except BaseException:
        night.close()
        raise
    with Progress(args.quiet) as progress:
        events = EventStream(progress) if args.events == "jsonl" else None
        result = api.run(night, on_event=events or progress)
    return _finish(result, args, events)


def cmd_resume(args: argparse.Namespace) -> int:
    raises = {k: getattr(args, k) for k in ("usd", "hours", "steps", "tokens")}
    with Progress(args.quiet, run_dir=args.run_dir) as progress:
        events = EventStream(progress) if args.events == "jsonl" else None
        result = api.resume(args.run_dir, **raises, on_event=events or progress)
    return _finish(result, args, events)


def _finish(result: TerminalResult, args: argparse.Namespace, events: EventStream | None) -> int:
    """The summary; with ``--events`` stdout holds the events, the result their last line,
    and the summary goes to stderr."""
    if events is None:
        return finish_output(result, args.json)
    events.result(result)
    return finish_output(result, args.json, out=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from overnight.report.facts import read_extras, report_facts
    from overnight.report.html import render_html
    from overnight.report.markdown import render_markdown
    from overnight.report.view import facts_document
    from overnight.store.result import TerminalResult

    path = args.run_dir / "result.json"
    if not (args.run_dir / "run.json").exists():
        raise ConfigError("RUN_DIR", f"{args.run_dir} is not an overnight run directory")
    if not path.exists():
        print(
            f"overnight: {args.run_dir} has no result yet (still running, or killed); "
            f"see `overnight status {args.run_dir}`",
            file=sys.stderr,
        )
        return EXIT_NO_RESULT
    result = TerminalResult.model_validate_json(path.read_text(encoding="utf-8"))
    extras = read_extras(args.run_dir)
    if args.format == "html":
        text, out = render_html(result, extras), args.out or args.run_dir / "report.html"
    elif args.format == "json":
        document = facts_document(report_facts(result, extras))
        text, out = json.dumps(document, indent=2, sort_keys=True) + "\n", args.out
    else:
        text, out = render_markdown(result, extras), args.out
    if out is None:
        sys.stdout.write(text)
        return 0
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError("--out", f"cannot write {out}: {exc.strerror or exc}") from exc
    print(out)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from overnight.audit.audit_text import render_text
    from overnight.audit.run import audit_run

    audit = audit_run(args.run_dir, rerun=not args.no_rerun)
    if args.json:
        print(audit.model_dump_json(indent=2))
    else:
        sys.stdout.write(render_text(audit))
    return audit.exit_code


def cmd_review(args: argparse.Namespace) -> int:
    from overnight.effects.review import queue, render, resolve, review_db

    if args.database:
        from overnight.cli.fleet import cmd_fleet_review  # the fleet's SDKs: only here

        return cmd_fleet_review(args)

    root = args.runs  # None: every indexed run and $OVERNIGHT_HOME/runs
    db = review_db(args.db)
    try:
        if args.action == "resolve":
            if not args.item:
                raise ConfigError("ITEM", "resolve needs an item id", "overnight review resolve ID")
            item = resolve(root, db, args.item, args.note, outcome=args.outcome)
            print(f"resolved {item.id}: {item.resolved}")
            return 0
        items = queue(root, db, include_resolved=args.all)
    finally:
        db.close()
    if args.json:
        print(json.dumps([i.as_dict() for i in items], indent=2, sort_keys=True))
    else:
        print(printable(render(items)))
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from overnight.cli.init import cmd_init as init

    return init(args)


def cmd_check(args: argparse.Namespace) -> int:
    from overnight.cli.check import check_night, exit_code, render

    outcomes = check_night(args.spec)
    code = exit_code(outcomes)
    if args.json:
        checks = [
            {"name": o.name, "status": o.status, "said": o.said, "fix": o.fix} for o in outcomes
        ]
        print(
            json.dumps({"kind": "overnight-check", "checks": checks, "exit_code": code}, indent=2)
        )
    else:
        print(render(outcomes))
    return code


def cmd_demo(args: argparse.Namespace) -> int:
    from overnight.cli.demo import run_demo

    return run_demo(args.dir, quiet=args.quiet, example=args.example, executor=args.executor)


def cmd_estimate(args: argparse.Namespace) -> int:
    from overnight.config.prices import price_for
    from overnight.estimate import (
        SEED_EXAMPLE,
        estimate,
        render_text,
        resolve_workload,
        workload_flags,
    )

    flags = workload_flags()
    overrides = {f.path: getattr(args, f.dest) for f in flags if getattr(args, f.dest) is not None}
    if args.seed_example and args.spec is not None:
        raise ConfigError("--seed-example", "give a spec or --seed-example, not both")
    history: dict[str, Any] | None = None
    if args.spec is not None:
        from overnight.cli.estimate import spec_estimate
        from overnight.estimate.render_learned import render_learned

        spec = load_spec(args.spec)
        found = spec_estimate(spec, overrides, args.from_runs, no_history=args.no_history)
        if found.learned is not None:
            if args.json:
                print(json.dumps(found.learned.as_dict(), indent=2, sort_keys=True))
            else:
                sys.stdout.write(render_learned(found.learned))
            return 0
        assert found.derived is not None
        result = found.derived
        history = {"used": False, "why": found.why}
    else:
        table = SEED_EXAMPLE.model_dump(exclude_none=True) if args.seed_example else {}
        workload = resolve_workload(
            table, overrides, {}, lambda name: price_for(name, "python", {})
        )
        result = estimate(workload)
    if args.json:
        printed = result.as_dict() | ({} if history is None else {"history": history})
        print(json.dumps(printed, indent=2, sort_keys=True))
    else:
        if history is not None and spec.model is not None:
            print(f"No history to learn from ({history['why']}): the derivation from the spec.\n")
        sys.stdout.write(render_text(result))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from overnight.calibration import calibrate_spec, render_text

    report = calibrate_spec(args.spec, args.queues, args.usd)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        sys.stdout.write(render_text(report))
    return report.exit_code
