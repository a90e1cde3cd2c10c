"""With telemetry on, every MCP call carries the W3C ``traceparent`` of its own tool-call span
in the request's ``_meta``, so the server's spans join the night; a mutating call carries its
idempotency key beside it, under a reverse-DNS prefix. The test server writes down the
``_meta`` it received; the local collector has the spans the night exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overnight.clock import SystemClock
from overnight.messages.types import ModelRequest
from overnight.testing import FunctionModel, text_answer, tool_answer, usage_dict
from tests.helpers.nights import make_spec, run_night
from tests.telemetry.collector import Collector, named
from tests.tools.test_mcp import TICKET, lines, stdio_entry


def test_each_mcp_call_carries_the_traceparent_of_its_own_span(
    repo: Path, tmp_path: Path, collector: Collector
) -> None:
    record = tmp_path / "record"
    record.mkdir()

    def answer(request: ModelRequest) -> dict[str, Any]:
        usage = usage_dict(input=900, output=60)
        if request.purpose != "execute":
            return text_answer("closing note", usage)
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        if step == 0:
            return tool_answer("lookup", {"item": "toner"}, usage)
        if step == 1:
            return tool_answer("create_ticket", TICKET, usage)
        return text_answer("done", usage)

    spec = make_spec(
        repo,
        predicate="false",
        tasks=[{"id": "ticket", "brief": "open the ticket", "verify": "true"}],
        tools={
            "allow": [],
            "mcp": [stdio_entry(record, ["lookup", "create_ticket"])],
            "commands": ["true"],
        },
        run={"replan": False, "retries": 0},
        sandbox={"writable": [str(record)]},
        telemetry={"otlp_endpoint": collector.url},
    )
    _rd, result = run_night(
        spec, tmp_path / "run", model=FunctionModel(answer), clock=SystemClock()
    )
    [effect] = result.effects
    spans = collector.spans()
    [night] = named(spans, "night")
    trace_id = bytes(night.span.trace_id).hex()
    by_tool = {c["tool"]: c["meta"] for c in lines(record, "calls.jsonl")}
    for tool in ("lookup", "create_ticket"):
        [span] = named(spans, f"execute_tool {tool}")
        version, trace, parent, flags = by_tool[tool]["traceparent"].split("-")
        assert (version, trace, parent) == ("00", trace_id, span.id.hex())
        assert int(flags, 16) & 1  # sampled
        [attempt] = named(spans, "task ticket")
        assert span.parent == attempt.id  # the server's spans hang under the tool call's
    assert "dev.overnight/idempotency_key" not in by_tool["lookup"]
    assert by_tool["create_ticket"]["dev.overnight/idempotency_key"] == effect["key"]
    assert set(by_tool["create_ticket"]) == {"traceparent", "dev.overnight/idempotency_key"}
