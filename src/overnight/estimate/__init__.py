"""``overnight estimate``: what a night costs, derived from token counts before it runs."""
