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
- tiered prices (e.g. a higher rate past 200K input tokens): every tier, as ``Price.tiers``.
  A tier's rate applies to every token of a call whose input (uncached, cache reads and cache
  writes together) is past its start, as genai-prices computes it; the ledger reserves at the
  dearest tier the request's size can reach and books at the tier its usage falls in. A
  ``[prices.<model>]`` table has no tiers: it is the one price of the model;
- ``input_mtok`` -> input, ``output_mtok`` -> output, ``cache_read_mtok`` -> cache_read
  (absent: the input rate), ``cache_write_5m_mtok`` or ``cache_write_mtok`` -> cache_write_5m
  (absent: the input rate; OpenAI models without a cache-write price bill writes as input),
  ``cache_write_1h_mtok`` -> cache_write_1h (absent: the 5-minute write rate).

A model with no input or output token price (an image or audio model) cannot be priced.

genai-prices gives rates as ``Decimal``. They become the ``Price``'s floats, whose shortest
repr is the decimal again (every published rate has far fewer than 15 significant digits, and
``price_for`` checks it), and the ledger computes on those decimals: no binary rounding enters
a bill.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from overnight.core.budget import Price, PriceTier
from overnight.core.errors import ConfigError

if TYPE_CHECKING:
    from genai_prices.types import ModelPrice

# genai-prices is imported where it is used: loading its data costs about 0.1 s, which a
# night whose spec prices its model never needs.

#: Our provider names -> genai-prices provider ids (None: let genai-prices match the model).
GENAI_PROVIDER: dict[str, str | None] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-compatible": None,
    "python": None,
}


def _decimal_rate(model_price: ModelPrice, key: str, above: int | None) -> Decimal | None:
    """The rate of ``key`` for a call whose input is past ``above`` tokens (None: the base)."""
    from genai_prices.types import TieredPrices

    value = getattr(model_price, key, None)
    if isinstance(value, TieredPrices):
        rate = value.base
        for tier in value.tiers:
            if above is not None and above >= tier.start:
                rate = tier.price
        return rate
    if isinstance(value, Decimal):
        return value
    return None


def _float(rate: Decimal) -> float:
    """``rate`` as a float whose shortest repr is ``rate`` itself."""
    value = float(rate)
    if Decimal(repr(value)) != rate:
        raise ConfigError(
            "prices",
            f"the rate {rate} cannot be held exactly",
            "give the model's rates in a [prices.<model>] table",
        )
    return value


def _rates(model_price: ModelPrice, above: int | None) -> Price | None:
    input_rate = _decimal_rate(model_price, "input_mtok", above)
    output_rate = _decimal_rate(model_price, "output_mtok", above)
    if input_rate is None or output_rate is None:
        return None
    read = _decimal_rate(model_price, "cache_read_mtok", above)
    write_5m = _decimal_rate(model_price, "cache_write_5m_mtok", above)
    if write_5m is None:
        write_5m = _decimal_rate(model_price, "cache_write_mtok", above)
    if write_5m is None:
        write_5m = input_rate
    write_1h = _decimal_rate(model_price, "cache_write_1h_mtok", above)
    return Price(
        input=_float(input_rate),
        output=_float(output_rate),
        cache_read=_float(input_rate if read is None else read),
        cache_write_5m=_float(write_5m),
        cache_write_1h=_float(write_5m if write_1h is None else write_1h),
    )


def _tier_starts(model_price: ModelPrice) -> list[int]:
    from genai_prices.types import TieredPrices

    starts: set[int] = set()
    for key in RATE_KEYS:
        value = getattr(model_price, key, None)
        if isinstance(value, TieredPrices):
            starts.update(int(t.start) for t in value.tiers)
    return sorted(starts)


#: The genai-prices keys a ``Price`` is made of.
RATE_KEYS = (
    "input_mtok",
    "output_mtok",
    "cache_read_mtok",
    "cache_write_mtok",
    "cache_write_5m_mtok",
    "cache_write_1h_mtok",
)


def genai_price(model: str, provider: str, when: datetime | None = None) -> Price | None:
    """The model's standard price from genai-prices, its tiers included, or None when it does
    not know it."""
    from genai_prices.data_snapshot import get_snapshot

    try:
        _provider, info = get_snapshot().find_provider_model(
            model, None, GENAI_PROVIDER.get(provider), None
        )
    except LookupError:
        return None
    rates = info.get_prices(when or datetime.now(UTC))
    base = _rates(rates, None)
    if base is None:
        return None
    tiers = []
    for start in _tier_starts(rates):
        tier = _rates(rates, start)
        if tier is not None:
            tiers.append(PriceTier(above=start, price=tier))
    return replace(base, tiers=tuple(tiers))


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
