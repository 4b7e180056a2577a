"""Fixtures of the importer tests."""

from __future__ import annotations

import pytest

from .helpers import require_corpus_or_fail


@pytest.fixture
def require_corpus() -> None:
    """The real FastGPT/Dify files (../shared/corpus); missing = failure, not a skip."""
    require_corpus_or_fail()
