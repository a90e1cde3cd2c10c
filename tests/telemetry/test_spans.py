"""The night as spans, received by a real OTLP/HTTP collector on localhost: the tree, the
names, the GenAI attributes, the times, and what stays out of them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from overnight.clock import SystemClock
from overnight.testing import ScriptedModel
from tests.helpers.nights import load_result, run_night
from tests.telemetry.collector import Collector, Got, named
from tests.telemetry.nights import (
    ANSWER_MARK,
    PROMPT_MARK,
    SECRET,
    SLEEP_S,
    TOOL_OUTPUT_MARK,
    USAGE,
    night_repo,
    night_spec,
    scripted_model,
)


def exported_night(
    tmp_path: Path, collector: Collector, **telemetry: Any
) -> tuple[Path, ScriptedModel, list[Got]]:
    spec = night_spec(night_repo(tmp_path), {"otlp_endpoint": collector.url, **telemetry})
    model = scripted_model()
    run_dir = tmp_path / "run"
    _, result = run_night(spec, run_dir, model=model, clock=SystemClock())
    assert result.ending == "GOAL_MET", result.message
    return run_dir, model, collector.spans()


def trace_records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]


def test_the_night_is_one_tree_night_attempts_calls(tmp_path: Path, collector: Collector) -> None:
    run_dir, _, spans = exported_night(tmp_path, collector)
    assert collector.paths and set(collector.paths) == {"/v1/traces"}
    assert len({bytes(s.span.trace_id) for s in spans}) == 1
    roots = [s for s in spans if not s.parent]
    assert [r.name for r in roots] == ["night"]
    night = roots[0]
    by_id = {s.id: s for s in spans}
    assert all(s.parent in by_id for s in spans if s is not night)  # no orphan

    attempts = sorted(named(spans, "task "), key=lambda s: s.attrs["overnight.task.attempt"])
    assert [(a.name, a.attrs["overnight.task.attempt"]) for a in attempts] == [
        ("task write-done", 1),
        ("task write-done", 2),
    ]
    assert all(a.parent == night.id for a in attempts)
    first, second = attempts
    assert first.attrs["overnight.verify.outcome"] == "not_done"
    assert first.attrs["overnight.verify.exit_code"] == 1
    assert second.attrs["overnight.verify.outcome"] == "done"
    assert second.attrs["overnight.task.outcome"] == "done"

    def children(parent: Got, prefix: str) -> list[str]:
        return [s.name for s in spans if s.parent == parent.id and s.name.startswith(prefix)]

    assert children(first, "chat ") == ["chat fake-opus"]
    assert len(children(second, "chat ")) == 4
    assert children(first, "execute_tool ") == ["execute_tool verify"]
    assert children(second, "execute_tool ") == [
        "execute_tool read_file",
        "execute_tool write_file",
        "execute_tool run_command",
        "execute_tool verify",
    ]
    # The harness's own calls outside a task hang from the night.
    assert [
        s.attrs["overnight.purpose"]
        for s in spans
        if s.name.startswith("chat ") and s.parent == night.id
    ] == ["summarize"]
    assert children(night, "execute_tool ") == ["execute_tool predicate"] * 2

    result = load_result(run_dir)
    assert night.attrs["overnight.ending"] == result["ending"] == "GOAL_MET"
    assert night.attrs["overnight.stop_reason"] == result["stop_reason"]
    assert night.attrs["overnight.exit_code"] == result["exit_code"] == 0
    assert night.attrs["overnight.run_id"] == result["run_id"]
    assert night.resource["service.name"] == "overnight"


def test_model_call_spans_carry_the_genai_usage_and_the_cost_booked(
    tmp_path: Path, collector: Collector
) -> None:
    run_dir, _, spans = exported_night(tmp_path, collector)
    calls = [s for s in spans if s.name.startswith("chat ")]
    booked = [r for r in trace_records(run_dir) if r["kind"] == "model_call"]
    assert len(calls) == len(booked) == 6  # 5 execute and the summary
    for span in calls:
        a = span.attrs
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == "fake-opus"
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "python"
    execute = [s.attrs for s in calls if s.attrs["overnight.purpose"] == "execute"]
    assert len(execute) == 5
    for a in execute:
        # every input token, cached ones included, and the cache reads and writes apart
        assert a["gen_ai.usage.input_tokens"] == 1200 + 300 + 50
        assert a["gen_ai.usage.output_tokens"] == USAGE["output"]
        assert a["gen_ai.usage.cache_read.input_tokens"] == 300
        assert a["gen_ai.usage.cache_creation.input_tokens"] == 50
    costs = sorted(s.attrs["overnight.cost_usd"] for s in calls)
    assert costs == sorted(r["cost_usd"] for r in booked)
    assert all(c > 0 for c in costs)
    total = load_result(run_dir)["spend"]["total_usd"]
    assert abs(sum(costs) - total) < 1e-9


def test_spans_have_the_times_things_happened(tmp_path: Path, collector: Collector) -> None:
    before = time.time_ns()
    _, _, spans = exported_night(tmp_path, collector)
    after = time.time_ns()
    by_id = {s.id: s for s in spans}
    for s in spans:
        assert before <= s.span.start_time_unix_nano <= s.span.end_time_unix_nano <= after
        if s.parent:
            parent = by_id[s.parent].span
            assert parent.start_time_unix_nano <= s.span.start_time_unix_nano
            assert s.span.end_time_unix_nano <= parent.end_time_unix_nano
    (command,) = named(spans, "execute_tool run_command")
    took = (command.span.end_time_unix_nano - command.span.start_time_unix_nano) / 1e9
    assert SLEEP_S <= took < SLEEP_S + 5
    # attempt 1 ended before attempt 2 began
    first, second = sorted(named(spans, "task "), key=lambda s: s.attrs["overnight.task.attempt"])
    assert first.span.end_time_unix_nano <= second.span.start_time_unix_nano


def test_no_prompt_answer_tool_result_or_secret_leaves_by_default(
    tmp_path: Path, collector: Collector
) -> None:
    run_dir, model, spans = exported_night(tmp_path, collector)
    # The night did say all of it: the brief went to the model, the tool read the file.
    assert any(PROMPT_MARK in json.dumps(c.messages) for c in model.calls)
    assert any(TOOL_OUTPUT_MARK in json.dumps(c.messages) for c in model.calls)
    assert ANSWER_MARK in (run_dir / "trace.jsonl").read_text()
    raw = collector.raw()
    assert raw and spans
    for text in (PROMPT_MARK, TOOL_OUTPUT_MARK, ANSWER_MARK, SECRET, "notes.txt", "done.txt"):
        assert text.encode() not in raw, text
    for s in spans:
        assert not any(
            k.startswith("gen_ai.input")
            or k.startswith("gen_ai.output")
            or k.startswith("gen_ai.tool.call")
            for k in s.attrs
        )


def test_content_true_exports_what_was_said_with_secrets_redacted(
    tmp_path: Path, collector: Collector
) -> None:
    _, _, spans = exported_night(tmp_path, collector, content=True)
    raw = collector.raw()
    for text in (PROMPT_MARK, TOOL_OUTPUT_MARK, ANSWER_MARK):
        assert text.encode() in raw, text
    assert SECRET.encode() not in raw
    assert b"[redacted]" in raw
    (read,) = named(spans, "execute_tool read_file")
    assert TOOL_OUTPUT_MARK in read.attrs["gen_ai.tool.call.result"]
    assert "[redacted]" in read.attrs["gen_ai.tool.call.result"]
    assert json.loads(read.attrs["gen_ai.tool.call.arguments"]) == {"path": "notes.txt"}
    (write,) = named(spans, "execute_tool write_file")
    assert SECRET not in write.attrs["gen_ai.tool.call.arguments"]
    first_call = next(s for s in spans if s.name.startswith("chat "))
    assert PROMPT_MARK in first_call.attrs["gen_ai.input.messages"]
    assert ANSWER_MARK in first_call.attrs["gen_ai.output.messages"]
