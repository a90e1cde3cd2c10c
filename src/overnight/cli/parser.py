"""The whole command line of ``overnight``: every subcommand, its arguments and their help.

Building it imports nothing of the product (no night, no model, no spec, no rich): ``overnight
--version``, ``--help``, a usage error and ``overnight completion`` are answered from here
alone, and ``overnight.cli.main`` imports a command's handler only once the arguments name it.
An argument type that needs more (a RUN resolved through the run index) imports it when it
runs.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from overnight.cli.estimate_flags import WORKLOAD_FLAGS
from overnight.version import __version__

EXIT_USAGE = 64

#: The RUN that names the run started last (``overnight.store.index.LATEST``, which resolves
#: it; a test holds the two equal so that this module need not import the index).
LATEST = "latest"
#: The demo's executors (``overnight.demo.DEMO_EXECUTORS``, which this module may not import:
#: it stays light; a test holds the two equal).
DEMO_EXECUTORS = ("agent", "claude-code", "codex")

RUN_HELP = "a run directory, or a run id (or its unique start) from `overnight list`"
LATEST_HELP = RUN_HELP + ", or `latest` (the default: the run started last)"

#: ``overnight replay demo``: the demo night shipped with the package.
SHIPPED_NAME = "demo"

DATABASE_HELP = "the fleet's PostgreSQL URL (default: $OVERNIGHT_DATABASE)"
TEMPORAL_HELP = (
    "the Temporal frontend HOST:PORT (default: $OVERNIGHT_TEMPORAL, else localhost:7233)"
)

#: The shells ``overnight completion`` writes a script for.
SHELLS = ("bash", "zsh", "fish")

#: What each command's exit code says, shown under its ``--help`` and in the reference.
EXITS: dict[str, str] = {
    "run": "0 / 2 / 3 / 4, the night's ending; 64 for a bad spec or a goal predicate that "
    "cannot run on the base commit",
    "resume": "0 / 2 / 3 / 4, the night's ending; 64 if the run is not resumable",
    "status": "0",
    "report": "0; 66 if the run has no result yet",
    "audit": "0 every check agrees; 3 a disagreement; 64 not a run",
    "review": "0; 64 for an unknown item",
    "list": "0",
    "clean": "0; 64 for one RUN that is running, or resumable without --all, or a bad --older-than",
    "demo": "the night's exit code",
    "init": "the check's exit code; 64 when nothing could be written (no goal, no test "
    "command found, a spec already there without --force)",
    "check": "0 every check passes; 64 the spec must change; 3 the machine lacks what the "
    "spec names",
    "fleet worker": "0",
    "fleet submit": "0; the night's exit code with --wait; 64 for a bad spec",
    "fleet schedule": "0; 64 for a bad spec or schedule",
    "fleet status": "0",
    "fleet report": "0",
    "pr": "0; 3 nothing to propose (no verified commit); 4 the push or gh failed; 64 not a "
    "run; 66 no result yet",
    "reprice": "0; 64 not a run, or a bad flag",
    "replay": "0 the same night; 3 it differs; 64 not a run, or a program it needs is missing",
    "estimate": "0; 64 for a bad spec, flag or value",
    "calibrate": "0 the judge separates the sets; 3 it does not; 4 the provider failed; 64 "
    "bad input",
    "completion": "0; 64 for another shell",
    "schema": "0",
}


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error, and 2 means PARTIAL here: use 64."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"overnight: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def run_arg(given: str) -> Path:
    """argparse type of a RUN argument: a directory or an indexed run id."""
    from overnight.core.errors import ConfigError
    from overnight.store.index import resolve_run

    try:
        return resolve_run(given)
    except ConfigError as exc:
        if "/" in given or Path(given).exists():
            return Path(given)  # a path: the command says what is wrong with it
        raise argparse.ArgumentTypeError(f"{exc.problem} ({exc.fix})") from None


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hdw])\s*$")
_UNIT_SECONDS = {"h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


@dataclass(frozen=True)
class Age:
    seconds: float
    text: str


def age_arg(given: str) -> Age:
    """argparse type of ``--older-than``: ``12h``, ``30d``, ``2w``."""
    found = _AGE.match(given)
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{given!r} is not an age: a number and a unit, h, d or w (12h, 30d, 2w)"
        )
    return Age(float(found.group(1)) * _UNIT_SECONDS[found.group(2)], given.strip())


def ref_name_arg(given: str) -> str:
    """A remote or branch name from the command line: never taken for an option."""
    if not given or given.startswith("-") or any(c.isspace() for c in given):
        raise argparse.ArgumentTypeError(f"{given!r} is not a remote or branch name")
    return given


def build_parser() -> argparse.ArgumentParser:
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
    run.add_argument(
        "--events",
        choices=("jsonl",),
        help="one JSON object per event of the night on stdout (the trace's records, with the "
        "format's version v; the last is the result); the summary then goes to stderr",
    )

    res = sub.add_parser("resume", help="continue a run after a crash, a kill or a stop")
    res.add_argument(
        "run_dir", nargs="?", default=LATEST, type=run_arg, metavar="RUN", help=LATEST_HELP
    )
    res.add_argument("--usd", type=float, help="raise (or set) the money cap")
    res.add_argument("--hours", type=float, help="set the wall-clock limit (hours in total)")
    res.add_argument("--steps", type=int, help="set the step limit")
    res.add_argument("--tokens", type=int, help="set the token limit")
    res.add_argument("--json", action="store_true", help="print result.json to stdout at the end")
    res.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    res.add_argument(
        "--events",
        choices=("jsonl",),
        help="one JSON object per event of the night on stdout (the trace's records, with the "
        "format's version v; the last is the result); the summary then goes to stderr",
    )

    st = sub.add_parser("status", help="where a run stands, running or finished")
    st.add_argument(
        "run_dir", nargs="?", default=LATEST, type=run_arg, metavar="RUN", help=LATEST_HELP
    )
    st.add_argument("--json", action="store_true", help="machine-readable")
    st.add_argument("--watch", action="store_true", help="keep the panel live until the run ends")

    rep = sub.add_parser(
        "report", help="the terminal result as Markdown, or as one self-contained HTML page"
    )
    rep.add_argument(
        "run_dir", nargs="?", default=LATEST, type=run_arg, metavar="RUN", help=LATEST_HELP
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
    rep_format.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="the report's facts as JSON on stdout, every value as both renderings show it",
    )
    rep.set_defaults(format="md")
    rep.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write the report here (default: stdout for --md and --json, RUN_DIR/report.html "
        "for --html)",
    )

    aud = sub.add_parser(
        "audit", help="recompute a finished run's result from its raw files and the repository"
    )
    aud.add_argument(
        "run_dir", nargs="?", default=LATEST, type=run_arg, metavar="RUN", help=LATEST_HELP
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
        type=run_arg,
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
        "run_dir", nargs="?", type=run_arg, metavar="RUN", help=RUN_HELP + " (default: every run)"
    )
    clean.add_argument(
        "--runs",
        type=run_arg,
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
    demo.add_argument(
        "--executor",
        choices=DEMO_EXECUTORS,
        default="agent",
        help="who carries out the agent tasks: overnight's own agent (the default), or the "
        "installed Claude Code or Codex CLI, through the metering proxy and the sandbox, against a "
        "scripted model on 127.0.0.1 (no key, no money)",
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
    chk.add_argument(
        "--json",
        action="store_true",
        help="the checks as JSON: each one's name, status, what it said and the fix, and the "
        "exit code",
    )

    add_fleet_parser(sub)
    add_pr_parser(sub)
    add_reprice_parser(sub)
    add_replay_parser(sub)
    add_estimate_parser(sub)

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

    comp = sub.add_parser(
        "completion",
        help="print a shell completion script for overnight's commands and options",
        description="Print a completion script. bash: "
        'eval "$(overnight completion bash)" in ~/.bashrc; zsh: overnight completion zsh > '
        '"${fpath[1]}/_overnight"; fish: overnight completion fish > '
        "~/.config/fish/completions/overnight.fish",
    )
    comp.add_argument("shell", choices=SHELLS, help="the shell the script is for")

    sub.add_parser(
        "schema",
        help="print the JSON Schema of night.toml, for editors that check and complete TOML",
        description="Print the JSON Schema of night.toml (draft-07), generated from the spec's "
        "models. overnight init points a new night.toml at the copy in the installed package "
        "with a #:schema line, which Taplo and Even Better TOML read.",
    )
    _add_exits(p)
    return p


def _add_exits(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> None:
    """Each (sub)command's ``EXITS`` line as the epilog of its ``--help``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = (*words, name)
                if " ".join(path) in EXITS:
                    sub.epilog = "exit: " + EXITS[" ".join(path)]
                _add_exits(sub, path)


def add_estimate_parser(sub: Any) -> None:
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
    # As ``overnight.estimate.Flag``: dest ``workload.<path>``, metavar N, X or NAME.
    for option, path, kind, help_text in WORKLOAD_FLAGS:
        est.add_argument(
            option,
            dest=".".join(("workload", *path)),
            type=kind,
            metavar={int: "N", float: "X"}.get(kind, "NAME"),
            help=help_text,
        )


def add_fleet_parser(sub: Any) -> None:
    fleet = sub.add_parser(
        "fleet",
        help="many nights on many machines: Temporal workers, PostgreSQL ledger, cap, results",
        description="Run nights as Temporal workflows; the effects ledger, a daily money cap "
        "and every night's result are shared in PostgreSQL. Needs pip install "
        "'overnight[fleet]'.",
    )
    cmds = fleet.add_subparsers(dest="fleet_command", required=True)

    def common(p: argparse.ArgumentParser, *, database: bool, temporal: bool) -> None:
        if temporal:
            p.add_argument("--temporal", metavar="HOST:PORT", help=TEMPORAL_HELP)
            p.add_argument("--namespace", default="default", help="Temporal namespace")
            p.add_argument(
                "--task-queue",
                default=None,
                help="the task queue nights are carried out on (default: overnight-nights)",
            )
        if database:
            p.add_argument("--database", metavar="URL", help=DATABASE_HELP)

    w = cmds.add_parser("worker", help="carry out nights (until SIGTERM, which drains them)")
    common(w, database=True, temporal=True)
    w.add_argument(
        "--runs",
        type=Path,
        required=True,
        help="where run directories live: a path every worker reaches (shared filesystem)",
    )
    w.add_argument(
        "--max-nights", type=int, default=32, help="nights carried out at once (default 32)"
    )
    w.add_argument(
        "--usd-per-day",
        type=float,
        help="the fleet's daily money cap (a spec's [fleet] usd_per_day may only lower it)",
    )

    s = cmds.add_parser("submit", help="start a night (once per id: a repeat joins the first)")
    common(s, database=False, temporal=True)
    s.add_argument("spec", type=Path, help="the night's night.toml, on a path workers reach")
    s.add_argument(
        "--id",
        dest="night_id",
        help="the night's idempotency key (default: derived from the goal and the workspace)",
    )
    s.add_argument(
        "--heartbeat-s",
        type=float,
        default=10.0,
        help="a worker silent this long is taken for dead and the night resumed elsewhere",
    )
    s.add_argument(
        "--wait", action="store_true", help="wait for the night; exit with its exit code"
    )
    s.add_argument(
        "--retry",
        action="store_true",
        help="the night under this id failed: submit it again as a new night linked to it",
    )

    sch = cmds.add_parser(
        "schedule",
        help="nights that recur: schedule SPEC --cron, or list | pause | resume | delete NAME",
    )
    common(sch, database=False, temporal=True)
    sch.add_argument("what", help="the night.toml to schedule, or list, pause, resume, delete")
    sch.add_argument("name", nargs="?", help="the schedule (for pause, resume, delete)")
    sch.add_argument("--cron", help='when, e.g. "0 22 * * 1-5" (UTC), or "@every 24h"')
    sch.add_argument(
        "--id",
        dest="night_id",
        help="the schedule's name; each night's id is it and the scheduled time "
        "(default: derived from the goal and the workspace)",
    )
    sch.add_argument(
        "--buffer-one",
        action="store_true",
        help="a night due while the last is running waits for it (default: it is skipped)",
    )
    sch.add_argument("--heartbeat-s", type=float, default=10.0, help="as for submit (default 10)")

    st = cmds.add_parser("status", help="the fleet now: nights by state and class, today's spend")
    common(st, database=True, temporal=False)
    st.add_argument("--json", action="store_true", help="machine-readable")

    rep = cmds.add_parser("report", help="every night's ending, spend against the cap, reviews")
    common(rep, database=True, temporal=False)
    rep.add_argument("--since", default="30d", help="30d, 12h, a date, or all (default 30d)")
    rep.add_argument("--html", action="store_true", help="one self-contained HTML page")
    rep.add_argument("--json", action="store_true", help="machine-readable")
    rep.add_argument("--out", type=Path, help="write the report to this file")


def add_pr_parser(sub: Any) -> None:
    p = sub.add_parser(
        "pr",
        help="write a pull request for a night's verified commits; open it with gh when present",
    )
    p.add_argument(
        "run_dir", nargs="?", default=LATEST, type=run_arg, metavar="RUN", help=LATEST_HELP
    )
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--draft", dest="draft", action="store_true", help="open it as a draft (the default)"
    )
    kind.add_argument(
        "--ready", dest="draft", action="store_false", help="open it ready for review"
    )
    p.set_defaults(draft=True)
    p.add_argument(
        "--push", action="store_true", help="push the branch to the remote before opening it"
    )
    p.add_argument(
        "--remote", type=ref_name_arg, default="origin", metavar="NAME", help="default: origin"
    )
    p.add_argument(
        "--base",
        type=ref_name_arg,
        metavar="BRANCH",
        help="the branch to merge into (default: gh's)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="where the body goes (default: RUN/pull-request.md)",
    )


def add_reprice_parser(sub: Any) -> None:
    p = sub.add_parser(
        "reprice",
        help="bill a recorded night again under other prices, model or cache policy "
        "(no model call)",
    )
    p.add_argument("run_dir", type=run_arg, metavar="RUN", help=RUN_HELP)
    p.add_argument("--model", metavar="NAME", help="bill the main model's calls at NAME's price")
    p.add_argument(
        "--cache",
        choices=("off", "5m", "1h"),
        help="bill under this cache policy (derived from the recorded call times when the "
        "recording cannot answer it exactly)",
    )
    p.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help="a TOML file of [<model>] tables (input, output, cache_read, cache_write_5m, "
        "cache_write_1h in $ per million tokens) over the prices the run recorded",
    )
    p.add_argument("--json", action="store_true", help="machine-readable")


def add_replay_parser(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="run a recorded night again against a copy of its workspace, the model answering "
        "from the recording (no key, no money); report the first difference",
    )
    p.add_argument(
        "run_dir",
        metavar="RUN",
        help=f"{RUN_HELP}; or `{SHIPPED_NAME}` for the demo night shipped with the package",
    )
    p.add_argument(
        "--into",
        type=Path,
        metavar="DIR",
        help="a new or empty directory for the copy and the replay's run "
        "(default: a temporary one)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable")
