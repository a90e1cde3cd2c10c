"""The audit as text: one line per check (name, verdict, detail), then the verdict."""

from __future__ import annotations

from overnight.audit.findings import Audit
from overnight.core.text import printable


def render_text(audit: Audit) -> str:
    width = max((len(c.name) for c in audit.checks), default=0)
    lines = [
        f"{c.name:<{width}}  {c.verdict:<9}  {printable(c.detail).replace(chr(10), ' ')}"
        for c in audit.checks
    ]
    if not audit.rerun:
        lines.append("(verify commands not run again: --no-rerun)")
    if audit.agrees:
        lines.append(f"audit of {audit.run_id}: all {len(audit.checks)} checks agree")
    else:
        lines.append(
            f"audit of {audit.run_id}: {len(audit.disagreements)} of {len(audit.checks)} "
            f"checks DISAGREE: {', '.join(audit.disagreements)}"
        )
    return "\n".join(lines) + "\n"
