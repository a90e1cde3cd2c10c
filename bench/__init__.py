"""Benchmarks of the harness: ``python3 -m bench`` (see ``bench.run``)."""
