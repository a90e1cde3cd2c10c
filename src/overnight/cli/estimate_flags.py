"""The flags of ``overnight estimate``, one per workload field, written out so that building the
parser imports no model. ``overnight.estimate.workload_flags`` derives them from ``Workload``'s
fields; tests/cli/test_parser.py holds the two equal and writes this table again.
"""

from __future__ import annotations

#: ``(option, path in the workload, type, help)``, in the order of the fields.
WORKLOAD_FLAGS: tuple[tuple[str, tuple[str, ...], type, str], ...] = (
    (
        "--tasks",
        ("tasks",),
        int,
        "Agent tasks the night works through, each making model calls (from a spec with "
        "``[[tasks]]``: those with a ``brief``).",
    ),
    (
        "--command-tasks",
        ("command_tasks",),
        int,
        "Tasks that make no model calls: a shell ``command`` run by the harness. They "
        "count towards the drift cadence and the replans (from a spec: the ``[[tasks]]`` "
        "with a ``command``; every task when the spec has no ``[model]``).",
    ),
    (
        "--calls-per-task",
        ("calls_per_task",),
        int,
        "Model calls in one agent task's loop, its ReAct turns (from a spec: "
        "``agent.max_calls``, the most a task may make).",
    ),
    (
        "--first-call-tokens",
        ("first_call_tokens",),
        int,
        "Input of a task's first call: the system prompt (3.0k) plus the task brief (0.5k).",
    ),
    (
        "--growth-per-call-tokens",
        ("growth_per_call_tokens",),
        int,
        "Input each later call adds over the one before it: the previous tool result "
        "(3.0k) plus the model's previous reply (0.3k).",
    ),
    (
        "--output-per-task-tokens",
        ("output_per_task_tokens",),
        int,
        "Output tokens of one agent task, all its calls together (thinking included). Not "
        "given: 700 per call, the reference's 4.2k over six calls.",
    ),
    (
        "--verify-calls-per-task",
        ("verify_calls_per_task",),
        int,
        "Model calls per agent task that check its work. The harness checks a task by "
        "running its ``verify`` command, which calls no model: 0 for a spec, 1 in the "
        "reference night.",
    ),
    ("--verify-input-tokens", ("verify_input_tokens",), int, "Input of one verification call."),
    ("--verify-output-tokens", ("verify_output_tokens",), int, "Output of one verification call."),
    (
        "--drift-every",
        ("drift_every",),
        int,
        "Tasks between drift checks (from a spec: ``run.drift_every``).",
    ),
    (
        "--drift-checks",
        ("drift_checks",),
        int,
        "Drift checks in the night. Not given: one every ``drift_every`` tasks, agent and "
        "command tasks alike (0 for a spec with no ``[model]``: there is no judge).",
    ),
    (
        "--drift-after-last-task",
        ("drift_after_last_task",),
        str,
        "Whether the derived count includes a check after the last task when it falls on "
        "the cadence: the reference night counts it; the harness skips it, nothing being "
        "left in the queue to judge (from a spec: false).",
    ),
    (
        "--drift-input-tokens",
        ("drift_input_tokens",),
        int,
        "Input of one drift check: the goal and the queue.",
    ),
    (
        "--drift-output-tokens",
        ("drift_output_tokens",),
        int,
        "Output of one drift check: reasoning, off-goal ids, a score.",
    ),
    (
        "--replans",
        ("replans",),
        int,
        "Replan calls in the night (the reference night: 12). From a spec, unless given "
        "here: one after every task but the last, as the harness asks after each task "
        "while tasks remain and the goal is unmet (0 with ``run.replan = false`` or no "
        "``[model]``).",
    ),
    ("--replan-input-tokens", ("replan_input_tokens",), int, "Input of one replan call."),
    ("--replan-output-tokens", ("replan_output_tokens",), int, "Output of one replan call."),
    (
        "--compactions",
        ("compactions",),
        int,
        "Compaction calls in the night, each summarizing a history so the context stops "
        "growing (the reference night: 6). From a spec, unless given here: one each time "
        "an agent task's conversation passes ``compact_at_tokens``, after which it "
        "restarts from the brief and the summary.",
    ),
    (
        "--compact-at-tokens",
        ("compact_at_tokens",),
        int,
        "Conversation size at which a task compacts, for the derived count of compactions "
        "(from a spec: ``agent.compact_at_tokens``).",
    ),
    (
        "--compaction-input-tokens",
        ("compaction_input_tokens",),
        int,
        "Input of one compaction call: the history it summarizes (from a spec: "
        "``agent.compact_at_tokens``).",
    ),
    (
        "--compaction-output-tokens",
        ("compaction_output_tokens",),
        int,
        "Output of one compaction call: the summary.",
    ),
    (
        "--plans",
        ("plans",),
        int,
        "Plan calls (from a spec: 1 when it has no ``[[tasks]]``, so the model plans the queue).",
    ),
    (
        "--plan-input-tokens",
        ("plan_input_tokens",),
        int,
        "Input of one plan call: its instructions and the goal.",
    ),
    (
        "--plan-output-tokens",
        ("plan_output_tokens",),
        int,
        "Output of one plan call: the queue, a title, brief and verify command per task.",
    ),
    (
        "--summaries",
        ("summaries",),
        int,
        "Closing-summary calls, paid from the wrap-up reserve (from a spec with a ``[model]``: 1).",
    ),
    (
        "--summary-input-tokens",
        ("summary_input_tokens",),
        int,
        "Input of the closing summary: the facts of the run.",
    ),
    (
        "--summary-output-tokens",
        ("summary_output_tokens",),
        int,
        "Output of the closing summary: a note of at most 200 words.",
    ),
    (
        "--main-model",
        ("main_model",),
        str,
        "The model every call uses; priced from the spec's ``[prices.<name>]`` or "
        "genai-prices when ``main_price`` is not given (from a spec: ``model.name``).",
    ),
    (
        "--main-price-input",
        ("main_price", "input"),
        float,
        "main_price.input: $ per million uncached input tokens.",
    ),
    (
        "--main-price-output",
        ("main_price", "output"),
        float,
        "main_price.output: $ per million output tokens (thinking included).",
    ),
    (
        "--main-price-cache-write",
        ("main_price", "cache_write"),
        float,
        "main_price.cache_write: A 5-minute cache write, as a multiple of the input price.",
    ),
    (
        "--main-price-cache-read",
        ("main_price", "cache_read"),
        float,
        "main_price.cache_read: A cache read, as a multiple of the input price.",
    ),
    (
        "--cheap-model",
        ("cheap_model",),
        str,
        "A cheaper model for the tiering lever; priced like ``main_model`` when "
        "``cheap_price`` is not given (from a spec: ``agent.mechanical_model``). Neither: "
        "no tiering lever.",
    ),
    (
        "--cheap-price-input",
        ("cheap_price", "input"),
        float,
        "cheap_price.input: $ per million uncached input tokens.",
    ),
    (
        "--cheap-price-output",
        ("cheap_price", "output"),
        float,
        "cheap_price.output: $ per million output tokens (thinking included).",
    ),
    (
        "--cheap-price-cache-write",
        ("cheap_price", "cache_write"),
        float,
        "cheap_price.cache_write: A 5-minute cache write, as a multiple of the input price.",
    ),
    (
        "--cheap-price-cache-read",
        ("cheap_price", "cache_read"),
        float,
        "cheap_price.cache_read: A cache read, as a multiple of the input price.",
    ),
    (
        "--min-cacheable-tokens",
        ("min_cacheable_tokens",),
        int,
        "The main model's minimum cacheable prefix (from a spec: "
        "``agent.min_cacheable_tokens``). A first call shorter than this writes nothing, "
        "and the caching lever saves nothing.",
    ),
    (
        "--loop-cap-calls",
        ("loop_cap_calls",),
        int,
        "The loop-cap lever: calls per task when the loop is capped. Output shrinks in proportion.",
    ),
    (
        "--tiered-share",
        ("tiered_share",),
        float,
        "The tiering lever: the share of agent tasks (rounded to whole tasks) moved to "
        "the cheaper model. The low-effort lever applies to the same tasks.",
    ),
    (
        "--low-effort-output-cut-tokens",
        ("low_effort_output_cut_tokens",),
        int,
        "The low-effort lever: output tokens a low effort setting removes from the tiered "
        "tasks, the night's total. Not given: the reference's share of their output, 40k "
        "of 100.8k (about 39.7%%).",
    ),
    (
        "--verify-pass-rate",
        ("verify_pass_rate",),
        float,
        "Share of tasks expected to pass verification: the divisor of the cost per verified task.",
    ),
    (
        "--cap-factor",
        ("cap_factor",),
        float,
        "The hard cap is the derived total times this, rounded up to a whole dollar.",
    ),
    (
        "--budget-usd",
        ("budget_usd",),
        float,
        "The hard cap to check the derived total against (from a spec: ``budget.usd``). "
        "Not given: no check.",
    ),
    (
        "--finish-at",
        ("finish_at",),
        float,
        "From this share of the cap no new task starts (from a spec: ``budget.finish_at``).",
    ),
    (
        "--enforce-at",
        ("enforce_at",),
        float,
        "The enforcement line, as a share of the cap: no call may cross it, and the rest "
        "is the wrap-up reserve (from a spec: ``budget.enforce_at``).",
    ),
)
