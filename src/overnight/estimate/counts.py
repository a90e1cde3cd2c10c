"""What a workload implies when it does not say: the counts and sizes derived from the rest.

The output of a task, the low-effort cut, the drift checks, and for a spec the replans and
compactions follow the workload unless given, so changing ``tasks`` or ``calls_per_task`` never
leaves one of them out of range.
"""

from __future__ import annotations

from fractions import Fraction

from overnight.config.estimate import Workload, output_per_task, round_half_up, tiered_tasks

#: The share of the tiered tasks' output a low effort setting removes when the cut is not
#: given: the reference night's 40k of its 24 tiered tasks' 100.8k (about 39.7%).
LOW_EFFORT_SHARE = Fraction(40_000, 100_800)


def all_tasks(w: Workload) -> int:
    """Every task of the night: agent tasks and command tasks."""
    return w.tasks + w.command_tasks


def low_effort_cut(w: Workload) -> int:
    """Output the low-effort lever removes: as given, else the reference share of the tiered
    tasks' output (never more than that output, whatever the number of tasks)."""
    if w.low_effort_output_cut_tokens is not None:
        return w.low_effort_output_cut_tokens
    return round_half_up(tiered_tasks(w) * output_per_task(w) * LOW_EFFORT_SHARE)


def drift_checks(w: Workload) -> int:
    """As given, else one drift check every ``drift_every`` completed tasks (without the one
    after the last task, unless ``drift_after_last_task``)."""
    if w.drift_checks is not None:
        return w.drift_checks
    judged = all_tasks(w) if w.drift_after_last_task else all_tasks(w) - 1
    return judged // w.drift_every


def replans(w: Workload) -> int:
    """As given, else one after every task but the last."""
    if w.replans is not None:
        return w.replans
    return max(0, all_tasks(w) - 1)


def compactions_per_task(w: Workload) -> int:
    """Times one agent task's conversation passes ``compact_at_tokens``: after each call the
    tool result and the reply join it; past the threshold it is compacted and restarts from
    the first call's size plus the summary."""
    size, count = w.first_call_tokens, 0
    for _ in range(w.calls_per_task):
        size += w.growth_per_call_tokens
        if size > w.compact_at_tokens:
            count += 1
            size = w.first_call_tokens + w.compaction_output_tokens
    return count


def compactions(w: Workload) -> int:
    """As given, else every agent task's ``compactions_per_task``."""
    if w.compactions is not None:
        return w.compactions
    return w.tasks * compactions_per_task(w)


def resolved(w: Workload) -> Workload:
    """The workload with every derived count and size written in."""
    return w.model_copy(
        update={
            "output_per_task_tokens": output_per_task(w),
            "low_effort_output_cut_tokens": low_effort_cut(w),
            "drift_checks": drift_checks(w),
            "replans": replans(w),
            "compactions": compactions(w),
        }
    )
