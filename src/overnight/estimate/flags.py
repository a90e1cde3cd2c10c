"""The command-line overrides of ``overnight estimate``: a flag for every workload field."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

from overnight.config.estimate import ModelRates, Workload


@dataclass(frozen=True)
class Flag:
    """One command-line override: ``--calls-per-task 4`` sets ``calls_per_task``."""

    option: str
    path: tuple[str, ...]
    type: type
    help: str

    @property
    def dest(self) -> str:
        """The argparse attribute: ``workload.calls_per_task``, ``workload.main_price.input``."""
        return ".".join(("workload", *self.path))

    @property
    def metavar(self) -> str:
        return {int: "N", float: "X"}.get(self.type, "NAME")


def _help(description: str | None) -> str:
    text = " ".join((description or "").split())
    return text.replace("%", "%%")


def _flag_type(annotation: Any) -> type:
    """``int`` for ``int`` and ``int | None``, ``float`` likewise, else ``str`` (a ``bool``
    flag takes ``true`` or ``false``)."""
    kinds = set(typing.get_args(annotation)) - {type(None)} or {annotation}
    for kind in (int, float):
        if kinds == {kind}:
            return kind
    return str


def workload_flags() -> list[Flag]:
    """A flag for every workload field, nested price fields included
    (``--main-price-input``)."""
    flags: list[Flag] = []
    for name, info in Workload.model_fields.items():
        if name in ("main_price", "cheap_price"):
            for sub, sub_info in ModelRates.model_fields.items():
                flags.append(
                    Flag(
                        f"--{name}-{sub}".replace("_", "-"),
                        (name, sub),
                        float,
                        _help(f"{name}.{sub}: {sub_info.description}"),
                    )
                )
            continue
        flags.append(
            Flag(
                f"--{name}".replace("_", "-"),
                (name,),
                _flag_type(info.annotation),
                _help(info.description),
            )
        )
    return flags
