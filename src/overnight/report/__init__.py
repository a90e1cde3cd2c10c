"""What a run hands back: the terminal result (``result.json``) and its renderings."""
