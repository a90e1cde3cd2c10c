"""``overnight status``: where a run stands, read from its files without disturbing it."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from overnight.core.budget import BudgetFractions
from overnight.core.errors import ConfigError, OvernightError
from overnight.store.journal import read_journal
from overnight.store.run_state import load_run_state, saved_at
from overnight.store.rundir import RunDir, holder_pid, is_locked, read_json
from overnight.store.spend import spend_totals


def read_status(path: Path) -> dict[str, Any]:
    rd = RunDir(path)
    if not rd.is_run():
        raise ConfigError("RUN_DIR", f"{path} is not an overnight run directory", "pass a RUN_DIR")
    manifest = read_json(rd.manifest)
    spec = read_json(rd.spec)
    out: dict[str, Any] = {"run_id": manifest["run_id"], "run_dir": str(path)}
    running = is_locked(rd)
    result = read_json(rd.result) if rd.result.exists() else None
    if running:
        out["state"] = "running"
        out["pid"] = holder_pid(rd)
        outage = read_outage(rd)
        if outage is not None:
            out["outage"] = outage
    elif result is not None:
        out["state"] = "finished"
        out["stop_reason"] = result["stop_reason"]
        out["exit_code"] = result["exit_code"]
        out["resumable"] = result["resumable"]
        out["wrapup_usd"] = (result.get("wrapup") or {}).get("cost_usd")
    else:
        out["state"] = "interrupted (no process, no result): resume it"
    try:
        totals = spend_totals(read_journal(rd.spend))
        out["spent_usd"] = round(totals.usd + totals.dangling_usd, 6)
    except OvernightError as exc:
        out["spent_usd"] = None
        out["spend_error"] = str(exc)
    out["cap_usd"] = spec["budget"]["usd"]
    out["model"] = spec.get("model") is not None
    out["hours"] = spec["budget"]["hours"]
    for band, default in asdict(BudgetFractions()).items():
        out[band] = float(spec["budget"].get(band, default))
    try:
        state = load_run_state(rd.checkpoint)
    except OvernightError as exc:
        out["checkpoint_error"] = str(exc)
        state = None
    if state is not None:
        out["tasks"] = {
            "done": [c.task.id for c in state.completed],
            "parked": [p.task.id for p in state.parked],
            "remaining": [t.id for t in state.queue],
            "pruned": [p.task.id for p in state.pruned],
            "in_progress": state.in_progress.task.id if state.in_progress else None,
        }
        seconds = state.seconds_used
        saved = saved_at(rd.checkpoint)
        if running and saved is not None:  # the state is as old as the last save: add since
            seconds += max(0.0, time.time() - saved)
        out["seconds_used"] = round(seconds, 1)
        out["drift_score"] = state.drift_score
        out["drift_checks"] = len(state.drift_history)
        out["goal_met"] = state.goal_met
    return out


def read_outage(rd: RunDir) -> dict[str, Any] | None:
    """The model outage the running night is in (``outage.json``), or None. Read only while
    the night runs: a file a killed process left says nothing of now."""
    try:
        record = read_json(rd.outage)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def outage_text(s: dict[str, Any]) -> str | None:
    """Since when the model has been unreachable, the retries, and when the night gives up."""
    o = s.get("outage")
    if not isinstance(o, dict):
        return None
    retries = int(o.get("retries", 0))
    text = (
        f"unreachable since {o.get('since')}, {retries} retr{'y' if retries == 1 else 'ies'}, "
        f"next try at {o.get('next_try_at')}; gives up at {o.get('gives_up_at')} (outage "
        f"limit {float(o.get('outage_limit_s', 0)):.0f}s) or after {o.get('attempts_left')} "
        "more attempt(s)"
    )
    if o.get("error"):
        text += f". Last error: {o['error']}"
    return text


DEFAULT_BANDS = BudgetFractions()


def elapsed_text(s: dict[str, Any]) -> str:
    """Seconds used of the wall clock, and where the enforcement line cuts commands: the
    money bands' enforce_at applies to the hours too."""
    limit = float(s.get("hours", 0)) * 3600
    enforce = float(s.get("enforce_at", DEFAULT_BANDS.enforce_at))
    used = float(s.get("seconds_used", 0))
    return (
        f"{clock_text(used)} of {clock_text(limit)} "
        f"(commands are cut at {clock_text(enforce * limit)}, the {enforce:.0%} line)"
    )


def clock_text(seconds: float) -> str:
    """A length of time as a person reads a night's clock: ``7 h 22 min``, ``45 min``,
    ``12 s`` (under a minute)."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    hours, minutes = divmod(whole // 60, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def bands_text(s: dict[str, Any]) -> str:
    """The money bands of this run's spec."""
    return (
        f"bands: {float(s.get('notice_at', DEFAULT_BANDS.notice_at)):.0%} notice | "
        f"{float(s.get('finish_at', DEFAULT_BANDS.finish_at)):.0%} no new task | "
        f"{float(s.get('enforce_at', DEFAULT_BANDS.enforce_at)):.0%} enforced"
    )


def drift_text(s: dict[str, Any]) -> str:
    """The drift score, or that no drift check has run yet (a 0.00 would claim one did)."""
    if not s.get("drift_checks"):
        return "no check yet"
    return f"{float(s.get('drift_score', 0.0)):.2f}"


def has_money(s: dict[str, Any]) -> bool:
    """Whether the run has money to show: a model, a money cap or something spent."""
    return bool(s.get("model", True) or s.get("cap_usd") or s.get("spent_usd"))


def spent_text(s: dict[str, Any]) -> str:
    """The spend against the cap, with the closing summary named once it is in the total."""
    spent, cap = float(s["spent_usd"]), s.get("cap_usd") or 0.0
    text = f"${spent:.4f}"
    if cap:
        text += f" of ${float(cap):.2f} ({100 * spent / float(cap):.0f}%)"
    wrapup = s.get("wrapup_usd")
    if wrapup:
        text += f", the closing summary's ${float(wrapup):.4f} included"
    return text


def render_status(s: dict[str, Any]) -> str:
    lines = [f"run {s['run_id']}: {s['state']}" + (f" (pid {s['pid']})" if s.get("pid") else "")]
    if "stop_reason" in s:
        lines.append(
            f"ended: {s['stop_reason']} (exit {s['exit_code']}, "
            f"{'resumable' if s['resumable'] else 'not resumable'})"
        )
    outage = outage_text(s)
    if outage is not None:
        lines.append(f"model: {outage}")
    if not has_money(s):
        lines.append("money: none (a night without a model spends no money)")
    elif s.get("spent_usd") is not None:
        lines.append(f"spent: {spent_text(s)}")
    if "tasks" in s:
        t = s["tasks"]
        lines.append(
            f"tasks: {len(t['done'])} done, {len(t['parked'])} parked, "
            f"{len(t['remaining'])} remaining, {len(t['pruned'])} pruned"
        )
        if t["in_progress"]:
            lines.append(f"in flight: {t['in_progress']}")
        lines.append(f"drift: {drift_text(s)}   goal met: {s['goal_met']}")
        lines.append(f"elapsed: {elapsed_text(s)}")
    if "checkpoint_error" in s:
        lines.append(f"checkpoint: {s['checkpoint_error']}")
    return "\n".join(lines)
