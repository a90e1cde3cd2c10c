from __future__ import annotations

import os

import pytest

from tests.realrepos.corpus import cache_dir, fetch, missing


@pytest.fixture(scope="session")
def corpus() -> None:
    """The sdists on disk: fetched now when the cache lacks them; a skip naming the reason
    only when the package registry cannot be reached (a failure under CI, which fetches
    them at set-up)."""
    if not missing():
        return
    error = fetch()
    if error:
        message = f"the real-repository corpus is not in {cache_dir()} and pip could not "
        message += f"fetch it: {error}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
