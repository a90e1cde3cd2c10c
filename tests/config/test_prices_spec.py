"""``[prices.M]`` per-use fees and multipliers, and ``[sandbox] hosts``: what the spec accepts,
what it refuses, and that the refusal names the field and says how to write it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from overnight.config.sandbox import SandboxSpec
from overnight.config.spec import MULTIPLIER_FIELDS, PriceSpec, parse_spec
from overnight.core.errors import ConfigError
from tests.helpers.nights import cli_env, command_task, spec_data, write_spec

PRICES_TOML = """
[prices.M]
input = 3.0
output = 15.0
web_search = 0.01
web_fetch = 0
multipliers = {"speed=fast" = 6, "service_tier=priority" = 1.8}
"""


def price_spec(**fields: Any) -> PriceSpec:
    return PriceSpec.model_validate({"input": 3.0, "output": 15.0, **fields})


# -- [prices.M] ----------------------------------------------------------------------------------


def test_fees_and_multipliers_written_in_toml_make_a_price_with_them() -> None:
    spec = PriceSpec.model_validate(tomllib.loads(PRICES_TOML)["prices"]["M"])
    price = spec.price()
    assert price.fee("web_search") == 0.01
    assert price.fee("web_fetch") == 0
    assert price.multiplier("speed=fast") == 6
    assert price.multiplier("service_tier=priority") == 1.8
    assert price.multiplier("service_tier=flex") is None
    # the token rates are the ones written, the cache rates derived as usual
    assert (price.input, price.output) == (3.0, 15.0)
    assert (price.cache_read, price.cache_write_5m, price.cache_write_1h) == (0.3, 3.75, 6.0)


def test_a_price_without_fees_or_multipliers_prices_neither() -> None:
    price = price_spec().price()
    assert price.fee("web_search") is None
    assert price.fee("web_fetch") is None
    assert price.multipliers == ()


def test_every_multiplier_field_is_accepted() -> None:
    keys = {f"{field}=x": 2.0 for field in MULTIPLIER_FIELDS}
    price = price_spec(multipliers=keys).price()
    for key in keys:
        assert price.multiplier(key) == 2.0


def test_a_whole_spec_carries_the_multipliers_into_its_price_table(repo: Path) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["prices"]["fake-opus"]["multipliers"] = {"speed=fast": 6}
    data["prices"]["fake-opus"]["web_search"] = 0.01
    spec = parse_spec(data, repo)
    price = spec.prices["fake-opus"].price()
    assert price.multiplier("speed=fast") == 6
    assert price.fee("web_search") == 0.01


@pytest.mark.parametrize("key", ["turbo", "colour=red", "speed=", "=fast", "speed"])
def test_an_unknown_multiplier_key_is_refused_saying_how_to_write_one(key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        price_spec(multipliers={key: 2})
    error = caught.value
    assert error.field == "prices.multipliers"
    assert repr(key) in error.problem
    assert "field=value" in error.fix
    for field in MULTIPLIER_FIELDS:
        assert field in error.fix
    assert "prices.multipliers" in str(error) and "fix:" in str(error)


def test_an_unknown_multiplier_key_in_a_whole_spec_names_the_field(repo: Path) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["prices"]["fake-opus"]["multipliers"] = {"colour=red": 2}
    with pytest.raises(ConfigError) as caught:
        parse_spec(data, repo)
    assert caught.value.field == "prices.multipliers"


def test_a_negative_multiplier_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        price_spec(multipliers={"speed=fast": -6})
    assert caught.value.field == "prices.multipliers"
    assert "negative" in caught.value.problem
    assert ">= 0" in caught.value.fix


def test_a_zero_multiplier_is_accepted() -> None:
    assert (
        price_spec(multipliers={"service_tier=flex": 0}).price().multiplier("service_tier=flex")
        == 0
    )


@pytest.mark.parametrize("fee", ["web_search", "web_fetch"])
def test_a_negative_fee_is_refused(repo: Path, fee: str) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["prices"]["fake-opus"][fee] = -0.01
    with pytest.raises(ConfigError) as caught:
        parse_spec(data, repo)
    assert fee in caught.value.field


@pytest.mark.parametrize("factor", [float("inf"), float("nan")])
def test_a_multiplier_that_is_not_a_finite_number_is_refused(repo: Path, factor: float) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["prices"]["fake-opus"]["multipliers"] = {"speed=fast": factor}
    with pytest.raises(ConfigError) as caught:
        parse_spec(data, repo)
    assert "multipliers" in caught.value.field


# -- [sandbox] hosts -----------------------------------------------------------------------------


def test_hosts_are_accepted_and_lower_cased() -> None:
    spec = SandboxSpec.model_validate({"hosts": ["docs.python.org", "PyPI.org", "Files.X.io."]})
    assert spec.hosts == ["docs.python.org", "pypi.org", "files.x.io"]


def test_no_hosts_by_default() -> None:
    assert SandboxSpec().hosts == []


@pytest.mark.parametrize(
    "host", ["https://x.io/path", "x.io/path", "a b", "", "x.io:443", "*.x.io", "-x.io"]
)
def test_a_host_that_is_not_a_host_name_is_refused_naming_sandbox_hosts(host: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SandboxSpec.model_validate({"hosts": ["docs.python.org", host]})
    error = caught.value
    assert error.field == "sandbox.hosts"
    assert repr(host) in error.problem
    assert "without a scheme or path" in error.fix


def test_a_bad_host_in_a_whole_spec_names_sandbox_hosts(repo: Path) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["sandbox"] = {"hosts": ["https://x.io/path"]}
    with pytest.raises(ConfigError) as caught:
        parse_spec(data, repo)
    assert caught.value.field == "sandbox.hosts"


# -- overnight check -----------------------------------------------------------------------------


def check(spec_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "overnight", "check", str(spec_path)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def priced_spec(repo: Path, multipliers: dict[str, float]) -> dict[str, Any]:
    """A night of one command task, with a price table for a model it never calls."""
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")], model=False)
    data["prices"] = {"fake-opus": {"input": 5.0, "output": 25.0, "multipliers": multipliers}}
    data["sandbox"] = {"hosts": ["docs.python.org"]}
    return data


def test_overnight_check_accepts_a_spec_with_known_multipliers(repo: Path, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path / "night.toml", priced_spec(repo, {"speed=fast": 6}))
    proc = check(spec_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_overnight_check_of_a_bad_multiplier_exits_64_naming_the_field(
    repo: Path, tmp_path: Path
) -> None:
    spec_path = write_spec(tmp_path / "night.toml", priced_spec(repo, {"turbo": 2}))
    proc = check(spec_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 64, out
    assert "prices.multipliers" in out
    assert "'turbo'" in out
    assert "fix:" in out
