from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks.night import AttackNight
from tests.helpers.sandbox import require_bwrap


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    require_bwrap()


@pytest.fixture
def night(tmp_path: Path) -> AttackNight:
    return AttackNight(tmp_path)
