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
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Literal

from overnight.core.budget import (
    MONEY,
    NANOS,
    ONE,
    PER_MILLION,
    Ledger,
    Usage,
    exact,
    to_nanos,
    to_usd,
)
from overnight.core.errors import BudgetRefused, ConfigError
from overnight.messages.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock
from overnight.models.gateway import CallMeter, ModelGateway
from overnight.models.provider_errors import ProviderError
from overnight.proxy.metering import Answered, Api, Asked, Attempt, Refused

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
        hosts: Iterable[str] = (),
        network: bool = False,
    ) -> None:
        self.gateway = gateway
        self.task_id = task_id
        self.hosts = frozenset(h.lower().rstrip(".") for h in hosts)
        """The hosts the spec's sandbox lets the provider reach for the task (``[sandbox]
        hosts``); every host when ``network``."""
        self.network = network
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
                if refused.budget == "price":
                    self.unforwardable(asked.api, refused.message)
                elif self.refused is None:
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
        rate, fees = self._priced(asked)
        self._reaches(asked)
        # Anthropic's 1-hour cache writes are its dearest input; OpenAI's explicit caching
        # bills writes at the model's one cache-write rate
        ttl: CacheTTL | None = "1h" if asked.api == "anthropic" else None
        if ttl is None and asked.cache_writes:
            ttl = "5m"
        wanted = asked.max_tokens or DEFAULT_OUTPUT_TOKENS
        granted = min(
            wanted,
            ledger.max_output_tokens(
                asked.model, asked.input_bound, ttl, rate=rate, fees_nanos=fees
            ),
            self._task_affordable(ledger, asked.model, asked.input_bound, ttl, rate, fees),
        )
        if granted < min(MIN_OUTPUT_TOKENS, wanted):
            budget = "task" if self._task_short(ledger, asked, ttl) else "money"
            if budget == "money":
                ledger.blocked = ledger.blocked or "money"
                worst = ledger.worst_case_nanos(
                    asked.model, asked.input_bound, wanted, ttl, rate=rate, fees_nanos=fees
                )
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
        meter.rate, meter.fees_nanos = rate, fees
        if asked.domains or asked.open_web:
            self.gateway.trace.event(
                "decision",
                decision="provider_reaches",
                task=self.task_id,
                hosts=list(asked.domains) or ["any host"],
                tools=[name for name, _ in asked.server_uses],
            )
        try:
            meter.begin()
        except BudgetRefused as exc:
            raise Refused(self._refusal_text(exc.budget), budget=exc.budget) from None
        self.forwarded += 1
        return ProxiedAttempt(self, meter, granted, asked)

    def unforwardable(self, api: Api, message: str) -> None:
        self.gateway.trace.event(
            "decision",
            decision="request_refused",
            purpose="execute",
            task=self.task_id,
            api=api,
            detail=message,
        )

    def _priced(self, asked: Asked) -> tuple[Decimal, int]:
        """The multiplier ``asked``'s tokens are priced at and the most its server tools can
        be billed by the use (nano-dollars); ``Refused`` when the spec prices either not."""
        price = self.gateway.ledger.prices.price(asked.model)
        rate = ONE
        for key in asked.multipliers:
            factor = price.multiplier(key)
            if factor is None:
                raise Refused(
                    f"overnight: the request asks for {key}, which the spec does not price for "
                    f"{asked.model}; it is not forwarded (add [prices.{asked.model}] "
                    f'multipliers = {{"{key}" = FACTOR}}, or leave it out)',
                    budget="price",
                )
            rate *= exact(factor)
        if asked.long_context and not price.tiers:
            raise Refused(
                f"overnight: the request asks for a context past {asked.model}'s standard "
                "window, billed at rates the night's price table does not hold; not forwarded",
                budget="price",
            )
        fees = 0
        for name, uses in asked.server_uses:
            fee = price.fee(name)
            if fee is None:
                raise Refused(
                    f"overnight: the request offers the provider's {name} tool, billed by the "
                    f"use, which the spec does not price for {asked.model}; it is not forwarded "
                    f"(add {name} = DOLLARS_PER_USE to [prices.{asked.model}])",
                    budget="price",
                )
            fees += to_nanos(exact(fee) * uses)
        return rate, fees

    def _reaches(self, asked: Asked) -> None:
        """Refuse a request that has the provider reach a host the sandbox may not."""
        if self.network or not (asked.domains or asked.open_web):
            return
        if asked.open_web:
            raise Refused(
                "overnight: the request has the provider reach the web, limited to no domain, "
                "and the night's sandbox has no network; it is not forwarded (limit the tool's "
                "allowed_domains to hosts named in [sandbox] hosts)",
                budget="price",
            )
        outside = [d for d in asked.domains if d not in self.hosts]
        if outside:
            raise Refused(
                f"overnight: the request has the provider reach {', '.join(outside)}, which "
                "the night's sandbox does not allow; it is not forwarded (name the hosts in "
                "[sandbox] hosts to allow them)",
                budget="price",
            )

    def _task_affordable(
        self,
        ledger: Ledger,
        model: str,
        input_bound: int,
        ttl: CacheTTL | None,
        rate: Decimal = ONE,
        fees: int = 0,
    ) -> int:
        if self.task_nanos is None:
            return DEFAULT_OUTPUT_TOKENS * 1000
        room = self.task_nanos - self.used_nanos()
        input_nanos = ledger.worst_case_nanos(
            model, input_bound, 0, ttl, rate=rate, fees_nanos=fees
        )
        if room <= input_nanos:
            return 0
        price = Decimal(str(ledger.prices.price(model).output)) * rate
        per_token = price * NANOS / PER_MILLION
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

    def __init__(self, task: TaskMeter, meter: CallMeter, max_tokens: int, asked: Asked) -> None:
        self.task = task
        self.meter = meter
        self.max_tokens = max_tokens
        self.asked = asked
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
        usage, warning = answer.usage, answer.usage_warning
        price = self.task.gateway.ledger.prices.price(self.asked.model)
        fees = 0
        for name, uses in answer.server_uses:
            fee = price.fee(name)
            if fee is None:
                if uses > 0:
                    usage = None
                    warning = f"the answer reports {uses} use(s) of {name}, which is not priced"
                continue
            fees += to_nanos(exact(fee) * uses)
        if usage is not None:
            rate = ONE
            for key in served_at(self.asked.multipliers, answer.served):
                factor = price.multiplier(key)
                if factor is None:
                    usage, warning = None, f"the answer says it was served at {key}, unpriced"
                    break
                rate *= exact(factor)
            self.meter.rate = rate
        self.meter.fees_nanos = fees
        response = ModelResponse(
            content=list(content),
            stop_reason=answer.stop_reason,
            usage=usage,
            usage_warning=warning,
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


#: How each API names the standard way of serving a request (no multiplier).
STANDARD = frozenset({"standard", "default", "standard_only", "global", "auto"})


def served_at(asked: tuple[str, ...], served: tuple[tuple[str, str], ...]) -> list[str]:
    """The ``field=value`` multipliers an answer was billed at: each field as the answer says
    it was served, or as it was asked when the answer does not say; standard ones left out."""
    fields = dict(key.split("=", 1) for key in asked)
    fields.update(served)
    return [f"{name}={value}" for name, value in fields.items() if value not in STANDARD]
