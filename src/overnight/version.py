"""The package version, on its own so that reading it imports nothing else."""

__version__ = "0.1.0"
