"""An outage is shown as it happens: while a call's provider keeps failing, the run's
``outage.json`` (read by ``overnight status`` and the live panel) says since when the model has
been unreachable, how many retries were made and when the night gives up; it is gone once a
call gets through. The night's attempts that never reached the provider cost nothing, and the
audit recomputes the same spend from the journal."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from overnight.audit.run import audit_run
from overnight.cli.panel import render_panel
from overnight.cli.status import read_status, render_status
from overnight.clock import FakeClock
from overnight.config.spec import parse_spec
from overnight.core.errors import DependencyUnavailable
from overnight.messages.types import ModelRequest
from overnight.models.retry import Outage, RetryingClient
from overnight.store.journal import read_journal
from overnight.store.rundir import RunDir
from overnight.testing import text_answer
from overnight.testing.fakes import FlakyModel
from tests.helpers.nights import command_task, run_night, spec_data
from tests.helpers.provider import LocalProvider

REQUEST = ModelRequest(
    model="m",
    purpose="plan",
    system="s",
    messages=[{"role": "user", "content": "go"}],
    max_tokens=16,
)


class Watch:
    def __init__(self) -> None:
        self.seen: list[Outage | None] = []

    def retrying(self, outage: Outage) -> None:
        self.seen.append(outage)

    def over(self) -> None:
        self.seen.append(None)


def retrying(failures: list[str], watch: Watch, **kw: Any) -> RetryingClient:
    clock = FakeClock()
    flaky = FlakyModel(lambda r: text_answer("done"), lambda r: list(failures))
    return RetryingClient(
        flaky,
        sleep=clock.advance,
        monotonic=clock.monotonic,
        jitter=lambda: 1.0,  # no jitter: waits of 1, 2, 4 s
        watch=watch,
        **kw,
    )


def test_the_watch_is_told_of_each_retry_and_of_the_end_of_the_outage() -> None:
    watch = Watch()
    client = retrying(["overloaded", "timeout", "overloaded"], watch, outage_limit_s=600)
    assert client.complete(REQUEST).text() == "done"
    outages = [o for o in watch.seen if o is not None]
    assert [(o.retries, o.down_s, o.wait_s) for o in outages] == [(1, 0, 1), (2, 1, 2), (3, 3, 4)]
    assert [o.gives_up_in_s for o in outages] == [600, 599, 597]
    assert [o.attempts_left for o in outages] == [19, 18, 17]
    assert watch.seen[-1] is None and watch.seen.count(None) == 1


def test_a_call_that_gives_up_ends_the_outage_too_and_one_that_never_failed_says_nothing() -> None:
    watch = Watch()
    with pytest.raises(DependencyUnavailable):
        retrying(["overloaded"] * 5, watch, max_attempts=3).complete(REQUEST)
    assert [o.retries if o else None for o in watch.seen] == [1, 2, None]
    quiet = Watch()
    retrying([], quiet).complete(REQUEST)
    assert quiet.seen == []


# -- a night whose provider refuses connections for a while ---------------------------------

REFUSALS = 3
LIMIT_S = 600.0


def provider_answer(method: str, path: str, body: Any) -> tuple[int, Any]:
    """Anthropic's Messages API, answering with a text (the night's one call: its summary)."""
    return 200, {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": "t_1 is done; the goal is met."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


class StatusWatchingClock(FakeClock):
    """The night's clock: at each retry wait it reads ``overnight status`` as another process
    would, and lets the provider listen once ``REFUSALS`` attempts were refused."""

    def __init__(self, run_dir: Path, provider: LocalProvider) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.provider = provider
        self.statuses: list[dict[str, Any]] = []

    def sleep(self, seconds: float) -> None:
        if RunDir(self.run_dir).outage.exists():
            status = read_status(self.run_dir)
            retries = status["outage"]["retries"]
            if not self.statuses or self.statuses[-1]["outage"]["retries"] != retries:
                self.statuses.append(status)
            if retries >= REFUSALS:
                self.provider.listen()
        self.advance(seconds)


def text_of(renderable: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_status_shows_the_outage_while_it_lasts_and_the_refused_attempts_cost_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    run_dir = tmp_path / "run"
    with LocalProvider(provider_answer, listening=False) as provider:
        data = spec_data(
            repo,
            tasks=[command_task("t_1", "touch done", "test -f done")],
            predicate="test -f done",
        )
        data["model"] = {
            "provider": "anthropic",
            "name": "fake-opus",
            "base_url": provider.url,
            "stream": False,
            "outage_limit_s": LIMIT_S,
        }
        clock = StatusWatchingClock(run_dir, provider)
        rd, result = run_night(parse_spec(data, repo), run_dir, clock=clock)

    assert result.stop_reason == "GOAL_MET", result.message
    # While it lasted: since when, how many retries, when the night gives up.
    assert [s["outage"]["retries"] for s in clock.statuses] == list(range(1, REFUSALS + 1))
    first, last = clock.statuses[0]["outage"], clock.statuses[-1]["outage"]
    assert all(s["state"] == "running" for s in clock.statuses)
    assert first["since"] == last["since"]
    since = datetime.fromisoformat(last["since"])
    assert datetime.fromisoformat(last["gives_up_at"]) == since + timedelta(seconds=LIMIT_S)
    assert datetime.fromisoformat(last["updated_at"]) > since
    assert "connection was refused" in last["error"]
    shown = render_status(clock.statuses[-1])
    assert f"model: unreachable since {last['since']}, {REFUSALS} retries" in shown
    assert f"gives up at {last['gives_up_at']}" in shown
    assert "unreachable since" in text_of(render_panel(clock.statuses[-1]))
    # Over once a call got through.
    assert not rd.outage.exists()
    after = read_status(rd.path)
    assert "outage" not in after and "unreachable" not in render_status(after)

    # The refused attempts were released at nothing, saying why; the answered ones booked.
    journal = read_journal(rd.spend)
    released = [r for r in journal if r["kind"] == "release"]
    assert [r["not_sent"] for r in released] == ["connection_refused"] * REFUSALS
    booked = [r for r in journal if r["kind"] == "spend"]
    assert [r["purpose"] for r in booked] == ["summarize"]  # the closing summary, retried
    per_call = (100 * 5.0 + 20 * 25.0) / 1e6
    assert result.spend.total_usd == pytest.approx(per_call * len(booked))
    retries = [e for e in read_journal(rd.trace) if e["kind"] == "model_retry"]
    assert [e["retries"] for e in retries] == list(range(1, REFUSALS + 1))

    # The audit recomputes the same figure from the journal, and names the released attempts.
    audit = audit_run(rd.path, rerun=False)
    assert audit.disagreements == [], [c for c in audit.checks if not c.agrees]
    assert audit.recomputed.total_usd == result.spend.total_usd
    calls = next(c for c in audit.checks if c.name == "spend.calls")
    assert f"{REFUSALS} attempt(s) released at $0 ({REFUSALS} never reached the provider)" in (
        calls.detail
    )
