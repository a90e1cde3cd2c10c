"""``overnight calibrate``: the drift judge measured on labelled queues, with fake judges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.calibration import (
    CONFIGURED,
    LabelledQueue,
    QueueResult,
    Thresholds,
    agrees,
    band_of,
    bundled_text,
    calibrate,
    confusion_matrix,
    distribution,
    load_queues,
    parse_set,
    separation,
    severity_order,
    suggest_threshold,
    summarize,
)
from overnight.cli.main import main
from overnight.core.budget import Ledger, Price, PriceTable
from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.errors import ConfigError
from overnight.core.tasks import Task
from overnight.messages.answers import DRIFT_TOOL
from overnight.messages.types import ModelRequest, estimate_input_tokens
from overnight.models.provider_errors import ProviderError
from overnight.models.retry import RetryingClient
from overnight.night.harness_requests import drift_request
from overnight.testing import FunctionModel, ScriptedModel, tool_answer, usage_dict
from tests.helpers.toml import dumps

MODEL = "fake-opus"
PRICE = Price(5.0, 25.0, 0.5, 6.25, 10.0)
#: A drift call as a real one is billed: the prompt with its tool schema, a short verdict.
USAGE = usage_dict(input=1450, output=260)
CALL_USD = (1450 * 5.0 + 260 * 25.0) / 1_000_000
PLAIN = "the judge cannot tell these sets apart at 0.3; do not trust the prune line"

BUNDLED = load_queues()
_BY_CONTENT = {(q.goal, tuple(t.id for t in q.queue)): q for q in BUNDLED.queues}


def queue_of(request: ModelRequest) -> LabelledQueue:
    """The labelled queue a drift request was built from (read back from its prompt)."""
    content = request.messages[-1]["content"]
    goal = content.split("<original_goal>", 1)[1].split("</original_goal>", 1)[0]
    tasks = json.loads(content.split("<queue>", 1)[1].split("</queue>", 1)[0])
    return _BY_CONTENT[(goal, tuple(t["id"] for t in tasks))]


def verdict(score: float, off: list[str] | None = None) -> dict[str, Any]:
    return {
        "reasoning": "Compared each task with the goal.",
        "off_goal_task_ids": off or [],
        "drift_score": score,
    }


def answer(score: float, off: list[str] | None = None) -> dict[str, Any]:
    return tool_answer(DRIFT_TOOL.name, verdict(score, off), USAGE)


# -- judges (module level, so the CLI can name them as python targets) ----------------------


def perfect(request: ModelRequest) -> dict[str, Any]:
    """Scores from the labels: aligned 0.05, drifted 0.35 + 0.6 x severity, naming the
    expected off-goal tasks."""
    q = queue_of(request)
    if q.label == "aligned":
        return answer(0.05)
    return answer(round(0.35 + 0.6 * q.severity, 3), q.off_goal_task_ids)


def flat_low(request: ModelRequest) -> dict[str, Any]:
    """The false-negative bias at its worst: every queue reads as fine."""
    return answer(0.1)


def biased(request: ModelRequest) -> dict[str, Any]:
    """Ranks correctly, but drifted queues land at 0.2-0.35, mostly under the prune line."""
    q = queue_of(request)
    if q.label == "aligned":
        return answer(0.05)
    return answer(round(0.2 + 0.15 * q.severity, 4), q.off_goal_task_ids)


def run(fn: Any, usd: float = 2.0) -> tuple[Any, FunctionModel]:
    model = FunctionModel(fn)
    ledger = Ledger(prices=PriceTable({MODEL: PRICE}), limit_usd=usd)
    report = calibrate(model, BUNDLED, model=MODEL, max_tokens=4096, ledger=ledger)
    return report, model


# -- the bundled data ------------------------------------------------------------------------


def test_bundled_set_is_ten_aligned_and_ten_graded_drifted() -> None:
    aligned, drifted = BUNDLED.by_label("aligned"), BUNDLED.by_label("drifted")
    assert (len(aligned), len(drifted)) == (10, 10)
    assert all(q.severity == 0 and not q.off_goal_task_ids for q in aligned)
    severities = sorted(q.severity for q in drifted)
    assert len(set(severities)) == 10  # graded: no two at the same severity
    assert severities[0] < 0.25 and severities[-1] == 1.0
    assert all(q.off_goal_task_ids for q in drifted)
    assert len({q.goal for q in BUNDLED.queues}) >= 10  # varied goals


def test_latency_chain_is_present_and_labelled_drifted() -> None:
    chain = [
        "Profile endpoints",
        "Add caching",
        "Refactor the cache layer",
        "Add cache metrics",
        "Build a metrics dashboard",
        "Add dashboard auth",
    ]
    found = [q for q in BUNDLED.queues if [t.title for t in q.queue] == chain]
    assert len(found) == 1
    q = found[0]
    assert "p95 latency" in q.goal
    assert q.label == "drifted"
    assert q.off_goal_task_ids == ["metrics-dashboard", "dashboard-auth"]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d["queues"][0].update(off_goal_task_ids=["profile-orders"]), "aligned"),
        (lambda d: d["queues"][10].update(off_goal_task_ids=["nope"]), "not in the queue"),
        (lambda d: d["queues"][10].update(severity=0.0), "severity above 0"),
        (lambda d: d["queues"][0].update(label="sideways"), "label"),
        (lambda d: d.update(queues=d["queues"][:10]), "both labelled sets"),
        (lambda d: d["queues"][1].update(id=d["queues"][0]["id"]), "repeat"),
        (lambda d: d["queues"][0]["queue"][0].pop("brief"), "brief"),
    ],
)
def test_a_bad_file_is_refused_at_load(mutate: Any, problem: str) -> None:
    data = json.loads(bundled_text())
    mutate(data)
    with pytest.raises(ConfigError) as err:
        parse_set(json.dumps(data))
    assert problem in str(err.value)


# -- judging ---------------------------------------------------------------------------------


def test_perfect_judge_agrees_on_all_twenty_and_separates() -> None:
    report, model = run(perfect)
    assert report.agreement["all"].agree == 20
    assert report.agreement["aligned"].agree == 10 and report.agreement["drifted"].agree == 10
    assert report.separation.separable and report.separation.at_prune
    assert report.trusted and report.exit_code == 0
    assert (report.calls, report.retries, report.queues_judged) == (20, 0, 20)
    assert report.spend_usd == pytest.approx(20 * CALL_USD)
    assert report.confusion["aligned"] == {"none": 10, "prune": 0, "halt": 0}
    assert sum(report.confusion["drifted"].values()) == 10
    assert report.confusion["drifted"]["none"] == 0
    assert report.severity_order == 1.0
    assert not any(PLAIN in s for s in report.statements)
    # The judge saw exactly the production prompt, built from the labelled queue.
    first = BUNDLED.queues[0]
    assert model.calls[0] == drift_request(MODEL, 4096, first.goal, first.tasks())


def test_bands_come_from_the_production_gate() -> None:
    report, _ = run(perfect)
    for r in report.results:
        assert r.score is not None
        v = DriftVerdict(reasoning="r", off_goal_task_ids=r.off_goal, drift_score=r.score)
        q = next(q for q in BUNDLED.queues if q.id == r.id)
        assert r.band == drift_gate(q.tasks(), v).action


def test_flat_low_judge_cannot_separate_and_has_no_lower_threshold() -> None:
    report, _ = run(flat_low)
    assert report.agreement["aligned"].agree == 10
    assert report.agreement["drifted"].agree == 0
    assert report.confusion["drifted"] == {"none": 10, "prune": 0, "halt": 0}
    assert not report.separation.separable
    assert report.separation.suggested_threshold is None
    assert PLAIN in report.statements
    assert any("no lower threshold exists" in s for s in report.statements)
    assert not report.trusted and report.exit_code == 3


def test_biased_judge_is_not_trusted_and_gets_a_lower_threshold() -> None:
    report, _ = run(biased)
    sep = report.separation
    assert sep.separable and not sep.at_prune
    drifted = report.distributions["drifted"]
    assert drifted.min == pytest.approx(0.2 + 0.15 * 0.17)
    assert drifted.max == pytest.approx(0.35)
    assert sep.suggested_threshold == 0.13 and sep.direction == "lower"
    assert sep.window == (0.05, drifted.min)
    assert PLAIN in report.statements
    assert any("lower the threshold to 0.13" in s for s in report.statements)
    # Only the drifted queues the judge put above 0.3 agree (severity 0.75, 0.8, 1.0).
    assert report.agreement["drifted"].agree == 3
    assert report.exit_code == 3


def test_an_invalid_verdict_is_asked_for_again_once_and_counted() -> None:
    seen: set[str] = set()

    def first_invalid(request: ModelRequest) -> dict[str, Any]:
        q = queue_of(request)
        if q.id not in seen:
            seen.add(q.id)
            return answer(1.7)  # out of [0, 1]: fails the schema
        return perfect(request)

    report, model = run(first_invalid)
    assert (report.calls, report.retries, report.unreadable) == (40, 20, 0)
    assert all(r.calls == 2 for r in report.results)
    assert report.trusted
    retry = model.calls[1].messages[-1]["content"]
    assert "Your previous answer was rejected" in retry and "drift_score" in retry


def test_a_verdict_invalid_twice_is_unreadable_and_not_trusted() -> None:
    target = BUNDLED.queues[12].id

    def one_broken(request: ModelRequest) -> dict[str, Any]:
        if queue_of(request).id == target:
            return tool_answer(DRIFT_TOOL.name, {"drift_score": 0.9}, USAGE)
        return perfect(request)

    report, _ = run(one_broken)
    broken = next(r for r in report.results if r.id == target)
    assert (broken.status, broken.calls, broken.agrees) == ("unreadable", 2, False)
    assert broken.error is not None and "reasoning" in broken.error
    assert (report.calls, report.retries, report.unreadable, report.queues_judged) == (21, 1, 1, 19)
    assert not report.trusted and report.exit_code == 3
    assert any("failed the schema twice" in s for s in report.statements)


def test_the_money_cap_refuses_calls_beyond_it() -> None:
    report, model = run(perfect, usd=0.3)
    assert report.stopped is not None and report.stopped.reason == "money_cap"
    judged = report.queues_judged
    assert 0 < judged < 20
    assert len(model.calls) == report.calls == judged  # the refused call was never made
    assert report.spend_usd == pytest.approx(judged * CALL_USD)
    assert report.spend_usd <= 0.3
    assert [r.status for r in report.results] == ["judged"] * judged + ["not_judged"] * (
        20 - judged
    )
    assert any(f"stopped after {judged} of 20 queues judged" in s for s in report.statements)
    assert not report.trusted and report.exit_code == 3


def test_a_failing_provider_stops_the_calibration() -> None:
    def down(request: ModelRequest) -> dict[str, Any]:
        if queue_of(request).id == BUNDLED.queues[3].id:
            raise ConnectionError("connection reset")
        return perfect(request)

    report, _ = run(down)
    assert report.stopped is not None and report.stopped.reason == "model_error"
    assert report.queues_judged == 3 and report.exit_code == 4


def test_scripted_model_with_realistic_usage_is_priced() -> None:
    model = ScriptedModel(drift=lambda r: verdict(0.05), usage=USAGE)
    ledger = Ledger(prices=PriceTable({MODEL: PRICE}), limit_usd=2.0)
    report = calibrate(model, BUNDLED, model=MODEL, max_tokens=2048, ledger=ledger)
    assert model.purposes() == ["drift"] * 20
    assert report.spend_usd == pytest.approx(20 * CALL_USD)
    assert report.tokens == 20 * (1450 + 260)


def test_every_attempt_of_a_retried_judge_call_is_booked() -> None:
    # The first attempt at each queue's call dies after the provider had the request (a
    # dropped stream): it may be billed, so it is booked at its worst case, and the retry is
    # booked from its usage. A ledger that reserved once per call would book half of this.
    tried: set[str] = set()

    def dropped_once(request: ModelRequest) -> dict[str, Any]:
        q = queue_of(request)
        if q.id not in tried:
            tried.add(q.id)
            raise ProviderError(
                "anthropic", "stream dropped", status=None, retryable=True, maybe_billed=True
            )
        return perfect(request)

    inner = FunctionModel(dropped_once)
    client = RetryingClient(inner, max_attempts=3, sleep=lambda s: None, jitter=lambda: 0.0)
    ledger = Ledger(prices=PriceTable({MODEL: PRICE}), limit_usd=50.0)
    report = calibrate(client, BUNDLED, model=MODEL, max_tokens=4096, ledger=ledger)
    assert report.queues_judged == 20 and len(inner.calls) == 40
    worst = sum(
        (estimate_input_tokens(r) * 5.0 + r.max_tokens * 25.0) / 1_000_000 for r in inner.calls[::2]
    )
    assert report.spend_usd == pytest.approx(20 * CALL_USD + worst, rel=1e-6)
    assert report.spend_usd > 20 * CALL_USD + 20 * 4096 * 25.0 / 1_000_000 * 0.99


# -- the statistics, pure ----------------------------------------------------------------------


def result(id: str, label: Any, score: float | None, severity: float = 0.0) -> QueueResult:
    return QueueResult(
        id=id,
        label=label,
        severity=severity,
        score=score,
        status="judged" if score is not None else "not_judged",
        band=band_of(score) if score is not None else None,
        agrees=agrees(label, score, [], []),
        calls=1 if score is not None else 0,
    )


HAND = [
    result("a1", "aligned", 0.0),
    result("a2", "aligned", 0.3),  # exactly on the prune line: none
    result("a3", "aligned", 0.45),  # prune
    result("a4", "aligned", 0.1),
    result("d1", "drifted", 0.3, 0.2),  # exactly on the line: not caught
    result("d2", "drifted", 0.5, 0.4),  # exactly on the halt line: prune
    result("d3", "drifted", 0.51, 0.6),  # halt
    result("d4", "drifted", 0.9, 1.0),
    result("d5", "drifted", None, 0.8),  # not judged
]


def test_confusion_matrix_on_hand_built_results() -> None:
    assert confusion_matrix(HAND) == {
        "aligned": {"none": 3, "prune": 1, "halt": 0},
        "drifted": {"none": 1, "prune": 1, "halt": 2},
    }
    lowered = confusion_matrix(HAND, Thresholds(prune_above=0.2, halt_above=0.5))
    assert lowered["drifted"] == {"none": 0, "prune": 2, "halt": 2}


def test_distributions_on_hand_built_results() -> None:
    report = summarize(HAND, model=MODEL)
    a, d = report.distributions["aligned"], report.distributions["drifted"]
    assert (a.n, a.min, a.median, a.max) == (4, 0.0, 0.2, 0.45)
    assert a.scores == [0.0, 0.1, 0.3, 0.45]
    assert (d.n, d.min, d.max) == (4, 0.3, 0.9) and d.median == pytest.approx(0.505)
    assert distribution([]).n == 0 and distribution([]).median is None
    assert report.queues_judged == 8 and report.queues_total == 9
    assert report.agreement["aligned"].agree == 3
    assert report.agreement["drifted"].agree == 3  # d2, d3, d4; d1 on the line; d5 unjudged
    assert report.agreement["drifted"].judged == 4 and report.agreement["drifted"].total == 5
    assert not report.separation.separable  # 0.45 aligned >= 0.3 drifted
    assert PLAIN in report.statements


def test_separation_and_suggested_thresholds() -> None:
    ok = separation([0.0, 0.3], [0.31, 0.9])
    assert ok.separable and ok.at_prune and not ok.at_halt and ok.suggested_threshold is None
    # The gate is strict: a drifted score of exactly 0.3 is not caught at 0.3.
    on_line = separation([0.1], [0.3, 0.8])
    assert on_line.separable and not on_line.at_prune
    assert on_line.suggested_threshold == 0.2 and on_line.direction == "lower"
    overlap = separation([0.1, 0.25], [0.2, 0.9])
    assert not overlap.separable and overlap.suggested_threshold is None
    high = separation([0.1, 0.4], [0.6, 0.9])
    assert not high.at_prune and high.direction == "higher"
    assert high.suggested_threshold == 0.5
    both = separation([0.1], [0.55])
    assert both.at_prune and both.at_halt
    assert not separation([], [0.5]).separable


def test_suggest_threshold_stays_inside_the_window() -> None:
    assert suggest_threshold(0.05, 0.2255) == 0.13
    assert suggest_threshold(0.28, 0.29) == 0.28
    assert suggest_threshold(0.1, 0.1) is None
    for lo, hi in [(0.0, 0.01), (0.123, 0.124), (0.29, 0.3), (0.0, 1.0)]:
        t = suggest_threshold(lo, hi)
        assert t is not None and lo <= t < hi


def test_agreement_definition() -> None:
    assert agrees("aligned", 0.3, [], [])
    assert not agrees("aligned", 0.31, [], [])
    assert not agrees("drifted", 0.3, ["x"], ["x"])
    assert agrees("drifted", 0.31, ["x", "y"], ["y", "z"])
    assert not agrees("drifted", 0.9, ["w"], ["y", "z"])  # caught, but the wrong tasks
    assert agrees("drifted", 0.9, [], [])  # no expected ids given: the score decides
    assert not agrees("drifted", None, [], [])


@pytest.mark.parametrize("score", [0.0, 0.3, 0.30001, 0.5, 0.50001, 1.0])
def test_band_of_matches_the_gate(score: float) -> None:
    queue = [Task(id="t", command="true", verify="true")]
    v = DriftVerdict(reasoning="r", off_goal_task_ids=[], drift_score=score)
    assert band_of(score, CONFIGURED) == drift_gate(queue, v).action


def test_severity_order() -> None:
    rows = [
        result("d1", "drifted", 0.4, 0.2),
        result("d2", "drifted", 0.6, 0.5),
        result("d3", "drifted", 0.5, 0.8),
    ]
    assert severity_order(rows) == pytest.approx(2 / 3)
    assert severity_order(rows[:1]) is None


# -- the command line -------------------------------------------------------------------------


def write_spec(tmp_path: Path, judge: str, **model: Any) -> Path:
    data = {
        "goal": "Calibrate the drift judge.",
        "budget": {"usd": 5.0},
        "predicate": {"command": "true"},
        "model": {
            "provider": "python",
            "target": f"tests.calibration.test_calibrate:{judge}",
            "name": MODEL,
        }
        | model,
        "prices": {MODEL: {"input": 5.0, "output": 25.0}},
    }
    path = tmp_path / "night.toml"
    path.write_text(dumps(data))
    return path


def test_cli_prints_the_summary_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", str(write_spec(tmp_path, "perfect"))]) == 0
    out = capsys.readouterr().out
    assert "agreement: aligned 10/10, drifted 10/10, all 20/20" in out
    assert "drifted-latency-chain" in out
    assert "the judge separates the sets at 0.3" in out
    assert "20 of 20 queues judged" in out


def test_cli_json_parses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(write_spec(tmp_path, "perfect")), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 0 and data["trusted"] is True
    assert data["agreement"]["all"] == {"agree": 20, "judged": 20, "total": 20}
    assert len(data["results"]) == 20
    assert data["cap_usd"] == 2.0


def test_cli_biased_judge_exits_3_with_the_plain_statement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", str(write_spec(tmp_path, "biased"))]) == 3
    out = capsys.readouterr().out
    assert f"verdict: {PLAIN}" in out
    assert "lower the threshold to 0.13" in out


def test_cli_money_cap_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(write_spec(tmp_path, "perfect")), "--usd", "0.3"]) == 3
    out = capsys.readouterr().out
    assert "of the $0.30 cap" in out and "stopped after" in out


def test_cli_custom_queues_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(bundled_text())
    data["queues"] = [data["queues"][0], data["queues"][15]]
    queues = tmp_path / "q.json"
    queues.write_text(json.dumps(data))
    spec = write_spec(tmp_path, "perfect")
    assert main(["calibrate", str(spec), "--queues", str(queues), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queues_total"] == 2


@pytest.mark.parametrize(
    "case",
    ["no_model", "bad_usd", "missing_spec", "bad_queues", "unpriced", "no_args"],
)
def test_cli_bad_input_exits_64(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "perfect")
    argv = ["calibrate", str(spec)]
    if case == "no_model":
        spec.write_text('goal = "g"\n[budget]\nusd = 1.0\n[predicate]\ncommand = "true"\n')
    elif case == "bad_usd":
        argv += ["--usd", "0"]
    elif case == "missing_spec":
        argv = ["calibrate", str(tmp_path / "nope.toml")]
    elif case == "bad_queues":
        (tmp_path / "q.json").write_text('{"queues": []}')
        argv += ["--queues", str(tmp_path / "q.json")]
    elif case == "unpriced":
        spec = write_spec(tmp_path, "perfect", name="no-such-model-anywhere")
    elif case == "no_args":
        argv = ["calibrate"]
    if case == "no_args":
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 64
    else:
        assert main(argv) == 64
    assert "overnight" in capsys.readouterr().err
