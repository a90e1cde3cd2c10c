"""The few pieces of Markdown the generated pages are made of: a header saying the page is
generated and by what, headings with fixed anchors, and tables whose cells cannot break the
table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from overnight.config.spec_schema import plain_text
from overnight.reference.model_fields import Table

#: The command that writes every generated page (and checks them, with --check).
COMMAND = "python -m overnight.reference"


def header(title: str, source: str) -> list[str]:
    """The page's title and the line saying where it comes from."""
    return [
        f"# {title}",
        "",
        f'!!! note "Generated"\n    This page is generated from {source} by `{COMMAND}`; '
        "edit the code, not this page.",
        "",
    ]


def heading(level: int, text: str, anchor: str) -> str:
    return f"{'#' * level} {text} {{#{anchor}}}"


def inert(text: str) -> str:
    """``text`` with what Markdown would take for markup escaped outside its code spans: an
    angle bracket (``<run-id>`` is no HTML tag) and an asterisk (``* *`` is no emphasis)."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # the even parts lie outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")
    return "`".join(parts)


def cell(text: str) -> str:
    """Text for one table cell: one line, its pipes escaped, inert."""
    return inert(" ".join(text.split())).replace("|", "\\|")


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def field_tables(tables: list[Table], root: str, *, with_default: bool = True) -> list[str]:
    """Each model's table under a heading naming every path where it stands (``root`` names
    the root model's, whose path is empty)."""
    lines: list[str] = []
    for t in tables:
        names = ", ".join(f"`{p}`" if p else root for p in t.paths)
        lines += [heading(2, names, t.anchor), ""]
        if t.doc:
            lines += [plain_text(t.doc), ""]
        if with_default:
            head = ["key", "type", "default", "what it does"]
            rows = [[f"`{r.key}`", r.type, r.default, r.doc] for r in t.rows]
        else:
            head = ["field", "type", "what it holds"]
            rows = [[f"`{r.key}`", r.type, r.doc] for r in t.rows]
        lines += table(head, rows)
    return lines
