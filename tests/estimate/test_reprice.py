"""``overnight reprice``: a recorded night billed again from its exact recorded usage, checked
against a recomputation from the trace written here, independently of the code under test."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.demo import run_demo
from overnight.cli.main import main
from overnight.core.budget import Price
from overnight.estimate.reprice import reprice_run
from overnight.night.workload import CallFacts, TaskFacts, WorkloadFacts, Workspace
from overnight.store.journal import read_intact_records

FIELDS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("night")
    assert run_demo(where, quiet=True) == 0
    return where / "run"


def reprice(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["reprice", *args, "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else {}), out.err


def model_calls(run: Path) -> list[dict[str, Any]]:
    return [
        e
        for e in read_intact_records(run / "trace.jsonl")
        if e["kind"] == "model_call" and not e.get("released")
    ]


def cost(usage: dict[str, int], rates: dict[str, float]) -> Decimal:
    return sum((Decimal(usage[f]) * Decimal(str(rates[f])) for f in FIELDS), Decimal(0)) / Decimal(
        10**6
    )


def cents(x: Decimal | float) -> Decimal:
    return Decimal(str(x)).quantize(Decimal("0.01"))


def recorded_rates(run: Path) -> dict[str, float]:
    prices = json.loads((run / "run.json").read_text())["prices"]
    rates: dict[str, float] = prices["scripted-opus"]
    return rates


def test_under_its_own_prices_the_bill_comes_back_to_the_cent(
    night: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, r, _ = reprice(capsys, str(night))
    assert code == 0
    bill = json.loads((night / "result.json").read_text())["spend"]["total_usd"]
    assert cents(r["new_usd"]) == cents(r["old_usd"]) == cents(bill)
    assert r["new_usd"] == r["old_usd"]  # and to the nano-dollar
    assert r["exact"] is True and r["recorded_policy"] == "5m"
    by_purpose = {row["purpose"]: row["new_usd"] for row in r["by_purpose"]}
    assert by_purpose == json.loads((night / "result.json").read_text())["spend"]["by_purpose"]
    independent = sum(cost(e["usage"], recorded_rates(night)) for e in model_calls(night))
    assert cents(independent) == cents(r["new_usd"])
    assert "would have paid for all" in r["cap"]["text"]


def test_another_models_prices_from_a_file(
    night: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text("[cheap]\ninput = 0.8\noutput = 4.0\n")
    code, r, _ = reprice(capsys, str(night), "--model", "cheap", "--prices", str(prices))
    assert code == 0 and r["exact"] is True and r["replaces"] == "scripted-opus"
    # default cache rates: reads 0.1x, 5-minute writes 1.25x, 1-hour writes 2x the input rate
    rates = {"input": 0.8, "output": 4.0, "cache_read": 0.08}
    rates |= {"cache_write_5m": 1.0, "cache_write_1h": 1.6}
    independent = sum(cost(e["usage"], rates) for e in model_calls(night))
    assert cents(r["new_usd"]) == cents(independent)
    assert abs(Decimal(str(r["new_usd"])) - independent) < Decimal("0.000001")
    assert r["new_usd"] < r["old_usd"]


def test_caching_off_is_exact_every_input_token_uncached(
    night: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, r, _ = reprice(capsys, str(night), "--cache", "off")
    assert code == 0 and r["exact"] is True
    rates = recorded_rates(night)
    independent = sum(
        (sum(e["usage"][f] for f in FIELDS if f != "output") * Decimal(str(rates["input"])))
        / Decimal(10**6)
        + e["usage"]["output"] * Decimal(str(rates["output"])) / Decimal(10**6)
        for e in model_calls(night)
    )
    assert cents(r["new_usd"]) == cents(independent) and r["new_usd"] > r["old_usd"]


def one_hour(run: Path, floor: int) -> Decimal:
    """The 1-hour policy recomputed from the trace: a task's agent calls (execute, compact)
    read the previous call's prompt when within an hour of it and write the rest; a prompt
    under ``floor`` tokens neither reads nor writes; other calls have their writes moved to
    the 1-hour rate."""
    rates = recorded_rates(run)
    total = Decimal(0)
    task, last_prompt, last_at = None, 0, -1e18
    stopped = False
    for e in read_intact_records(run / "trace.jsonl"):
        if e["kind"] == "task" and e.get("event") == "started":
            task, last_prompt, last_at = e["task"], 0, -1e18
        if e["kind"] == "decision" and e.get("decision") == "stop":
            stopped = True
        if e["kind"] != "model_call" or e.get("released"):
            continue
        u = e["usage"]
        prompt = sum(u[f] for f in FIELDS if f != "output")
        if task is not None and not stopped and e["purpose"] in ("execute", "compact"):
            read = min(last_prompt, prompt) if e["t_start"] - last_at <= 3600 else 0
            read = read if last_prompt >= floor else 0
            write = prompt - read if prompt >= floor else 0
            new = {"input": prompt - read - write, "output": u["output"], "cache_read": read}
            new |= {"cache_write_5m": 0, "cache_write_1h": write}
            if prompt >= floor:
                last_prompt, last_at = prompt, e["t_start"]
        else:
            writes = u["cache_write_5m"] + u["cache_write_1h"]
            new = {**u, "cache_write_5m": 0, "cache_write_1h": writes}
        total += cost(new, rates)
    return total


def test_the_one_hour_cache_is_derived_from_the_recorded_call_times(
    night: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, r, _ = reprice(capsys, str(night), "--cache", "1h")
    assert code == 0 and r["exact"] is False and r["cache"] == "1h"
    assert any("derived" in n for n in r["notes"])
    floor = json.loads((night / "spec.json").read_text())["agent"]["min_cacheable_tokens"]
    assert cents(r["new_usd"]) == cents(one_hour(night, floor))
    assert r["new_usd"] != r["old_usd"]


def test_a_bad_prices_file_names_the_flag(
    night: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text("[cheap]\ninput = -1\noutput = 4.0\n")
    code, _, err = reprice(capsys, str(night), "--model", "cheap", "--prices", str(prices))
    assert code == 64 and "--prices [cheap].input" in err
    code, _, err = reprice(capsys, str(night), "--model", "nobody-knows-this-model")
    assert code == 64 and "--model" in err and "nobody-knows-this-model" in err


# --- what the cap would have allowed ---------------------------------------------------------


def calls(task: str, *usd: float, start: float) -> TaskFacts:
    return TaskFacts(
        id=task,
        outcome="verified",
        calls=tuple(
            CallFacts(purpose="execute", model="m", input=int(u * 1e6), usd=u, at=start + i)
            for i, u in enumerate(usd)
        ),
    )


def test_the_cap_check_says_where_the_new_bill_would_have_been_refused() -> None:
    facts = WorkloadFacts(
        run_id="r",
        workspace=Workspace(path="/w"),
        tasks_verified=3,
        tasks=(
            calls("a", 1.0, 1.0, start=0),
            calls("b", 1.0, 1.0, start=10),
            calls("c", 1.0, start=20),
        ),
    )
    price = Price(input=1.0, output=1.0, cache_read=0.1, cache_write_5m=1.25, cache_write_1h=2.0)
    same = reprice_run(facts, lambda _: price, cap=(10.0, 0.9, 0.92))
    assert same.new_usd == 5.0 and same.cap is not None and same.cap.calls_paid == 5
    double = Price(input=2.0, output=2.0, cache_read=0.2, cache_write_5m=2.5, cache_write_1h=4.0)
    dearer = reprice_run(facts, lambda _: double, cap=(5.0, 0.5, 0.92))
    cap = dearer.cap
    assert cap is not None
    # $2 a call against a $4.60 line: the third call (b's first) is refused
    assert (cap.calls_paid, cap.refused_at_task, cap.verified_paid) == (2, "b", ("a",))
    assert cap.tasks_started_past_finish == ("b", "c")  # $4 spent before b, past $2.50
