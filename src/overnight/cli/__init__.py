"""The command line: the commands, the live panel, ``overnight status`` and the demo."""
