"""How the estimate writes a figure: money to the cent (half up), tokens in thousands, prices
and factors as written."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from overnight.config.estimate import ModelRates


def _exact(x: Fraction | float | int) -> Fraction:
    """A result back as the decimal it stands for (a float via its shortest repr)."""
    return Fraction(str(x)) if isinstance(x, float) else Fraction(x)


def _dec(x: Fraction | float | int, places: int) -> Decimal:
    x = _exact(x)
    exact = Decimal(x.numerator) / Decimal(x.denominator)
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def money(x: Fraction | float, places: int = 2) -> str:
    """Dollars to ``places`` decimals, half up: $22.01."""
    return f"${_dec(x, places):,}"


def number(x: float | int | Fraction) -> str:
    """A price or factor as written: 5, 0.5, 1.25."""
    d = _dec(x, 6)
    text = f"{d:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def in_k(tokens: int | float | Fraction, unit: str = "k", min_places: int = 0) -> str:
    """Tokens in thousands: 2,820k, 70.5k, 30.05k, 4.375k."""
    text = f"{_dec(_exact(tokens) / 1000, 3):,f}"
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(min_places, "0")
    return f"{whole}.{frac}{unit}" if frac else f"{whole}{unit}"


def percent(x: Fraction | float, places: int = 1) -> str:
    """A percentage to ``places`` decimals, half up: 79.1%."""
    return f"{_dec(x, places)}%"


def rate_text(rates: ModelRates) -> str:
    """A model's input and output prices: $5/$25 per MTok."""
    return f"${number(rates.input)}/${number(rates.output)} per MTok"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
