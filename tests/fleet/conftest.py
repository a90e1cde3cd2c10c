from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # One Temporal dev server and one PostgreSQL serve every fleet test: they run one at a
    # time, on one worker, while the rest of the suite runs beside them.
    for item in items:
        if item.path.parent.name == "fleet" and item.path.parent.parent.name == "tests":
            item.add_marker(pytest.mark.xdist_group("fleet"))
