"""The pure core: decisions only. Nothing in this package performs I/O or imports from the rest."""
