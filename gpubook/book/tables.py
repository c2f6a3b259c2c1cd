"""Tables that a phone reads as cards: every body cell of a page's tables carries its column's
header as ``data-label``, and the table the class ``gpubook-cards``.

The book's tables come from Markdown — written in a chapter or printed by a chapter's cell — so
the labels are added to the HTML of each page as it is written (Sphinx's ``html-page-context``),
not by the code that builds each table. On a wide screen nothing changes; below 576 px
``_static/book.css`` lays each row out as a card of "header: value" lines, so that every number
shows under the name of its column and beside the name of its row, with no sideways scrolling.

A table is labelled only when its shape is plain: one header row, no cell spanning rows or
columns, and no table nested inside it. Any other table is left as it was (on a phone it scrolls
in its box with its first column held in place).
"""

from __future__ import annotations

import html
import re
from typing import Any

CARDS = "gpubook-cards"
_TABLE = re.compile(r"<table\b[^>]*>.*?</table>", re.S)
_HEAD = re.compile(r"<thead\b[^>]*>(.*?)</thead>", re.S)
_BODY = re.compile(r"(<tbody\b[^>]*>)(.*?)(</tbody>)", re.S)
_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
_HEAD_CELL = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)
_ANY_CELL = re.compile(r"(<t([dh]))\b([^>]*>)(.*?)(?=</t[dh]>)", re.S)
_TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    """The text a reader sees of an HTML fragment, on one line."""
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


def _labelled_row(row: str, heads: list[str]) -> str:
    """A body row with each ``<td>`` labelled by the header of its column, and marked
    ``data-empty`` when it shows no text (a card leaves it out); a ``<th>`` of the row keeps its
    column and gets no label."""
    labels = iter(heads)

    def one(m: re.Match[str]) -> str:
        label = next(labels, "")
        if m.group(2) == "h":
            return m.group(0)
        empty = ' data-empty=""' if not _text(m.group(4)) else ""
        return f'{m.group(1)} data-label="{html.escape(label, quote=True)}"{empty}{m.group(3)}{m.group(4)}'

    return _ANY_CELL.sub(one, row)


def label_table(table: str) -> str:
    """One ``<table>…</table>``: its body cells labelled with their headers and the table marked
    as cards, or the table unchanged when its shape is not plain."""
    if "<table" in table[1:] or "colspan" in table or "rowspan" in table or "data-label" in table:
        return table
    head, body = _HEAD.search(table), _BODY.search(table)
    if head is None or body is None or len(_ROW.findall(head.group(1))) != 1:
        return table
    heads = [_text(h) for h in _HEAD_CELL.findall(head.group(1))]
    rows = _ROW.findall(body.group(2))
    if not heads or any(len(_ANY_CELL.findall(r)) != len(heads) for r in rows):
        return table
    labelled = _ROW.sub(lambda m: _labelled_row(m.group(0), heads), body.group(2))
    table = table[: body.start(2)] + labelled + table[body.end(2):]
    opening = table[: table.index(">") + 1]
    if re.search(r'\bclass="', opening):
        marked = re.sub(r'\bclass="', f'class="{CARDS} ', opening, count=1)
    else:
        marked = opening[:-1] + f' class="{CARDS}">'
    return marked + table[len(opening):]


def label_tables(page: str) -> str:
    """Every plain table of an HTML page labelled for cards (``label_table``)."""
    return _TABLE.sub(lambda m: label_table(m.group(0)), page)


def on_html_page_context(app: Any, pagename: str, templatename: str, context: dict[str, Any],
                         doctree: Any) -> None:
    if "body" in context and "<table" in context["body"]:
        context["body"] = label_tables(context["body"])


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", on_html_page_context)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
