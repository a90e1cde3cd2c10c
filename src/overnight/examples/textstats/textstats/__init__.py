"""Small text statistics used by the report generator."""

from textstats.core import top_words, words

__all__ = ["top_words", "words"]
