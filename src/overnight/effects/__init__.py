"""The effects ledger: every external effect written down before it is attempted."""

from overnight.effects.ledger import ToolFailure

__all__ = ["ToolFailure"]
