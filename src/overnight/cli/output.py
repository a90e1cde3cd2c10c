"""What the command line shows of a night: progress while it runs (a live panel on a terminal,
one line per event otherwise) and the summary once it has ended."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from overnight.cli.status import read_status
from overnight.core.endings import REOPENED_BY_REVIEW
from overnight.core.text import clip, one_line, printable
from overnight.night.events import Event, RunCreated
from overnight.store.result import TerminalResult

if TYPE_CHECKING:  # the live panel's library is imported only for a terminal that shows it
    from rich.console import Console
    from rich.live import Live

#: The live panel is redrawn at most this often (seconds).
PANEL_REDRAW_S = 0.25


def _cli_line(stamp: str, e: Event) -> str | None:
    """A CLI agent's own events: its start, tool calls, turns and end (what it says of its
    success and cost is shown as its own word, never as the verdict)."""
    f = e.field
    who, what = f"{f('task')}: {f('cli')}", f("event")
    if what == "start":
        return f"{stamp}   {who} {f('version') or ''} started (model {f('model')})"
    if what == "tool_call":
        return f"{stamp}   {who} {f('tool')}"
    if what == "turn":
        return f"{stamp}   {who} turn {f('turn')}"
    if what == "end":
        own, booked = f("cli_reported_cost_usd"), f("harness_usd")
        cost = f", ${float(booked):.4f}" if isinstance(booked, int | float) else ""
        said = f" (it says ${float(own):.4f})" if isinstance(own, int | float) else ""
        calls = f"{f('calls')} metered call(s){cost}{said}"
        return f"{stamp}   {who} ended {f('status')} after {calls}"
    return None


def progress_line(e: Event) -> str | None:
    """One line for an event worth a line, or None."""
    t = e.t
    stamp = f"[{int(t // 3600):02d}:{int(t % 3600 // 60):02d}:{int(t % 60):02d}]"
    kind, decision, f = e.kind, e.field("decision"), e.field
    if kind == "task" and f("event") == "started":
        return f"{stamp} task {f('task')} started (attempt {f('attempt')})"
    if kind == "decision" and decision == "task_finished":
        note = ""
        if f("command_timed_out"):
            note = " (its command timed out)"
        elif f("command_exit_code") not in (None, 0):
            note = f" (its command exited {f('command_exit_code')})"
        if f("parked"):
            said = f" ({f('detail')})" if f("detail") else ""
            return f"{stamp} task {f('task')} parked: {f('parked')}{note}{said}"
        return f"{stamp} task {f('task')} -> {f('outcome')}{note}"
    if kind == "decision" and decision == "out_of_time":
        return f"{stamp} task {f('task')} left in flight: {f('detail')}"
    if kind == "decision" and decision == "drift":
        return f"{stamp} drift {f('score'):.2f} ({f('action')})"
    if kind == "decision" and decision == "call_refused":
        return f"{stamp} refused a {f('purpose')} call: {f('detail')}"
    if kind == "decision" and decision == "resume_verified":
        if f("parked"):
            said = f" ({f('detail')})" if f("detail") else ""
            return f"{stamp} resumed: in-flight task {f('task')} parked: {f('parked')}{said}"
        return f"{stamp} resumed: in-flight task {f('task')} verified {f('outcome')}"
    if kind == "decision" and decision == "stop":
        return f"{stamp} stop: {f('reason')}"
    if kind == "tool_call" and f("tool") not in ("predicate", "verify", "command", "executor"):
        failed = " (error)" if f("error") else ""
        return f"{stamp}   {f('task')}: {f('tool')}{failed}"
    if kind == "cli_event":
        return _cli_line(stamp, e)
    if kind == "cache_warning":
        return f"{stamp} cache: {f('detail')}"
    if kind == "tool_call" and f("tool") == "predicate":
        said = f" ({f('verdict')})" if f("verdict") else ""
        return f"{stamp} goal predicate {'passed' if f('met') else 'not met'}{said}"
    if kind == "decision" and decision == "verify_evidence":
        return f"{stamp}   {f('task')}: verify {f('verdict')}"
    if kind == "decision" and decision == "start_check":
        return f"{stamp} before the night: {f('note')}"
    if kind == "model_retry":
        said = f"HTTP {f('status')}" if f("status") is not None else "no answer"
        count = f" {f('retries')}" if f("retries") else ""
        return f"{stamp} model unreachable ({said}): retry{count} in {f('wait_s'):.0f}s"
    if kind == "model_call" and f("cost_usd") is not None:
        return f"{stamp} {f('purpose')} call ${f('cost_usd'):.4f}"
    return None


#: The version of the records `--events jsonl` writes (each line's ``v``).
EVENTS_VERSION = 1


class EventStream:
    """``--events jsonl``: every event of the night as one JSON object on its own line on
    stdout, as the trace holds it (its ``kind``, ``t``, ``at`` and fields), with the format's
    version ``v``; the last line is the terminal result (``kind`` ``result``)."""

    def __init__(self, then: Callable[[Event], None] | None = None) -> None:
        self.then = then

    def __call__(self, event: Event) -> None:
        self.write({"v": EVENTS_VERSION, **event.model_dump(mode="json")})
        if self.then is not None:
            self.then(event)

    def result(self, result: TerminalResult) -> None:
        self.write({"v": EVENTS_VERSION, **result.model_dump(mode="json"), "kind": "result"})

    @staticmethod
    def write(record: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
        sys.stdout.flush()


class Progress:
    """The ``on_event`` handler of ``overnight run`` and ``overnight resume``: quiet, a line per
    event on a pipe, or a live panel on a terminal. Use it as a context manager, so the panel
    is closed however the night ends."""

    def __init__(self, quiet: bool, run_dir: Path | None = None) -> None:
        self.quiet = quiet
        self.live: Live | None = None
        self.console: Console | None = None
        self.run_dir: Path | None = None
        self.last = ""
        self.drawn_at = float("-inf")
        if not quiet and sys.stderr.isatty():
            from rich.console import Console

            self.console = Console(stderr=True)
            if run_dir is not None:
                self._start_panel(run_dir)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.live is not None:
            self.live.stop()

    def _start_panel(self, run_dir: Path) -> None:
        from rich.live import Live

        self.run_dir = run_dir
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        if isinstance(event, RunCreated):
            print(f"run dir: {event.run_dir}", file=sys.stderr, flush=True)
            if self.console is not None:
                self._start_panel(event.run_dir)
            return
        line = progress_line(event)
        if self.console is None:
            if line:
                print(printable(line), file=sys.stderr, flush=True)
            return
        if line:
            self.last = line
        self._redraw(stopping=event.field("decision") == "stop", reason=event.field("reason"))

    def _redraw(self, *, stopping: bool, reason: Any) -> None:
        if self.live is None or self.run_dir is None:
            return
        now = time.monotonic()
        # Reading the run's files at every trace line would make a long night's panel cost
        # grow with its journal; a few redraws a second are all a person can read.
        if not stopping and now - self.drawn_at < PANEL_REDRAW_S:
            return
        self.drawn_at = now
        try:
            status = read_status(self.run_dir)
        except Exception:  # the panel is a view: it never stops the run
            return
        if stopping:
            status["state"] = f"stopping: {reason}"
        from overnight.cli.panel import render_panel

        self.live.update(render_panel(status, self.last))


def finish_output(result: TerminalResult, as_json: bool, out: TextIO | None = None) -> int:
    """The night's summary on stdout (or result.json itself; ``out``: elsewhere, stderr when
    stdout carries the events); returns its exit code."""
    out = out or sys.stdout
    run_dir = result.run_dir
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True), file=out)
    else:
        already = ", already met before any work" if result.already_met else ""
        print(
            f"ending:  {result.stop_reason}{already} ({result.status}, exit {result.exit_code})",
            file=out,
        )
        print(printable(f"why:     {result.message}"), file=out)
        predicate = result.predicate
        if predicate is not None and not predicate.met and result.stop_reason != "GOAL_MET":
            tail = [line for line in predicate.detail.strip().splitlines() if line.strip()][-8:]
            if tail:
                print(
                    f"goal check `{predicate.command}` (exit {predicate.exit_code}) said:", file=out
                )
                print(printable("\n".join(f"  {line}" for line in tail)), file=out)
        for p in result.plan.parked:
            print("parked:  " + one_line(f"{p.id}: {p.reason}"), file=out)
            if p.detail.strip():
                print("         " + one_line(clip(p.detail, PARKED_SHOWN)), file=out)
        from overnight.report.facts import spent_sentence  # the report's views: only here

        print(f"spent:   {spent_sentence(result)}", file=out)
        if result.already_met:
            print("branch:  none (nothing was done, so none was kept)", file=out)
        else:
            print(f"branch:  {result.branch.name} ({verified_count(result)})", file=out)
        print(f"result:  {run_dir / 'result.json'}", file=out)
        print(f"report:  overnight report {run_dir}", file=out)
        if result.resumable and result.exit_code != 0:
            print(f"resume:  {resume_hint(run_dir, result)}", file=out)
    return int(result.exit_code)


#: Characters of a parked task's detail the summary shows (the result keeps more).
PARKED_SHOWN = 300


def verified_count(result: TerminalResult) -> str:
    """Verified tasks and the commits they made, counted apart: a verified task may have had
    nothing to commit."""
    tasks = len(result.verified)
    commits = sum(1 for v in result.verified if v.commit)
    return f"{tasks} verified task(s), {commits} commit(s)"


#: The ``overnight resume`` flag that lifts each budget ending.
RAISE_FLAGS = {
    "BUDGET_EXHAUSTED:money": ("--usd", "cost_usd"),
    "BUDGET_EXHAUSTED:tokens": ("--tokens", "tokens"),
    "BUDGET_EXHAUSTED:steps": ("--steps", "steps"),
    "TIME_LIMIT:wall_clock": ("--hours", "seconds"),
}


def resume_hint(run_dir: Path, result: TerminalResult) -> str:
    """How to continue: a run stopped by a budget ends the same way at once unless the
    budget is raised, so the hint names the flag and a figure (twice the old limit). A run with
    a task held for a person's answer is resumable after the review queue is resolved."""
    held = [p.id for p in result.plan.parked if p.held_for]
    if held and result.ending in {e.value for e in REOPENED_BY_REVIEW}:
        return (
            f"after the review queue is resolved (`overnight review`: {', '.join(held)} "
            f"wait(s) for a person), overnight resume {run_dir}"
        )
    flag = RAISE_FLAGS.get(result.stop_reason)
    if flag is None:
        return f"overnight resume {run_dir}"
    option, budget = flag
    limit = getattr(result.budgets, budget).limit
    if limit is None:
        return f"overnight resume {run_dir} {option} ..."
    if budget == "seconds":
        hours = limit / 3600.0
        return f"overnight resume {run_dir} --hours {2 * hours:g}   (the limit was {hours:g} h)"
    if budget == "cost_usd":
        return f"overnight resume {run_dir} --usd {2 * limit:g}   (the cap was ${limit:.2f})"
    return f"overnight resume {run_dir} {option} {2 * int(limit)}   (the limit was {int(limit)})"
