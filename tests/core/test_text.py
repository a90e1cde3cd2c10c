"""Text for display: cut at boundaries with its reason kept, inert in Markdown."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from overnight.core.text import ELLIPSIS, clip, first_sentence, md_code, md_fence, printable

REASON = "`toolz/__pycache__/x.pyc` is bytecode: Python may run it instead of the source."


def test_a_long_detail_keeps_its_reason_then_its_end_from_a_boundary() -> None:
    text = REASON + " " + " ".join(f"word{i}" for i in range(400)) + "\n1 failed in 0.02s"
    shown = clip(text, 200, more="the log: a.log")
    assert shown.startswith(REASON + f" {ELLIPSIS} ")
    assert shown.endswith("1 failed in 0.02s (the log: a.log)")
    tail = shown[len(REASON) + 3 :]
    assert tail.split()[0].startswith("word") or tail.startswith("1 failed")


def test_a_reason_longer_than_the_limit_is_kept_whole() -> None:
    assert clip(REASON + " and more " * 50, 20).startswith(REASON)


def test_text_that_fits_is_unchanged() -> None:
    assert clip("exit 1: not done", 100) == "exit 1: not done"


@given(st.lists(st.text("abcdefgh", min_size=1, max_size=12), min_size=1, max_size=200))
def test_no_word_is_ever_cut(words: list[str]) -> None:
    text = " ".join(words)
    shown = clip(text, 60)
    for word in shown.replace(ELLIPSIS, " ").split():
        assert word in words
    assert first_sentence(text) in shown


def test_markdown_delimiters_outgrow_the_text() -> None:
    assert md_code("a ``` b") == "````a ``` b````"
    assert md_code("`x`") == "`` `x` ``"
    fenced = md_fence("````\n# GOAL_MET\n````")
    assert fenced.startswith("`````text\n") and fenced.endswith("\n`````")


def test_an_unterminated_escape_cannot_swallow_what_follows() -> None:
    shown = printable("a\x1b]8;;http://evil\nGOAL_UNMET\u202e")
    assert "GOAL_UNMET" in shown and "\x1b" not in shown and "\u202e" not in shown
