"""gpubook.book.tables: the labels that let a phone show each table row as a card, on HTML
written out by hand in the shape docutils gives a Markdown table."""

from __future__ import annotations

from gpubook.book.tables import CARDS, label_table, label_tables

HEAD = ('<thead><tr class="row-odd"><th class="head"><p>step</p></th>'
        '<th class="head"><p>TFLOP/s on an <em>H200</em> (95 % interval)</p></th>'
        '<th class="head"><p>× cuDNN &amp; “x”</p></th></tr></thead>')
ROW = '<tr class="row-even"><td><p>{}</p></td><td><p>{}</p></td><td><p>{}</p></td></tr>'


def table(*rows: tuple[str, str, str], head: str = HEAD, opening: str = '<table class="table">') -> str:
    return opening + head + "<tbody>" + "".join(ROW.format(*r) for r in rows) + "</tbody></table>"


def test_every_body_cell_is_labelled_with_its_header_and_the_table_marked_as_cards() -> None:
    got = label_table(table(("1", "627 (620–633)", "1.02 (0.99–1.05)"), ("2", "not measured", "")))
    assert got.startswith(f'<table class="{CARDS} table">')
    assert got.count('data-label="step"') == 2
    assert got.count('data-label="TFLOP/s on an H200 (95 % interval)"') == 2   # the header's text, not its tags
    assert got.count('data-label="× cuDNN &amp; “x”"') == 2                     # escaped once, for the attribute
    assert got.count("data-empty") == 1                                        # the cell with nothing to show
    assert "<p>627 (620–633)</p>" in got and "<p>1.02 (0.99–1.05)</p>" in got  # contents untouched
    assert label_table(got) == got                                             # labelling twice changes nothing


def test_a_table_without_a_class_gets_one() -> None:
    got = label_table(table(("1", "2", "3"), opening="<table>"))
    assert got.startswith(f'<table class="{CARDS}">')


def test_tables_of_other_shapes_are_left_as_they_are() -> None:
    spans = table(("1", "2", "3")).replace("<td>", '<td colspan="2">', 1)
    two_header_rows = table(("1", "2", "3"), head=HEAD.replace("</thead>", HEAD[7:]))
    no_header = table(("1", "2", "3"), head="")
    ragged = table(("1", "2", "3")).replace("<td><p>3</p></td>", "")
    for t in (spans, two_header_rows, no_header, ragged):
        assert label_table(t) == t


def test_a_row_header_keeps_its_column() -> None:
    t = table(("1", "2", "3")).replace("<td><p>1</p></td>", "<th><p>1</p></th>")
    got = label_table(t)
    assert "<th><p>1</p></th>" in got
    assert 'data-label="TFLOP/s on an H200 (95 % interval)"><p>2</p>' in got


def test_a_page_has_each_of_its_tables_labelled_and_nothing_else_changed() -> None:
    page = "<p>before</p>" + table(("1", "2", "3")) + "<p>between</p>" + table(("4", "5", "6")) + "<p>after</p>"
    got = label_tables(page)
    assert got.count(CARDS) == 2 and got.count('data-label="step"') == 2
    assert got.replace(f"{CARDS} ", "").replace(' data-label="step"', "") \
        .replace(' data-label="TFLOP/s on an H200 (95 % interval)"', "") \
        .replace(' data-label="× cuDNN &amp; “x”"', "") == page
