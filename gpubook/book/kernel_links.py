"""Sphinx extension: appendix A's sections, and the links between its kernels and the cells that
build them.

- A code cell tagged `output-sections` turns each heading of its Markdown output into a section of
  the page (MyST makes a heading inside an output a rubric, which no outline lists): the output up
  to the first heading stays in the cell, each heading and what follows it up to the next becomes
  a section after the cell. A target just before a heading names its section.
- Each chapter's cell that built a kernel (the manifest's `cell`, its execution count) carries the
  kernel's anchor (`gpubook.verify.appendix.kernel_id`), the target of the kernel's row in
  appendix A, and a line under it linking back to those rows: "In appendix A: k1, k2".
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

from ..verify import appendix, manifest

TAG = "output-sections"
MATRIX_DOC = "chapters/" + appendix.MATRIX_DOC


def _is_cell(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def _tags(cell: nodes.Element) -> list[str]:
    return list((cell.get("cell_metadata") or {}).get("tags") or [])


def _is_label(node: nodes.Node | None) -> bool:
    return isinstance(node, nodes.target) and not node.children


def _in_component(node: nodes.Node, cell: nodes.Element) -> bool:
    """Whether `node` lies inside a sphinx-design component (a dropdown's title is a rubric too)."""
    parent = node.parent
    while parent is not None and parent is not cell:
        if isinstance(parent, nodes.Element) and parent.get("design_component"):
            return True
        parent = parent.parent
    return False


def split_into_sections(cell: nodes.Element, document: nodes.document) -> int:
    """Move each rubric of `cell`'s outputs, with what follows it, into a section after the cell;
    return how many sections it made (none where the cell is followed by anything but sections)."""
    parent = cell.parent
    at = parent.index(cell)
    if not all(isinstance(n, nodes.section) for n in parent.children[at + 1:]):
        return 0
    made = []
    for rubric in [r for r in cell.findall(nodes.rubric) if not _in_component(r, cell)]:
        holder = rubric.parent
        i = holder.index(rubric)
        body = []
        for j, sib in enumerate(holder.children[i + 1:], i + 1):
            if isinstance(sib, nodes.rubric) or (_is_label(sib) and j + 1 < len(holder.children)
                                                 and isinstance(holder.children[j + 1], nodes.rubric)):
                break
            body.append(sib)
        before = holder.children[i - 1] if i > 0 else None
        ids = list(rubric["ids"])
        names = list(rubric["names"])
        named: list[str] = []  # the ids the target names: the section's own, first
        if _is_label(before):
            named = [*before["ids"], *([before["refid"]] if before.get("refid") else [])]
            ids += [x for x in before["ids"] if x not in ids]
            names += [x for x in before["names"] if x not in names]
            if before.get("refid") and before["refid"] not in ids:
                ids.append(before["refid"])
            holder.remove(before)
        for n in [rubric, *body]:
            holder.remove(n)
        ids.sort(key=lambda x: x not in named)
        title = nodes.title("", "", *rubric.children)
        section = nodes.section("", title, *body, ids=ids or [nodes.make_id(rubric.astext())], names=names)
        for i_ in section["ids"]:
            document.ids[i_] = section
        made.append(section)
    for k, section in enumerate(made):
        parent.insert(at + 1 + k, section)
    return len(made)


class OutputSections(SphinxTransform):
    """Headings of the Markdown outputs of cells tagged `output-sections` become sections."""

    default_priority = 700  # after docutils' targets are propagated; before the outline is collected

    def apply(self, **kwargs: Any) -> None:
        for cell in list(self.document.findall(_is_cell)):
            if TAG in _tags(cell):
                split_into_sections(cell, self.document)


def cell_anchors(kernels: list[dict[str, Any]], chapter: str) -> dict[int, list[tuple[str, str]]]:
    """execution count of a cell -> [(anchor, kernel name), ...] of the kernels it built first."""
    out: dict[int, list[tuple[str, str]]] = {}
    for k, kid in zip(kernels, appendix.kernel_ids(kernels, chapter)):
        if k.get("cell") is not None:
            out.setdefault(int(k["cell"]), []).append((kid, k["name"]))
    return out


def back_link(anchored: list[tuple[str, str]], uri: str) -> nodes.paragraph:
    """'In appendix A: k1, k2': one link per kernel to its row."""
    para = nodes.paragraph("", "In appendix A: ", classes=["gpubook-appendix-link"])
    for i, (kid, name) in enumerate(anchored):
        if i:
            para += nodes.Text(", ")
        para += nodes.reference("", "", nodes.literal(name, name), refuri=f"{uri}#{kid}", internal=True)
    return para


def link_cells(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Put each kernel's anchor on the cell of its chapter that built it, and the link back."""
    if docname == MATRIX_DOC or not docname.startswith("chapters/") or MATRIX_DOC not in app.env.all_docs:
        return
    chapter = docname.split("/", 1)[1]
    by_cell = cell_anchors(_manifest().get(chapter, []), chapter)
    if not by_cell:
        return
    uri = app.builder.get_relative_uri(docname, MATRIX_DOC)
    for cell in doctree.findall(_is_cell):
        anchored = by_cell.get(cell.get("exec_count"))
        if anchored:
            cell["ids"].extend(kid for kid, _ in anchored if kid not in cell["ids"])
            cell.append(back_link(anchored, uri))


_MANIFEST: dict[str, Any] = {}


def _manifest() -> dict[str, list[dict[str, Any]]]:
    if "chapters" not in _MANIFEST:
        _MANIFEST["chapters"] = manifest.load()
    return _MANIFEST["chapters"]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_transform(OutputSections)
    app.connect("doctree-resolved", link_cells)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
