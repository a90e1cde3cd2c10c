"""The price table a run bills at, recorded in its manifest (``run.json``, key ``prices``) so
that its spend can be re-priced later without asking genai-prices again, whose answer changes
with its version and with the date."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from overnight.config.spec import Spec
from overnight.core.budget import Price, PriceTable, PriceTier

RATES = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")


def priced_models(spec: Spec) -> list[str]:
    """Every model the spec can send a call to or prices: its ``[prices.*]`` tables,
    ``model.name`` and ``agent.mechanical_model``."""
    names: list[str | None] = list(spec.prices)
    if spec.model is not None:
        names += [spec.model.name, spec.agent.mechanical_model]
    cli = spec.executor
    if cli is not None and cli.is_cli and cli.model is not None:
        names.append(cli.model)
    return [n for n in dict.fromkeys(names) if n is not None]


def _rates(price: Price) -> dict[str, float]:
    return {name: getattr(price, name) for name in RATES}


def price_record(spec: Spec) -> dict[str, Any]:
    """The spec's price table as JSON: model -> its five rates and its tiers."""
    table = spec.price_table()
    record: dict[str, Any] = {}
    for name in priced_models(spec):
        price = table.price(name)
        record[name] = {
            **_rates(price),
            "tiers": [{"above": t.above, **_rates(t.price)} for t in price.tiers],
        }
        if price.per_use:
            record[name]["per_use"] = dict(price.per_use)
        if price.multipliers:
            record[name]["multipliers"] = dict(price.multipliers)
    return record


def _flat(entry: dict[str, Any]) -> Price:
    return Price(
        input=float(entry["input"]),
        output=float(entry["output"]),
        cache_read=float(entry["cache_read"]),
        cache_write_5m=float(entry["cache_write_5m"]),
        cache_write_1h=float(entry["cache_write_1h"]),
    )


def _price(entry: dict[str, Any]) -> Price:
    tiers = tuple(
        PriceTier(above=int(t["above"]), price=_flat(t)) for t in entry.get("tiers") or []
    )
    per_use = tuple((str(k), float(v)) for k, v in (entry.get("per_use") or {}).items())
    multipliers = tuple(
        (str(k), float(v)) for k, v in sorted((entry.get("multipliers") or {}).items())
    )
    return replace(_flat(entry), tiers=tiers, per_use=per_use, multipliers=multipliers)


def table_from_record(record: dict[str, Any]) -> PriceTable:
    """The ``PriceTable`` a ``price_record`` describes. Raises ``KeyError``, ``TypeError``
    or ``ValueError`` when the record is not one."""
    return PriceTable({str(name): _price(entry) for name, entry in record.items()})
