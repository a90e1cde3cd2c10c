"""Prices: the spec's ``[prices.<model>]`` tables first, then the ``genai-prices`` data.

``price_for`` builds the ledger's five-rate ``Price`` for one model. A model priced by neither
is a ``ConfigError`` before the run starts, never $0.

What is read from ``genai-prices`` (the data bundled with the installed version; nothing is
fetched over the network, so a run's prices do not change under it):

- the model is looked up with the provider's id (``anthropic``, ``openai``); for the
  ``python`` and ``openai-compatible`` providers genai-prices picks the provider whose models
  match the name (a local model it does not know needs a ``[prices.<model>]`` table);
- time-dependent prices: the price in force now (``datetime.now``);
- request variants (batch, priority, flex or fast service tiers): not applied, the standard
  price is used, as the harness sends standard requests;
- tiered prices (e.g. a higher rate past 200K input tokens): the base tier. A prompt past the
  first tier is billed by the provider at the higher rate, which the ledger will under-count;
  keep prompts under the threshold or give the model's tier rates in ``[prices.<model>]``;
- ``input_mtok`` -> input, ``output_mtok`` -> output, ``cache_read_mtok`` -> cache_read
  (absent: the input rate), ``cache_write_5m_mtok`` or ``cache_write_mtok`` -> cache_write_5m
  (absent: the input rate; OpenAI models without a cache-write price bill writes as input),
  ``cache_write_1h_mtok`` -> cache_write_1h (absent: the 5-minute write rate).

A model with no input or output token price (an image or audio model) cannot be priced.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal

from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import ModelPrice, TieredPrices

from overnight.core.budget import Price
from overnight.core.errors import ConfigError

#: Our provider names -> genai-prices provider ids (None: let genai-prices match the model).
GENAI_PROVIDER: dict[str, str | None] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-compatible": None,
    "python": None,
}


def _rate(model_price: ModelPrice, key: str) -> float | None:
    value = getattr(model_price, key, None)
    if isinstance(value, TieredPrices):
        value = value.base
    if isinstance(value, Decimal):
        return float(value)
    return None


def genai_price(model: str, provider: str, when: datetime | None = None) -> Price | None:
    """The model's standard price from genai-prices, or None when it does not know it."""
    try:
        _provider, info = get_snapshot().find_provider_model(
            model, None, GENAI_PROVIDER.get(provider), None
        )
    except LookupError:
        return None
    rates = info.get_prices(when or datetime.now(UTC))
    input_rate = _rate(rates, "input_mtok")
    output_rate = _rate(rates, "output_mtok")
    if input_rate is None or output_rate is None:
        return None
    read = _rate(rates, "cache_read_mtok")
    write_5m = _rate(rates, "cache_write_5m_mtok")
    if write_5m is None:
        write_5m = _rate(rates, "cache_write_mtok")
    if write_5m is None:
        write_5m = input_rate
    write_1h = _rate(rates, "cache_write_1h_mtok")
    return Price(
        input=input_rate,
        output=output_rate,
        cache_read=input_rate if read is None else read,
        cache_write_5m=write_5m,
        cache_write_1h=write_5m if write_1h is None else write_1h,
    )


def price_for(model: str, provider: str, overrides: Mapping[str, Price]) -> Price:
    """The price the ledger bills ``model`` at: the spec's table if it has one, else the
    genai-prices data; neither is a ``ConfigError``."""
    if model in overrides:
        return overrides[model]
    found = genai_price(model, provider)
    if found is None:
        raise ConfigError(
            "model.name",
            f"no price is known for model {model!r} (provider {provider!r})",
            f"add a [prices.{model}] table with input and output in $ per million tokens",
        )
    return found
