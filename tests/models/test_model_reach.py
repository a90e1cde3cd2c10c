"""Before a night starts, one request that costs nothing asks whether its model can be reached
with its key (Anthropic's token count, OpenAI's model lookup), through the official SDKs: a host
that does not resolve, a refused connection, a failed TLS handshake and a refused key end it at
preflight (exit 64, nothing written); any other answer lets it go on, noted in its trace."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from overnight.config.spec import ModelSpec, parse_spec
from overnight.models.reach import check_reach
from overnight.night.preflight import check_model_reach
from overnight.store.journal import read_journal
from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, spec_data, write_spec
from tests.helpers.provider import LocalProvider, status_only, unbound_port

SECRET = "sk-test-0123456789-not-a-real-key"

#: (provider, model name priced by genai-prices, key variable, path the SDK adds to base_url)
PROVIDERS = [
    ("anthropic", "claude-opus-4-8", "ANTHROPIC_API_KEY", ""),
    ("openai", "gpt-4o", "OPENAI_API_KEY", "/v1"),
]
IDS = ["anthropic", "openai"]
#: What the check asks each provider for.
PROBED = {"anthropic": "/v1/messages/count_tokens", "openai": "/v1/models/gpt-4o"}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def home() -> Path:
    return Path(os.environ["OVERNIGHT_HOME"])


def night(repo: Path, tmp_path: Path, **model: Any) -> Path:
    """A night of one command task whose predicate it meets; the model is asked only for the
    closing summary, and gives up on its first failure."""
    data = spec_data(
        repo,
        tasks=[command_task("t_1", "touch done", "test -f done")],
        predicate="test -f done",
    )
    data["model"] = {"max_attempts": 1, "outage_limit_s": 0, **model}
    if "prices" in data and model.get("name") != "fake-opus":
        del data["prices"]
    return write_spec(tmp_path / "night.toml", data)


def run_cli(
    spec: Path, run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, float]:
    started = time.monotonic()
    code = main(["run", str(spec), "--run-dir", str(run_dir), "--quiet"])
    return code, capsys.readouterr().err, time.monotonic() - started


def nothing_written(run_dir: Path) -> bool:
    """No run directory, and nothing in the run index (``$OVERNIGHT_HOME/runs.jsonl``) nor
    under ``$OVERNIGHT_HOME/runs``."""
    return (
        not run_dir.exists()
        and not (home() / "runs.jsonl").exists()
        and not (home() / "runs").exists()
    )


@pytest.mark.parametrize(("provider", "name", "variable", "suffix"), PROVIDERS, ids=IDS)
def test_a_host_that_does_not_resolve_ends_the_night_at_preflight(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    name: str,
    variable: str,
    suffix: str,
) -> None:
    url = "http://models.overnight-test.invalid" + suffix
    spec = night(repo, tmp_path, provider=provider, name=name, base_url=url)
    run_dir = tmp_path / "run"
    code, err, took = run_cli(spec, run_dir, capsys)
    assert code == 64, err
    assert "model.base_url:" in err and "models.overnight-test.invalid" in err
    assert "host name could not be resolved" in err and "check [model] base_url" in err
    assert nothing_written(run_dir)
    assert took < 30, f"preflight took {took:.1f} s; a failed name lookup takes well under 5 s"


@pytest.mark.parametrize(("provider", "name", "variable", "suffix"), PROVIDERS, ids=IDS)
@pytest.mark.parametrize("failure", ["refused", "tls"])
def test_a_refused_connection_or_a_failed_tls_handshake_ends_the_night_at_preflight(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    name: str,
    variable: str,
    suffix: str,
    failure: str,
) -> None:
    with LocalProvider(status_only(200)) as plain_http:
        if failure == "refused":
            url = f"http://127.0.0.1:{unbound_port()}{suffix}"
            said = "connection was refused"
        else:  # TLS spoken to a server that speaks plain HTTP
            url = plain_http.url.replace("http://", "https://") + suffix
            said = "TLS handshake failed"
        spec = night(repo, tmp_path, provider=provider, name=name, base_url=url)
        run_dir = tmp_path / "run"
        code, err, _took = run_cli(spec, run_dir, capsys)
    assert code == 64, err
    assert "model.base_url:" in err and said in err and url.split("//")[1] in err
    assert nothing_written(run_dir)


@pytest.mark.parametrize(("provider", "name", "variable", "suffix"), PROVIDERS, ids=IDS)
@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_ends_the_night_at_preflight_naming_its_variable_not_its_value(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    name: str,
    variable: str,
    suffix: str,
    status: int,
) -> None:
    with LocalProvider(status_only(status, "authentication_error")) as server:
        spec = night(repo, tmp_path, provider=provider, name=name, base_url=server.url + suffix)
        run_dir = tmp_path / "run"
        code, err, _took = run_cli(spec, run_dir, capsys)
    assert code == 64, err
    assert f"refused the key in {variable}" in err and f"HTTP {status}" in err
    assert f"set {variable}" in err and SECRET not in err and SECRET[:12] not in err
    assert server.received == [("POST" if provider == "anthropic" else "GET", PROBED[provider])]
    assert nothing_written(run_dir)


def test_a_compatible_server_that_wants_a_key_none_was_given_says_so(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with LocalProvider(status_only(401)) as server:
        spec = night(
            repo, tmp_path, provider="openai-compatible", name="fake-opus", base_url=server.url
        )
        run_dir = tmp_path / "run"
        code, err, _took = run_cli(spec, run_dir, capsys)
    assert code == 64, err
    assert "asks for a key (HTTP 401" in err and "none was sent" in err
    assert "set OPENAI_API_KEY" in err
    assert nothing_written(run_dir)


@pytest.mark.parametrize(
    ("provider", "name", "suffix", "status"),
    [
        ("anthropic", "claude-opus-4-8", "", 404),
        ("openai", "gpt-4o", "/v1", 404),
        ("openai-compatible", "fake-opus", "/v1", 404),
        ("anthropic", "claude-opus-4-8", "", 500),
        ("openai", "gpt-4o", "/v1", 429),
    ],
)
def test_any_other_answer_lets_the_night_go_on_and_is_noted(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    name: str,
    suffix: str,
    status: int,
) -> None:
    with LocalProvider(status_only(status)) as server:
        spec = night(repo, tmp_path, provider=provider, name=name, base_url=server.url + suffix)
        run_dir = tmp_path / "run"
        code, err, _took = run_cli(spec, run_dir, capsys)
    assert run_dir.exists(), err  # past preflight: the night started
    assert not nothing_written(run_dir) and (home() / "runs.jsonl").exists()
    assert "model.base_url" not in err and "refused the key" not in err
    notes = [
        e["note"]
        for e in read_journal(run_dir / "trace.jsonl")
        if e.get("decision") == "start_check" and "can be reached" in e.get("note", "")
    ]
    assert len(notes) == 1 and f"got HTTP {status}" in notes[0], notes
    # The night's own calls went to the same server after the check (its closing summary).
    assert len(server.received) >= 2 and code in (0, 4), err


def test_a_provider_that_does_not_answer_in_time_lets_the_night_go_on() -> None:
    with socket.socket() as silent:  # takes connections, never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        spec = ModelSpec(
            provider="anthropic", name="claude-opus-4-8", base_url=f"http://127.0.0.1:{port}"
        )
        started = time.monotonic()
        note = check_reach(spec, timeout_s=0.5)
        took = time.monotonic() - started
    assert note is not None and "no answer" in note and "the night goes on" in note
    assert took < 30, f"the check took {took:.1f} s with a 0.5 s timeout"


def test_no_check_for_a_python_model_or_a_model_handed_in(repo: Path) -> None:
    spec = parse_spec(spec_data(repo, tasks=[command_task("t_1", "true", "true")]), repo)
    assert spec.model is not None and spec.model.provider == "python"
    assert check_model_reach(spec) == []
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["model"] = {
        "provider": "anthropic",
        "name": "claude-opus-4-8",
        "base_url": "http://models.overnight-test.invalid",
    }
    del data["prices"]
    unreachable = parse_spec(data, repo)
    assert check_model_reach(unreachable, model=ScriptedModel()) == []


@pytest.fixture
def unreachable_spec(repo: Path, tmp_path: Path) -> Iterator[Path]:
    yield night(
        repo,
        tmp_path,
        provider="anthropic",
        name="claude-opus-4-8",
        base_url="http://models.overnight-test.invalid",
    )


def test_estimate_does_not_ask_the_model(
    unreachable_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", str(unreachable_spec)]) == 0, capsys.readouterr().err
