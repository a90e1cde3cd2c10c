"""Whether the real sandbox can run here: tests that need bubblewrap skip without it, except
under CI=true, where its absence is a failure (CI installs it)."""

from __future__ import annotations

import os
import shutil

import pytest

HAVE_BWRAP = shutil.which("bwrap") is not None


def require_bwrap() -> None:
    if HAVE_BWRAP:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("bubblewrap is not installed, and CI must run the sandbox tests")
    pytest.skip("bubblewrap is not installed (apt-get install -y bubblewrap)")


@pytest.fixture
def bwrap() -> None:
    require_bwrap()
