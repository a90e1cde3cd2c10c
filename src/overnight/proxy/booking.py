"""The proxy's requests held and booked as the night's own model calls.

Each forwarded request is one attempt of an ``execute`` call through the gateway's
``CallMeter``: its worst case reserved against the night's lines (and a fleet's shared cap)
before it is forwarded, written to the spend journal, then booked from the usage the answer
reported, or at its worst case when that cannot be read. The output cap a CLI asks for
(Claude Code asks for 128,000 tokens) is lowered to what the night, and the task's own cap,
can still pay for; when not even ``MIN_OUTPUT_TOKENS`` fit, the request is refused
unforwarded, the refusal is kept (``refused``), and the ledger is marked blocked so the stop
check ends the night ``BUDGET_EXHAUSTED`` as it does for the built-in agent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Literal

from overnight.core.budget import MONEY, NANOS, PER_MILLION, Ledger, Usage, to_usd
from overnight.core.errors import BudgetRefused, ConfigError
from overnight.models.gateway import CallMeter, ModelGateway
from overnight.models.provider_errors import ProviderError
from overnight.models.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock
from overnight.proxy.metering import Answered, Asked, Attempt, Refused

#: Below this, an answer is too short to be worth its input: the request is refused.
MIN_OUTPUT_TOKENS = 256
#: The output cap forwarded when the client set none (the proxy always sets one).
DEFAULT_OUTPUT_TOKENS = 32_000

CacheTTL = Literal["5m", "1h"]


class TaskMeter:
    """Holds and books one task's proxied requests (``overnight.proxy.metering.Meter``).

    ``task_usd`` caps what this task's requests may reach together, held and booked; None: the
    night's lines only. Thread-safe: a CLI may make requests in parallel."""

    def __init__(
        self,
        gateway: ModelGateway,
        *,
        task_id: str,
        task_usd: float | None = None,
        on_refused: Callable[[str], None] = lambda _why: None,
    ) -> None:
        self.gateway = gateway
        self.task_id = task_id
        self.task_nanos = None if task_usd is None else int(Decimal(str(task_usd)) * NANOS)
        self.on_refused = on_refused
        self.refused: str | None = None
        self.forwarded = 0
        self.booked_nanos = 0
        """What this task's settled requests were booked at."""
        self._lock = threading.RLock()
        ledger = gateway.ledger
        self._start_nanos = ledger.spent_nanos + ledger.held_nanos

    def used_nanos(self) -> int:
        """What this task's requests have booked and hold now."""
        ledger = self.gateway.ledger
        return ledger.spent_nanos + ledger.held_nanos - self._start_nanos

    def open(self, asked: Asked) -> Attempt:
        with self._lock:
            try:
                return self._open(asked)
            except Refused as refused:
                if self.refused is None and refused.budget != "price":
                    self.refused = refused.message
                    self.on_refused(refused.message)
                raise

    def _open(self, asked: Asked) -> ProxiedAttempt:
        ledger = self.gateway.ledger
        if self.refused is not None:
            raise Refused(f"refused: {self.refused}", budget="money")
        try:
            ledger.prices.price(asked.model)
        except ConfigError:
            raise Refused(
                f"overnight: no price is known for model {asked.model!r}; the night pays only "
                "for models it can price ([prices.NAME] in the spec)",
                budget="price",
            ) from None
        ttl: CacheTTL | None = "1h" if asked.api == "anthropic" else None
        wanted = asked.max_tokens or DEFAULT_OUTPUT_TOKENS
        granted = min(
            wanted,
            ledger.max_output_tokens(asked.model, asked.input_bound, ttl),
            self._task_affordable(ledger, asked.model, asked.input_bound, ttl),
        )
        if granted < min(MIN_OUTPUT_TOKENS, wanted):
            budget = "task" if self._task_short(ledger, asked, ttl) else "money"
            if budget == "money":
                ledger.blocked = ledger.blocked or "money"
                worst = ledger.worst_case_nanos(asked.model, asked.input_bound, wanted, ttl)
                ledger.refused_at[MONEY] = to_usd(ledger.spent_nanos + ledger.held_nanos + worst)
            self._trace_refusal(asked, budget)
            raise Refused(self._refusal_text(budget), budget=budget)
        request = ModelRequest(
            model=asked.model,
            purpose="execute",
            system="",
            messages=[],
            max_tokens=granted,
            cache_ttl=ttl,
        )
        meter = CallMeter(self.gateway, request, "work")
        meter.estimate = asked.input_bound
        try:
            meter.begin()
        except BudgetRefused as exc:
            raise Refused(self._refusal_text(exc.budget), budget=exc.budget) from None
        self.forwarded += 1
        return ProxiedAttempt(self, meter, granted)

    def _task_affordable(
        self, ledger: Ledger, model: str, input_bound: int, ttl: CacheTTL | None
    ) -> int:
        if self.task_nanos is None:
            return DEFAULT_OUTPUT_TOKENS * 1000
        room = self.task_nanos - self.used_nanos()
        input_nanos = ledger.worst_case_nanos(model, input_bound, 0, ttl)
        if room <= input_nanos:
            return 0
        per_token = Decimal(str(ledger.prices.price(model).output)) * NANOS / PER_MILLION
        return int(Decimal(room - input_nanos) / per_token) if per_token > 0 else 10**9

    def _task_short(self, ledger: Ledger, asked: Asked, ttl: CacheTTL | None) -> bool:
        night = ledger.max_output_tokens(asked.model, asked.input_bound, ttl)
        return self.task_nanos is not None and night >= MIN_OUTPUT_TOKENS

    def _refusal_text(self, budget: str) -> str:
        ledger = self.gateway.ledger
        if budget == "task":
            assert self.task_nanos is not None
            return (
                f"overnight: this task's budget (${to_usd(self.task_nanos):.2f}) is spent; "
                "no further model call is forwarded"
            )
        return (
            f"overnight: the night's budget is spent (${ledger.spent_usd:.2f} of "
            f"${ledger.limit_usd:.2f}); no further model call is forwarded"
        )

    def _trace_refusal(self, asked: Asked, budget: str) -> None:
        self.gateway.trace.event(
            "decision",
            decision="call_refused",
            purpose="execute",
            budget=budget,
            task=self.task_id,
            detail=f"{asked.api} request for {asked.model}, asked max {asked.max_tokens}",
        )


class ProxiedAttempt:
    """One forwarded request, held until it is settled (``overnight.proxy.metering.Attempt``)."""

    def __init__(self, task: TaskMeter, meter: CallMeter, max_tokens: int) -> None:
        self.task = task
        self.meter = meter
        self.max_tokens = max_tokens
        self._settled = False

    def _settle(self, book: Callable[[], object]) -> None:
        ledger = self.task.gateway.ledger
        with self.task._lock:
            if self._settled:
                return
            self._settled = True
            before = ledger.spent_nanos
            book()
            self.task.booked_nanos += ledger.spent_nanos - before

    def answered(self, answer: Answered) -> None:
        content: list[TextBlock | ToolUseBlock] = [TextBlock(text=answer.text)]
        content += [
            ToolUseBlock(id=f"proxied-{i}", name=name, input={})
            for i, name in enumerate(answer.tool_calls)
        ]
        response = ModelResponse(
            content=list(content),
            stop_reason=answer.stop_reason,
            usage=answer.usage,
            usage_warning=answer.usage_warning,
        )
        self._settle(lambda: self.meter.answered(response))

    def failed(self, *, status: int | None, sent: bool, usage: Usage | None, error: str) -> None:
        err = ProviderError(
            "proxy",
            error,
            status=status,
            retryable=False,
            maybe_billed=sent and status is None,
            usage=usage,
            not_sent=None if sent else "no_connection",
        )
        self._settle(lambda: self.meter.failed(err))
