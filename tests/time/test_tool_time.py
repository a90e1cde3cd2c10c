"""External tools keep the harness's time: a call is bounded by its ``timeout_s`` and by the
night's clock, a stop ends the wait at once, and whatever a tool raises (``SystemExit`` and
``KeyboardInterrupt`` included) is a failure of that call. A mutating call given up on is an
effect of unknown outcome: recorded ``unknown`` and never made again.

The tools here are real callables run by the real toolbox in real threads, against a real
SQLite ledger. A hanging tool waits on an event the test sets at the end, so that no thread
outlives its test."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from overnight.config.tools import ExternalToolSpec
from overnight.core.tasks import Task
from overnight.effects import ToolFailure
from overnight.effects.store import SqliteEffectStore
from overnight.seams import ExecContext, ToolContext, ToolOutcome
from overnight.testing import ScriptedExecutor, ScriptedModel
from overnight.tools.external import ExternalTool
from overnight.tools.toolbox import Toolbox
from tests.helpers.nights import load_result, make_spec, run_night

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}


class Behaviour:
    """A tool body that counts its calls and does what it is told."""

    def __init__(self, act: Callable[[], Any]) -> None:
        self.act = act
        self.calls: list[str | None] = []
        self.started = threading.Event()

    def __call__(self, args: dict[str, Any], key: str | None) -> Any:
        self.calls.append(key)
        self.started.set()
        return self.act()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """What every hanging tool waits for; set when the test ends."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEffectStore]:
    s = SqliteEffectStore(tmp_path / "effects.sqlite")
    yield s
    s.close()


def tool(fn: Behaviour, *, mutating: bool, timeout_s: float | None = None) -> Toolbox:
    extra: dict[str, Any] = {} if timeout_s is None else {"timeout_s": timeout_s}
    if mutating:
        extra["task_key"] = "{order_id}:refund"
    spec = ExternalToolSpec(
        name="refund", target="unused:unused", mutating=mutating, input_schema=SCHEMA, **extra
    )
    return Toolbox([ExternalTool(spec, fn)])


def context(
    tmp_path: Path,
    store: SqliteEffectStore | None = None,
    *,
    seconds_left: Callable[[], float] = lambda: float("inf"),
    stop: Callable[[], str | None] = lambda: None,
) -> ToolContext:
    counter = itertools.count(1)

    def effect_key(name: str, _args: Mapping[str, Any]) -> str:
        return f"run-a:refund_4471:{name}:{next(counter)}"

    return ToolContext(
        root=tmp_path,
        artifacts=tmp_path / "artifacts",
        call_id="c1",
        seconds_left=seconds_left,
        stop_requested=stop,
        run_id="run-a",
        task_id="refund_4471",
        effects=store,
        effect_key=effect_key,
    )


def timed(fn: Callable[[], ToolOutcome]) -> tuple[ToolOutcome, float]:
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def test_a_hanging_read_only_tool_is_given_up_on_at_its_timeout(
    tmp_path: Path, release: threading.Event
) -> None:
    hang = Behaviour(lambda: release.wait(600))
    box = tool(hang, mutating=False, timeout_s=0.3)

    out, took = timed(lambda: box.dispatch("refund", {"order_id": "4471"}, context(tmp_path)))

    assert out.is_error and "no answer within 0.3 s" in out.content
    assert took < 5, f"the call took {took:.1f} s past a 0.3 s timeout"
    assert len(hang.calls) == 1


def test_a_mutating_tool_that_hangs_is_unknown_and_never_called_again(
    tmp_path: Path, store: SqliteEffectStore, release: threading.Event
) -> None:
    hang = Behaviour(lambda: release.wait(600))
    box = tool(hang, mutating=True, timeout_s=0.3)
    ctx = context(tmp_path, store)

    first, took = timed(lambda: box.dispatch("refund", {"order_id": "4471"}, ctx))

    assert took < 5
    assert first.is_error and "may or may not have happened" in first.content
    [row] = store.all()
    assert row.state == "unknown" and "no answer within 0.3 s" in (row.error or "")
    # The model tries again: the effect's task key is taken by a row nobody can settle.
    second = box.dispatch("refund", {"order_id": "4471"}, ctx)
    assert second.is_error and "refused" in second.content
    assert len(hang.calls) == 1, "a call of unknown outcome was made again"
    assert [r.state for r in store.all()] == ["unknown"]


def test_the_night_clock_cuts_a_call_shorter_than_its_timeout(
    tmp_path: Path, release: threading.Event
) -> None:
    hang = Behaviour(lambda: release.wait(600))
    box = tool(hang, mutating=False, timeout_s=600)
    ctx = context(tmp_path, seconds_left=lambda: 0.4)

    out, took = timed(lambda: box.dispatch("refund", {"order_id": "4471"}, ctx))

    assert out.is_error and "no answer within 0.4 s" in out.content
    assert took < 5


def test_with_no_time_left_the_tool_is_not_called_and_nothing_is_written(
    tmp_path: Path, store: SqliteEffectStore
) -> None:
    called = Behaviour(lambda: {"id": "re_1"})
    box = tool(called, mutating=True)

    out = box.dispatch(
        "refund", {"order_id": "4471"}, context(tmp_path, store, seconds_left=lambda: 0)
    )

    assert out.is_error and "no time is left" in out.content
    assert called.calls == [] and store.all() == []


def test_a_stop_ends_the_wait_at_once_and_leaves_the_effect_unknown(
    tmp_path: Path, store: SqliteEffectStore, release: threading.Event
) -> None:
    hang = Behaviour(lambda: release.wait(600))
    box = tool(hang, mutating=True, timeout_s=600)
    stop_at = threading.Event()
    ctx = context(tmp_path, store, stop=lambda: "sigterm" if stop_at.is_set() else None)
    threading.Thread(
        target=lambda: (hang.started.wait(10), time.sleep(0.2), stop_at.set()), daemon=True
    ).start()

    out, took = timed(lambda: box.dispatch("refund", {"order_id": "4471"}, ctx))

    assert took < 5, f"a stop took {took:.1f} s to end the wait on a 600 s call"
    assert out.is_error and "stopping (sigterm)" in out.content
    [row] = store.all()
    assert row.state == "unknown" and "sigterm" in (row.error or "")


def test_a_stop_already_requested_starts_no_call(tmp_path: Path, store: SqliteEffectStore) -> None:
    called = Behaviour(lambda: {"id": "re_1"})
    box = tool(called, mutating=True)

    out = box.dispatch(
        "refund", {"order_id": "4471"}, context(tmp_path, store, stop=lambda: "sigint")
    )

    assert out.is_error and called.calls == [] and store.all() == []


@pytest.mark.parametrize(
    "raised",
    [SystemExit(0), SystemExit(3), KeyboardInterrupt(), GeneratorExit()],
    ids=["exit0", "exit3", "keyboard_interrupt", "generator_exit"],
)
def test_whatever_a_read_only_tool_raises_is_a_failure_of_the_call(
    tmp_path: Path, raised: BaseException
) -> None:
    def act() -> Any:
        raise raised

    box = tool(Behaviour(act), mutating=False)

    out = box.dispatch("refund", {"order_id": "4471"}, context(tmp_path))  # no exception here

    assert out.is_error and type(raised).__name__ in out.content


def test_sys_exit_in_a_mutating_tool_leaves_the_effect_unknown(
    tmp_path: Path, store: SqliteEffectStore
) -> None:
    def act() -> Any:
        sys.exit(0)

    box = tool(Behaviour(act), mutating=True)

    out = box.dispatch("refund", {"order_id": "4471"}, context(tmp_path, store))

    assert out.is_error and "SystemExit" in out.content
    [row] = store.all()
    assert row.state == "unknown", "a tool that ended itself may have done its effect first"


def test_only_a_final_refusal_leaves_a_mutating_call_failed(
    tmp_path: Path, store: SqliteEffectStore
) -> None:
    def act() -> Any:
        raise ToolFailure("400 amount too large", retryable=False)

    box = tool(Behaviour(act), mutating=True)

    out = box.dispatch("refund", {"order_id": "4471"}, context(tmp_path, store))

    assert out.is_error and "did not happen" in out.content
    assert [r.state for r in store.all()] == ["failed"]


def test_a_quick_answer_comes_back_unchanged(tmp_path: Path, store: SqliteEffectStore) -> None:
    box = tool(Behaviour(lambda: {"id": "re_1"}), mutating=True, timeout_s=5)

    out = box.dispatch("refund", {"order_id": "4471"}, context(tmp_path, store))

    assert not out.is_error and '"re_1"' in out.content
    assert [r.state for r in store.all()] == ["confirmed"]


def test_a_tool_timeout_is_checked_like_every_other_setting() -> None:
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            ExternalToolSpec(name="t", target="m:f", mutating=False, timeout_s=bad)
    assert ExternalToolSpec(name="t", target="m:f", mutating=False, timeout_s=2.5).timeout_s == 2.5


def test_an_executor_calling_sys_exit_ends_the_night_with_a_result(
    repo: Path, tmp_path: Path
) -> None:
    """Not a tool, but the same rule: user code cannot end the process around the harness."""

    def leave(_task: Task, _ctx: ExecContext) -> None:
        sys.exit(0)

    executor = ScriptedExecutor({"a_1": [leave]})
    spec = make_spec(repo, tasks=[{"id": "a_1", "brief": "b", "verify": "true"}])

    rd, r = run_night(spec, tmp_path / "run", model=ScriptedModel(), executor=executor)

    assert r.stop_reason == "UNRECOVERABLE_ERROR:internal_error" and r.exit_code == 4
    assert "SystemExit" in r.message or "SystemExit" in load_result(rd.path)["message"]
