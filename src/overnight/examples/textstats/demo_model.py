"""The demo's scripted model: a fixed, plausible night replayed call by call.

It plans two tasks, carries each out with real tool calls (read, search, edit, run the tests)
against the bundled repository, judges drift, and writes the closing summary. Its bill comes
from a simulated provider with real prompt-cache semantics (5-minute TTL, minimum cacheable
length, 1.25x writes, 0.1x reads) and about four bytes per token, so the ledger prices
realistic usage. No network, no key.
"""

import json
import time

from overnight.messages.types import TextBlock, ToolUseBlock
from overnight.testing.cache_sim import CachingProvider

PUNCT = ".,!?;:\\\"'()"

PLAN = {
    "reasoning": "Two tests fail for two separate bugs in textstats/core.py.",
    "tasks": [
        {
            "id": "fix_words",
            "title": "words(): lower-case and strip punctuation",
            "brief": "tests/test_words.py expects words() to lower-case words and drop "
            "surrounding punctuation. Fix words() in textstats/core.py.",
            "verify": "python3 -m unittest tests.test_words -q",
            "value": 2,
        },
        {
            "id": "fix_ties",
            "title": "top_words(): break ties alphabetically",
            "brief": "tests/test_top.py expects words with equal counts in alphabetical order. "
            "Fix the sort in top_words() in textstats/core.py.",
            "verify": "python3 -m unittest tests.test_top -q",
            "value": 1,
        },
    ],
}

STEPS = {
    "fix_words": [
        ("read_file", {"path": "textstats/core.py"}),
        (
            "edit_file",
            {
                "path": "textstats/core.py",
                "old": "    return text.split()",
                "new": f'    stripped = (w.strip("{PUNCT}") for w in text.split())\n'
                "    return [w.lower() for w in stripped if w]",
            },
        ),
        ("run_command", {"command": "python3 -m unittest tests.test_words -q"}),
        (
            None,
            "words() now strips surrounding punctuation and lower-cases each word; "
            "tests/test_words.py passes.\n"
            "LESSON: tests run with `python3 -m unittest discover -s tests -q` "
            "(the project's tests are written for unittest).",
        ),
    ],
    "fix_ties": [
        ("search_text", {"pattern": r"sorted\(", "path": "textstats"}),
        (
            "edit_file",
            {
                "path": "textstats/core.py",
                "old": "key=lambda item: -item[1])",
                "new": "key=lambda item: (-item[1], item[0]))",
            },
        ),
        ("run_command", {"command": "python3 -m unittest tests.test_top -q"}),
        (None, "top_words() now sorts by count, then alphabetically; tests/test_top.py passes."),
    ],
}


def _task_and_step(request):
    first = request.messages[0]["content"]
    text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
    task_id = text.split(":", 1)[0].removeprefix("Task ").strip()
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    return task_id, step


def answer(request, n):
    if request.purpose == "plan":
        return [ToolUseBlock(id=f"toolu_plan_{n}", name="submit_plan", input=PLAN)]
    if request.purpose == "replan":
        payload = {"reasoning": "The queued tasks cover the failing tests.", "add": []}
        return [ToolUseBlock(id=f"toolu_replan_{n}", name="submit_replan", input=payload)]
    if request.purpose == "drift":
        verdict = {
            "reasoning": "Each queued task fixes a function that a failing test exercises.",
            "off_goal_task_ids": [],
            "drift_score": 0.05,
        }
        return [ToolUseBlock(id=f"toolu_drift_{n}", name="submit_drift_verdict", input=verdict)]
    if request.purpose == "summarize":
        facts = json.loads(request.messages[0]["content"])
        done = ", ".join(t["id"] for t in facts["verified"]) or "nothing"
        return [
            TextBlock(
                text=f"Ended {facts['stop_reason']}. Verified and committed: {done}. "
                f"Spent ${facts['spent_usd']:.4f} of ${facts['cap_usd']:.2f} before this note. "
                "Both fixes are in textstats/core.py; the tests were not edited."
            )
        ]
    task_id, step = _task_and_step(request)
    script = STEPS.get(task_id, [])
    if step >= len(script):
        return [TextBlock(text="Nothing more to do for this task.")]
    tool, payload = script[step]
    if tool is None:
        return [TextBlock(text=payload)]
    return [ToolUseBlock(id=f"toolu_{task_id}_{step}", name=tool, input=payload)]


model = CachingProvider(
    clock=time.monotonic,
    answer=answer,
    output_tokens=240,
    min_cacheable=1024,
    count=lambda text: max(1, len(text.encode("utf-8")) // 4),
)
