"""The price table: a small built-in table that the spec's ``[prices.<model>]`` extends or
overrides. A model that is in neither is a configuration error before the run starts."""

from __future__ import annotations

from overnight.core.budget import Price, PriceTable

#: $ per million tokens. Cache rates follow the providers' multipliers (read 0.1x, 5-minute
#: write 1.25x, 1-hour write 2x) unless a model publishes otherwise.
BUILTIN_PRICES: dict[str, Price] = {
    "claude-opus-5": Price.from_input_output(5.0, 25.0),
    "claude-sonnet-5": Price.from_input_output(3.0, 15.0),
    "claude-opus-4-5": Price.from_input_output(5.0, 25.0),
    "claude-sonnet-4-5": Price.from_input_output(3.0, 15.0),
    "claude-haiku-4-5": Price.from_input_output(1.0, 5.0),
}


def builtin_table() -> PriceTable:
    return PriceTable(BUILTIN_PRICES)
