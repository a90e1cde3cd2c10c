"""Word counting for the weekly report."""

from collections import Counter


def words(text):
    """The words of ``text``, lower-cased, without surrounding punctuation."""
    return text.split()


def top_words(text, n):
    """The ``n`` most frequent words as (word, count), most frequent first."""
    counts = Counter(words(text))
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return ranked[:n]
