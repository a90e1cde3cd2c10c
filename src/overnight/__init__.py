"""overnight: an unattended agent night inside a hard budget; only the harness gives the verdict."""

__version__ = "0.1.0"
