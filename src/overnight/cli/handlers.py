"""``overnight``: run, resume, status, report, review, audit, pr, list, clean, demo, init,
check, estimate, calibrate, fleet.

Exit codes: 0 success, 2 partial, 3 failure, 4 unrecoverable (the run's own verdict);
64 a usage or spec error (nothing was written); 66 a run directory with no result yet.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from overnight import api
from overnight.cli.clean import age_arg, cmd_clean
from overnight.cli.fleet import add_fleet_parser, cmd_fleet, cmd_fleet_review
from overnight.cli.output import Progress, finish_output, progress_line
from overnight.cli.pipes import flush_standard_streams, guard_standard_streams
from overnight.cli.pr import add_pr_parser, cmd_pr
from overnight.cli.replay import add_replay_parser, cmd_replay
from overnight.cli.reprice import add_reprice_parser, cmd_reprice
from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError, OvernightError
from overnight.core.text import printable
from overnight.night.events import event_of
from overnight.night.resolve import resolve
from overnight.store.index import LATEST
from overnight.version import __version__

EXIT_USAGE = 64
EXIT_NO_RESULT = 66


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error, and 2 means PARTIAL here: use 64."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"overnight: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="overnight",
        description="Run an agent night inside a hard budget; exit 0 success, 2 partial, "
        "3 failure, 4 unrecoverable, 64 bad spec or usage.",
    )
    p.add_argument("--version", action="version", version=f"overnight {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="start a night from a spec file")
    run.add_argument("spec", type=Path, help="the night's spec (night.toml)")
    run.add_argument(
        "--run-dir",
        type=Path,
        help="where the run keeps its state "
        "(default: $OVERNIGHT_HOME/runs/<run-id>, OVERNIGHT_HOME=~/.overnight)",
    )
    run.add_argument("--json", action="store_true", help="print result.json to stdout at the end")
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    res = sub.add_parser("resume", help="continue a run after a crash, a kill or a stop")
    res.add_argument(
        "run_dir", nargs="?", default=LATEST, type=_run, metavar="RUN", help=LATEST_HELP
    )
    res.add_argument("--usd", type=float, help="raise (or set) the money cap")
    res.add_argument("--hours", type=float, help="set the wall-clock limit (hours in total)")
    res.add_argument("--steps", type=int, help="set the step limit")
    res.add_argument("--tokens", type=int, help="set the token limit")
    res.add_argument("--json", action="store_true", help="print result.json to stdout at the end")
    res.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    st = sub.add_parser("status", help="where a run stands, running or finished")
    st.add_argument(
        "run_dir", nargs="?", default=LATEST, type=_run, metavar="RUN", help=LATEST_HELP
    )
    st.add_argument("--json", action="store_true", help="machine-readable")
    st.add_argument("--watch", action="store_true", help="keep the panel live until the run ends")

    rep = sub.add_parser(
        "report", help="the terminal result as Markdown, or as one self-contained HTML page"
    )
    rep.add_argument(
        "run_dir", nargs="?", default=LATEST, type=_run, metavar="RUN", help=LATEST_HELP
    )
    rep_format = rep.add_mutually_exclusive_group()
    rep_format.add_argument(
        "--md",
        dest="format",
        action="store_const",
        const="md",
        help="Markdown on stdout (the default)",
    )
    rep_format.add_argument(
        "--html",
        dest="format",
        action="store_const",
        const="html",
        help="one HTML file with inline CSS and SVG plots (default: RUN_DIR/report.html)",
    )
    rep.set_defaults(format="md")
    rep.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write the report here (default: stdout for --md, RUN_DIR/report.html for --html)",
    )

    aud = sub.add_parser(
        "audit", help="recompute a finished run's result from its raw files and the repository"
    )
    aud.add_argument(
        "run_dir", nargs="?", default=LATEST, type=_run, metavar="RUN", help=LATEST_HELP
    )
    aud.add_argument(
        "--no-rerun", action="store_true", help="do not run each verified task's verify again"
    )
    aud.add_argument("--json", action="store_true", help="the whole audit as JSON")

    rev = sub.add_parser(
        "review", help="the human queue: parked tasks, unknown effects, runs a resume cannot fix"
    )
    rev.add_argument("action", nargs="?", choices=("list", "resolve"), default="list")
    rev.add_argument("item", nargs="?", help="with resolve: the item id")
    rev.add_argument("--note", default="", help="with resolve: what was done")
    found = rev.add_mutually_exclusive_group()
    found.add_argument(
        "--happened",
        dest="outcome",
        action="store_const",
        const="happened",
        help="with resolve, for an effect of unknown outcome: it did happen (never made again)",
    )
    found.add_argument(
        "--not-happened",
        dest="outcome",
        action="store_const",
        const="not_happened",
        help="with resolve, for an effect of unknown outcome: it did not happen (may be retried)",
    )
    rev.add_argument(
        "--runs",
        type=_run,
        help="a run (directory or id) or a folder of run directories (default: every run "
        "in the index, $OVERNIGHT_HOME/runs.jsonl, and those under $OVERNIGHT_HOME/runs)",
    )
    rev.add_argument(
        "--db",
        type=Path,
        help="where resolutions are kept (default: $OVERNIGHT_HOME/review.sqlite)",
    )
    rev.add_argument(
        "--database",
        metavar="URL",
        help="a fleet's PostgreSQL database: the review queue of every night of the fleet",
    )
    rev.add_argument("--all", action="store_true", help="include resolved items")
    rev.add_argument("--json", action="store_true", help="machine-readable")

    ls = sub.add_parser("list", help="every run started on this machine, newest last")
    ls.add_argument("--json", action="store_true", help="machine-readable")

    clean = sub.add_parser(
        "clean",
        help="remove the worktrees of runs that ended, and the branches of those that landed "
        "nothing (results and reports stay)",
    )
    clean.add_argument(
        "run_dir", nargs="?", type=_run, metavar="RUN", help=RUN_HELP + " (default: every run)"
    )
    clean.add_argument(
        "--runs",
        type=_run,
        metavar="DIR",
        help="a folder of run directories (default: every run in the index and under "
        "$OVERNIGHT_HOME/runs)",
    )
    clean.add_argument(
        "--all",
        "--force",
        dest="all",
        action="store_true",
        help="also runs that could still be resumed (a resume then has no worktree)",
    )
    clean.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    clean.add_argument(
        "--older-than",
        type=age_arg,
        metavar="AGE",
        help="only runs that ended (or, without a result, started) longer ago: 12h, 30d, 2w",
    )

    demo = sub.add_parser("demo", help="a complete night on a bundled example, no API key")
    demo.add_argument("--dir", type=Path, help="where to put the example (default: a temp dir)")
    demo.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    demo.add_argument(
        "--example",
        choices=("textstats", "migrations"),
        default="textstats",
        help="textstats: an agent fixes two bugs (default); migrations: command tasks",
    )

    ini = sub.add_parser(
        "init", help="write a commented night.toml for a repository, then check it"
    )
    ini.add_argument(
        "dir", nargs="?", type=Path, metavar="DIR", help="the repository (default: here)"
    )
    ini.add_argument("--goal", help="the night's goal (asked on a terminal when left out)")
    ini.add_argument("--budget", type=float, default=10.0, metavar="USD", help="default: 10")
    ini.add_argument("--hours", type=float, default=8.0, metavar="H", help="default: 8")
    ini.add_argument("--model", metavar="NAME", help="the model's name (default per provider)")
    ini.add_argument(
        "--provider",
        choices=("anthropic", "openai", "script"),
        default="anthropic",
        help="anthropic (default), openai, or script: answers from a starter turns.toml "
        "written next to the spec, no key",
    )
    ini.add_argument(
        "--predicate",
        metavar="CMD",
        help="the goal predicate (default: found from the project's tests)",
    )
    ini.add_argument("--force", action="store_true", help="overwrite an existing night.toml")

    chk = sub.add_parser(
        "check", help="every check a night makes before its first model call; spends nothing"
    )
    chk.add_argument("spec", type=Path, help="the night's spec (night.toml)")

    add_fleet_parser(sub)
    add_pr_parser(sub, _run, LATEST_HELP)
    add_reprice_parser(sub, _run, RUN_HELP)
    add_replay_parser(sub, RUN_HELP)

    from overnight.estimate import workload_flags

    est = sub.add_parser(
        "estimate", help="what a night will cost, derived from token counts before it runs"
    )
    est.add_argument(
        "spec",
        nargs="?",
        type=Path,
        help="a night.toml: its [[tasks]], [estimate] table, [model], [prices], agent and run "
        "settings, and the budget.usd the estimate is checked against",
    )
    est.add_argument(
        "--seed-example",
        action="store_true",
        help="the reference night without a spec: 40 tasks x 6 calls, $5/$25 and $3/$15 per MTok",
    )
    est.add_argument("--json", action="store_true", help="the whole derivation as JSON")
    est.add_argument(
        "--from",
        dest="from_runs",
        nargs="+",
        metavar="RUN",
        help="learn from these runs (run directories or ids) instead of the recorded runs of "
        "the spec's workspace",
    )
    est.add_argument(
        "--no-history",
        action="store_true",
        help="ignore recorded runs: the derivation from the spec and the reference night",
    )
    for flag in workload_flags():
        est.add_argument(
            flag.option, dest=flag.dest, type=flag.type, metavar=flag.metavar, help=flag.help
        )
    cal = sub.add_parser(
        "calibrate",
        help="measure the drift judge on hand-labelled queues before trusting its thresholds",
    )
    cal.add_argument("spec", type=Path, help="a night.toml: its [model] is the judge")
    cal.add_argument(
        "--queues",
        type=Path,
        metavar="FILE",
        help="labelled queues as JSON (default: the bundled 10 aligned + 10 drifted)",
    )
    cal.add_argument(
        "--usd", type=float, default=2.0, help="money cap for the judge's calls (default: 2.0)"
    )
    cal.add_argument("--json", action="store_true", help="the whole report as JSON")
    return p


RUN_HELP = "a run directory, or a run id (or its unique start) from `overnight list`"
LATEST_HELP = RUN_HELP + ", or `latest` (the default: the run started last)"


def _run(given: str) -> Path:
    """argparse type of a RUN argument: a directory or an indexed run id."""
    from overnight.store.index import resolve_run

    try:
        return resolve_run(given)
    except ConfigError as exc:
        if "/" in given or Path(given).exists():
            return Path(given)  # a path: the command says what is wrong with it
        raise argparse.ArgumentTypeError(f"{exc.problem} ({exc.fix})") from None


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
        result = api.run(night, on_event=progress)
    return finish_output(result, args.json)


def cmd_resume(args: argparse.Namespace) -> int:
    raises = {k: getattr(args, k) for k in ("usd", "hours", "steps", "tokens")}
    with Progress(args.quiet, run_dir=args.run_dir) as progress:
        result = api.resume(args.run_dir, **raises, on_event=progress)
    return finish_output(result, args.json)


def cmd_status(args: argparse.Namespace) -> int:
    from overnight.cli.status import read_status, render_status

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

    from overnight.cli.panel import last_event, render_panel
    from overnight.cli.status import read_status

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


def cmd_report(args: argparse.Namespace) -> int:
    from overnight.report.facts import read_extras
    from overnight.report.html import render_html
    from overnight.report.markdown import render_markdown
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
    print(render(outcomes))
    return exit_code(outcomes)


def cmd_demo(args: argparse.Namespace) -> int:
    from overnight.cli.demo import run_demo

    return run_demo(args.dir, quiet=args.quiet, example=args.example)


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


def cmd_list(args: argparse.Namespace) -> int:
    from overnight.store.index import indexed_runs
    from overnight.store.rundir import RunDir, is_locked

    rows = []
    for run in indexed_runs():
        rd = RunDir(run.path)
        if not rd.is_run():
            state = "gone"
        elif is_locked(rd):
            state = "running"
        elif rd.result.exists():
            try:
                state = str(json.loads(rd.result.read_text(encoding="utf-8"))["stop_reason"])
            except (OSError, ValueError, KeyError):
                state = "ended (result unreadable)"
        else:
            state = "stopped without a result"
        cleaned = rd.is_run() and not rd.worktree.exists()
        rows.append(
            {
                "run_id": run.run_id,
                "state": state,
                "path": str(run.path),
                "workspace": run.workspace,
                "created_at": run.created_at,
                "cleaned": cleaned,
                "resumable": state not in ("gone", "running") and _resumable(rd.result),
                "replay": _model_source(rd.manifest) == "replay",
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
    elif not rows:
        print("no runs yet")
    else:
        for r in rows:
            mark = " (replay)" if r["replay"] else ""
            mark += " (cleaned)" if r["cleaned"] else ""
            if r["resumable"]:
                mark += f"  resumable: overnight resume {shlex.quote(str(r['path']))}"
            print(printable(f"{r['run_id']}  {r['state']}{mark}\n    {r['path']}"))
    return 0


def _model_source(manifest: Path) -> str:
    """Who answered a run's calls, as its manifest says (``run.json``'s ``model_source``)."""
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8")).get("model_source", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _resumable(result: Path) -> bool:
    """A run a resume can continue: its result says so, or it stopped without one."""
    if not result.exists():
        return True
    try:
        return bool(json.loads(result.read_text(encoding="utf-8")).get("resumable"))
    except (OSError, ValueError, AttributeError):
        return False


COMMANDS = {
    "list": cmd_list,
    "clean": cmd_clean,
    "pr": cmd_pr,
    "run": cmd_run,
    "resume": cmd_resume,
    "status": cmd_status,
    "report": cmd_report,
    "audit": cmd_audit,
    "review": cmd_review,
    "fleet": cmd_fleet,
    "demo": cmd_demo,
    "init": cmd_init,
    "check": cmd_check,
    "calibrate": cmd_calibrate,
    "estimate": cmd_estimate,
    "reprice": cmd_reprice,
    "replay": cmd_replay,
}


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # a process of its own: a reader that goes away is not its failure
        guard_standard_streams()
    args = _parser().parse_args(argv)
    code = _dispatch(args)
    flush_standard_streams()
    if args.command == "fleet" and argv is None:
        # The Temporal SDK's native threads can abort the interpreter while it finalizes
        # (exit 134 after a clean run): a fleet command's process ends here, flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return COMMANDS[args.command](args)
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
