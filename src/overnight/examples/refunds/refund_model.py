"""The billing night's scripted model: each task makes its one right tool call, then stops.

No network, no key. It reads what a real model reads (the task's first message, the tool
results) and answers as a careful model would: it makes the call its task asks for, reports
what came back, does not repeat a call it is told was already done in an earlier attempt,
and does not retry a call that came back refused or failed.

Its bill is fixed per call (see ``USAGE``), in tokens a real model reports for prompts of
this size (the system prompt, five tool schemas, the brief, one tool result), so the money
arithmetic in ``night.toml`` is exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from overnight.core.budget import Usage
from overnight.messages.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock

ORDER, TICKET, AMOUNT_CENTS = "4471", "88231", 2400
CUSTOMER = "dana.whitfield@example.com"

#: The one call each task needs.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "verify_charge": ("lookup_charge", {"order_id": ORDER}),
    "issue_refund": ("issue_refund", {"order_id": ORDER, "amount_cents": AMOUNT_CENTS}),
    "notify_customer": ("send_email", {"to": CUSTOMER, "template": "refund_issued"}),
    "write_ticket_note": (
        "write_ticket_note",
        {
            "ticket_id": TICKET,
            "text": f"Refunded $24.00 (charge for order {ORDER}, which never shipped) and "
            "emailed the customer the refund_issued confirmation.",
        },
    ),
    "close_ticket": ("close_ticket", {"ticket_id": TICKET}),
}

#: Tokens billed per call. ``act``: the first call of a task (system prompt, five tool
#: schemas, the brief: about 2,700 bytes, some 680 tokens, plus the provider's tool-use
#: preamble). ``report``: the second call (the same plus the tool call and its result).
#: No prompt caching. night.toml's money cap is computed from these numbers.
USAGE = {
    "act": Usage(input=1_000, output=95),
    "report": Usage(input=1_200, output=70),
    "summarize": Usage(input=900, output=160),
    "other": Usage(input=1_000, output=120),
}

EARLIER = "Already done in an earlier attempt"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def _task_and_step(request: ModelRequest) -> tuple[str, int, str]:
    first = _text_of(request.messages[0]["content"])
    task_id = first.split(":", 1)[0].removeprefix("Task ").strip()
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    return task_id, step, first


def _last_tool_result(request: ModelRequest) -> dict[str, Any] | None:
    last = request.messages[-1]["content"]
    if isinstance(last, list):
        for block in last:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                return block
    return None


@dataclass
class BillingModel:
    """``heed_earlier=False`` makes the model ignore the "already done" note of a resumed
    task and plan the call again, as a careless model would (the ledger replays it)."""

    heed_earlier: bool = True
    usage: dict[str, Usage] = field(default_factory=lambda: dict(USAGE))
    calls: int = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        content, kind = self.answer(request)
        acts = any(isinstance(b, ToolUseBlock) for b in content)
        return ModelResponse(
            content=content, stop_reason="tool_use" if acts else "end_turn", usage=self.usage[kind]
        )

    def answer(self, request: ModelRequest) -> tuple[list[TextBlock | ToolUseBlock], str]:
        n = self.calls
        if request.purpose == "summarize":
            return [TextBlock(text=self.summary(request))], "summarize"
        if request.purpose == "drift":
            verdict = {
                "reasoning": "Every queued task is a step of refunding order 4471 (ticket 88231).",
                "off_goal_task_ids": [],
                "drift_score": 0.03,
            }
            return [
                ToolUseBlock(id=f"toolu_drift_{n}", name="submit_drift_verdict", input=verdict)
            ], "other"
        if request.purpose == "replan":
            payload = {"reasoning": "The queued tasks cover the goal.", "add": []}
            return [
                ToolUseBlock(id=f"toolu_replan_{n}", name="submit_replan", input=payload)
            ], "other"
        if request.purpose != "execute":
            return [TextBlock(text="Nothing to do here.")], "other"
        task_id, step, first = _task_and_step(request)
        if task_id not in CALLS:
            return [TextBlock(text=f"I have no way to do {task_id!r} with these tools.")], "act"
        tool, args = CALLS[task_id]
        if step == 0:
            if self.heed_earlier and EARLIER in first and f"{tool}(" in first:
                return [
                    TextBlock(
                        text=f"{tool} was already done in an earlier attempt (see the note "
                        "above); I am not repeating it."
                    )
                ], "act"
            return [ToolUseBlock(id=f"toolu_{task_id}_{n}", name=tool, input=args)], "act"
        result = _last_tool_result(request)
        if result is None:
            return [TextBlock(text="Done.")], "report"
        said = _text_of(result.get("content", ""))[:300]
        if result.get("is_error"):
            text = f"{tool} did not go through: {said}. I am not calling it again."
        else:
            text = f"{tool} done: {said}"
        return [TextBlock(text=text)], "report"

    def summary(self, request: ModelRequest) -> str:
        facts = json.loads(_text_of(request.messages[0]["content"]))
        done = ", ".join(t["id"] for t in facts.get("verified", [])) or "nothing"
        left = ", ".join(facts.get("not_started", [])) or "nothing"
        return (
            f"Ended {facts['stop_reason']}. Done and verified: {done}. Not started: {left}. "
            f"Spent ${facts['spent_usd']:.4f} of ${facts['cap_usd']:.2f}."
        )


model = BillingModel()
