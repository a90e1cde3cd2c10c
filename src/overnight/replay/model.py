"""A model that answers from a recording (``answers.jsonl``): no key, no money.

Each request is compared with the recorded one at its position before the recorded answer is
given. The comparison is of the request as recorded (redacted, the run's names as
placeholders) with the durations commands print (``0.8 s``, ``in 0.007s``) masked, since no
two runs of a command take the same time. A request equal to the recorded one *matched*.

The first request that differs is the divergence: where it differs, and the recorded and
replayed text around the first difference. The replay goes on past it, answering the n-th
call with the n-th recorded answer, as long as the recorded call at that position was made
for the same purpose (a plan is never answered with an agent's step) and its answer was kept;
where it cannot, the model raises ``Diverged`` and the night ends there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from overnight.messages.types import ModelRequest, ModelResponse
from overnight.secrecy import secret_values
from overnight.store.answer_log import masked, request_key, request_record

DivergenceKind = Literal["request", "tool_result", "extra_call", "unrecorded", "verdict"]


@dataclass(frozen=True)
class Divergence:
    """Where the replay first differs from the recording."""

    call: int
    """The model call (1-based, in the order made) or, for a verdict, the task event."""
    purpose: str
    kind: DivergenceKind
    detail: str
    where: str = ""
    """The first differing place in the request (``.messages[0].content``), when known."""
    recorded: str = ""
    """The recorded text around the first difference."""
    replayed: str = ""
    """The replayed text around it."""


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first path at which two JSON values differ, and the two values there."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            found = first_difference(old.get(key), new.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            a = old[i] if i < len(old) else None
            b = new[i] if i < len(new) else None
            found = first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if old == new else (path or ".", old, new)


def _in_tool_result(request: dict[str, Any], path: str) -> bool:
    match = re.match(r"\.messages\[(\d+)\]\.content\[(\d+)\]", path)
    if match is None:
        return False
    try:
        block = request["messages"][int(match[1])]["content"][int(match[2])]
    except (KeyError, IndexError, TypeError):
        return False
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _around(was: Any, now: Any) -> tuple[str, str]:
    """Two differing values as short texts; two strings around their first difference."""
    if not (isinstance(was, str) and isinstance(now, str)):
        return _short(was), _short(now)
    at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), None)
    if at is None:
        at = min(len(was), len(now))
    start = max(0, at - 60)
    return repr(was[start : at + 80]), repr(now[start : at + 80])


class Diverged(Exception):
    """The replay asked what the recording cannot answer: the night stops at this call."""


class ReplayModel:
    """Answers the n-th request with the n-th recorded answer; see the module docstring."""

    def __init__(
        self, records: Sequence[dict[str, Any]], names: Callable[[], list[tuple[str, str]]]
    ) -> None:
        self.records = list(records)
        self.names = names
        self.calls = 0
        """Calls the replay made."""
        self.answered = 0
        """Calls answered from the recording."""
        self.matched = 0
        """Calls whose request was the recorded one."""
        self.divergence: Divergence | None = None
        self.stopped: str | None = None
        """Why the replay could answer no further, once it could not."""
        self._secrets = secret_values()

    def _stop(self, kind: DivergenceKind, purpose: str, detail: str) -> Diverged:
        if self.divergence is None:
            self.divergence = Divergence(self.calls, purpose, kind, detail)
        if self.stopped is None:
            self.stopped = f"call {self.calls} ({purpose}): {detail}"
        return Diverged(f"replay stopped at call {self.calls}: {detail}")

    def _differs(self, rec: dict[str, Any], asked: dict[str, Any], purpose: str) -> None:
        """Note the first request that differs from the recording: where, and how."""
        if self.divergence is not None:
            return
        recorded = rec.get("request")
        if recorded is None:
            self.divergence = Divergence(
                self.calls,
                purpose,
                "request",
                "the request differs (the recording kept only its digest: it was too large)",
            )
            return
        found = first_difference(masked(recorded), masked(asked))
        where, was, now = found if found is not None else (".", None, None)
        kind: DivergenceKind = "tool_result" if _in_tool_result(asked, where) else "request"
        what = "a tool result changed" if kind == "tool_result" else "the request differs"
        if rec.get("purpose") != purpose:
            what = f"a {purpose} call where the recording has a {rec.get('purpose')}"
        before, after = _around(was, now)
        self.divergence = Divergence(
            self.calls, purpose, kind, f"{what} at {where}", where, before, after
        )

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        purpose = request.purpose
        if self.stopped is not None:
            raise Diverged(f"the replay stopped earlier, at {self.stopped}")
        if self.calls > len(self.records):
            raise self._stop(
                "extra_call",
                purpose,
                f"a {purpose} call the recording does not have (it recorded {len(self.records)})",
            )
        rec = self.records[self.calls - 1]
        asked = request_record(request, self.names(), self._secrets)
        if request_key(asked) == rec.get("request_key"):
            self.matched += 1
        else:
            self._differs(rec, asked, purpose)
        if rec.get("purpose") != purpose:
            raise self._stop(
                "request",
                purpose,
                f"a {purpose} call where the recording has a {rec.get('purpose')}: no "
                "recorded answer fits it",
            )
        if rec.get("response") is None:
            raise self._stop("unrecorded", purpose, "the recorded answer was too large to keep")
        self.answered += 1
        return ModelResponse.model_validate(rec["response"])
