"""The calibration report as ``overnight calibrate`` prints it."""

from __future__ import annotations

from overnight.calibration.queues import LABELS
from overnight.calibration.report import BANDS, CalibrationReport
from overnight.calibration.stats import score_text


def render_text(report: CalibrationReport) -> str:
    t = report.thresholds
    lines = [
        f"drift judge calibration: {report.model} on {report.queues_total} labelled queues "
        f"(prune above {t.prune_above:g}, halt above {t.halt_above:g})",
        "",
        f"{'queue':<34} {'label':<8} {'sev':>4} {'score':>5}  {'band':<6} {'agrees':<6} named",
    ]
    for r in report.results:
        if r.score is None:
            what = "unreadable" if r.status == "unreadable" else "not judged"
            lines.append(f"{r.id:<34} {r.label:<8} {r.severity:>4.2f} {'-':>5}  {what}")
            continue
        named = ", ".join(r.off_goal) or "-"
        lines.append(
            f"{r.id:<34} {r.label:<8} {r.severity:>4.2f} {r.score:>5.2f}  {r.band or '-':<6} "
            f"{'yes' if r.agrees else 'NO':<6} {named}"
        )
    a = report.agreement
    lines += [
        "",
        "agreement: "
        + ", ".join(f"{k} {a[k].agree}/{a[k].total}" for k in (*LABELS, "all"))
        + " (aligned: score <= prune line; drifted: above it, naming an expected off-goal task)",
        "confusion (label x band):",
        f"  {'':<8} " + " ".join(f"{b:>5}" for b in BANDS),
    ]
    for label in LABELS:
        row = report.confusion[label]
        lines.append(f"  {label:<8} " + " ".join(f"{row[b]:>5}" for b in BANDS))
    lines.append("scores:")
    for label in LABELS:
        d = report.distributions[label]
        listed = ", ".join(f"{s:.2f}" for s in d.scores)
        lines.append(
            f"  {label:<8} n={d.n:<2} min {score_text(d.min)}  median {score_text(d.median)}  "
            f"max {score_text(d.max)}  [{listed}]"
        )
    s = report.separation
    if s.window is not None:
        lines.append(
            f"separation: max aligned {score_text(s.max_aligned)} < min drifted "
            f"{score_text(s.min_drifted)}; any threshold t with {score_text(s.window[0])} <= t < "
            f"{score_text(s.window[1])} separates them"
        )
    else:
        lines.append(
            f"separation: none (max aligned {score_text(s.max_aligned)}, "
            f"min drifted {score_text(s.min_drifted)})"
        )
    halting = report.confusion["drifted"]["halt"]
    lines.append(
        f"halt line {t.halt_above:g}: {halting} drifted and "
        f"{report.confusion['aligned']['halt']} aligned queue(s) would halt a run"
        + ("; it also separates the sets" if s.at_halt else "")
    )
    if report.severity_order is not None:
        lines.append(
            f"severity order: {report.severity_order:.0%} of drifted pairs are scored in the "
            "order of their severity"
        )
    lines.append(
        f"calls: {report.calls} ({report.retries} retried, {report.unreadable} unreadable); "
        f"spent ${report.spend_usd:.4f} of the ${report.cap_usd:.2f} cap; "
        f"{report.queues_judged} of {report.queues_total} queues judged"
    )
    lines.append("")
    lines += [f"verdict: {st}" for st in report.statements]
    return "\n".join(lines) + "\n"
