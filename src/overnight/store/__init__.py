"""Durable state on disk: what a run writes and what a resumed run reads back."""
