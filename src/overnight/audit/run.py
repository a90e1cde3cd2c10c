"""``audit_run``: every check of one run, in the order they are printed."""

from __future__ import annotations

from pathlib import Path

from overnight.audit.effects import effects_check
from overnight.audit.findings import Audit, AuditCheck, Recomputed, check
from overnight.audit.gate_runs import gate_checks
from overnight.audit.inputs import Unreadable, check_run_dir, read_run
from overnight.audit.money import money_checks, reprice
from overnight.audit.stop import (
    budget_checks,
    drift_check,
    plan_check,
    predicate_check,
    recount,
    stop_checks,
    trace_facts,
)
from overnight.audit.work import work_checks
from overnight.core.budget import to_usd
from overnight.store.rundir import read_json


def audit_run(path: Path, *, rerun: bool = True) -> Audit:
    """Audit the run at ``path``. A ``ConfigError`` when it is not a run directory or has no
    result; a raw file that cannot be read is a disagreement of its own."""
    rd = check_run_dir(path)
    try:
        files = read_run(rd)
    except Unreadable as exc:
        try:
            run_id = str(read_json(rd.manifest).get("run_id", ""))
        except (OSError, ValueError, AttributeError):
            run_id = ""
        found = [check(exc.name, "run", False, exc.detail)]
        return Audit.of(
            run_id,
            str(rd.path),
            rerun,
            found,
            Recomputed(stop_reason=None, total_usd=None, at_stop_usd=None),
        )
    same = files.result.run_id == files.run_id == files.state.run_id
    claimed = f"result.json is of run {files.result.run_id}"
    checks: list[AuditCheck] = [
        check("run_id", "run", same, f"{files.run_id} (run.json and the checkpoint)")
        if same
        else check(
            "run_id",
            "run",
            False,
            f"{claimed}; run.json {files.run_id}, the checkpoint {files.state.run_id}",
        )
    ]
    money = reprice(files)
    tf = trace_facts(files.trace)
    counted = recount(files, money, tf)
    found, stop_reason = stop_checks(files, counted, tf)
    checks += found
    checks += budget_checks(files, counted)
    checks += [predicate_check(files), drift_check(files), plan_check(files)]
    checks += money_checks(files, money)
    work, commits = work_checks(files, rerun=rerun)
    checks += work
    checks += gate_checks(files)
    checks.append(effects_check(files))
    recomputed = Recomputed(
        stop_reason=stop_reason,
        total_usd=to_usd(money.total_nanos),
        at_stop_usd=to_usd(money.at_stop_nanos),
        commits=commits,
        prices_from=money.prices_from,
    )
    return Audit.of(files.run_id, str(rd.path), rerun, checks, recomputed)
