"""``python -m overnight.reference [--check] [--root DIR]``."""

from overnight.reference.generate import main

raise SystemExit(main())
