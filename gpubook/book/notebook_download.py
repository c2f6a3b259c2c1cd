"""The notebook a reader downloads from a chapter: its paired notebook (``notebooks/<name>.ipynb``,
the jupytext pair, without outputs) with every glued value written into its Markdown.

A chapter's prose quotes the values its cells compute through myst-nb's glue: the roles
``{glue:text}`key:.1f```, ``{glue}`key``` (also ``{glue:}``, ``{glue:any}``, ``{glue:md}``) and
the directives ``{glue:figure}``, ``{glue}``, ``{glue:md}``. Plain Jupyter knows none of them
and would show them as written, so the downloaded copy carries what the book shows instead:
text as text, formatted as the role asks; Markdown as Markdown; a figure as an image attached
to its cell (``attachment:<key>.png``), followed by its caption; anything else as its plain text.

The values are the ones myst-nb glued when it executed the page: it writes them beside the
executed notebook (``jupyter_execute/<docname>.glue.json``, one output bundle per key), so
nothing runs a second time. A value the build does not have becomes "(see the book)".
"""

from __future__ import annotations

import copy
import json
import re
from ast import literal_eval
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# {glue:text}`key:.1f`, {glue}`key`, {glue:}`key`, {glue:any}`key`, {glue:md}`key`, {glue:math}`key`
ROLE = re.compile(r"\{glue(?::(\w*))?\}`([^`]+)`")
# ```{glue:figure} key  /  :::{glue} key  ... up to the fence that closes it
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{glue(?::(?P<kind>\w*))?\}[ \t]*(?P<key>\S+)[ \t]*\n"
                       r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.M | re.S)
OPTION = re.compile(r"^[ \t]*:(\w[\w-]*):[ \t]*(.*)$")
MISSING = "(see the book)"
FIGURE_MISSING = "*(figure: see the book)*"
# characters that Markdown (or a table, or Jupyter's math) would read in a pasted plain value
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|$])")

Glue = Mapping[str, Mapping[str, Any]]  # key -> output bundle: {"data": {mime: value}, "metadata": ...}


def plain(text: str, fmt: str = "") -> str:
    """A glued text/plain value as the role ``{glue:text}`key:fmt``` shows it (myst-nb's rule:
    the Python literal is read back, so a string loses its quotes, then formatted)."""
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if not fmt:
        return str(value)
    kind = fmt[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt)


def escape(text: str) -> str:
    """Plain text as literal Markdown: no character of it starts emphasis, code, a link, a table
    cell or math."""
    return _MD_SPECIAL.sub(r"\\\1", text)


class Filler:
    """Fills the glue of one chapter's Markdown cells from its glued values (`glue`); `other`
    gives another page's values for a ``doc::key`` reference."""

    def __init__(self, glue: Glue, other: Callable[[str], Glue] | None = None):
        self.glue = glue
        self.other = other or (lambda doc: {})
        self.attachments: dict[str, dict[str, str]] = {}
        self.missing: list[str] = []

    def data(self, ref: str) -> Mapping[str, Any] | None:
        doc, _, key = ref.rpartition("::")
        bundle = (self.other(doc) if doc else self.glue).get(key)
        if bundle is None:
            self.missing.append(ref)
            return None
        return bundle.get("data", {})

    def role(self, kind: str | None, content: str) -> str:
        if kind == "text":
            ref, fmt = content.rsplit(":", 1) if ":" in content.replace("::", "\0") else (content, "")
            data = self.data(ref)
            if data is None or "text/plain" not in data:
                return MISSING
            try:
                return escape(plain(data["text/plain"], fmt))
            except (TypeError, ValueError):
                return escape(plain(data["text/plain"]))
        ref = content.rsplit(":", 1)[0] if kind == "md" and ":" in content.replace("::", "\0") else content
        data = self.data(ref)
        if data is None:
            return MISSING
        return self.best(ref, data, inline=True) or MISSING

    def best(self, ref: str, data: Mapping[str, Any], inline: bool, alt: str = "") -> str | None:
        """The value as Markdown: Markdown, an attached image, else its plain text."""
        if "text/markdown" in data:
            md = _text(data["text/markdown"]).strip()
            return " ".join(md.split()) if inline else md
        for mime in ("image/png", "image/jpeg", "image/svg+xml"):
            if mime in data:
                name = re.sub(r"[^\w.-]", "_", ref.split("::")[-1]) + "." + mime.split("/")[1].split("+")[0]
                self.attachments[name] = {mime: _text(data[mime]).strip() if mime != "image/svg+xml"
                                          else _text(data[mime])}
                return f"![{escape(alt or ref)}](attachment:{name})"
        if "text/plain" in data:
            return escape(plain(_text(data["text/plain"])))
        return None

    def directive(self, m: re.Match[str]) -> str:
        kind, ref, indent = m.group("kind"), m.group("key"), m.group("indent")
        options, body, in_options = {}, [], True
        for line in m.group("body").splitlines():
            opt = OPTION.match(line) if in_options else None
            if opt:
                options[opt.group(1)] = opt.group(2).strip()
                continue
            in_options = False
            body.append(line[len(indent):] if line.startswith(indent) else line)
        data = self.data(f"{options['doc']}::{ref}" if "doc" in options else ref)
        shown = self.best(ref, data, inline=False, alt=options.get("alt", "")) if data is not None else None
        if shown is None:
            shown = FIGURE_MISSING if kind == "figure" else MISSING
        caption = "\n".join(body).strip("\n")
        out = shown + ("\n\n" + caption if kind == "figure" and caption else "")
        return "\n".join(indent + line if line else line for line in out.split("\n"))

    def fill(self, source: str) -> str:
        """`source` (Markdown) with every glue directive and role replaced by its value."""
        source = DIRECTIVE.sub(self.directive, source)
        return ROLE.sub(lambda m: self.role(m.group(1), m.group(2)), source)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def filled_notebook(notebook: dict[str, Any], glue: Glue, other: Callable[[str], Glue] | None = None
                    ) -> tuple[dict[str, Any], list[str]]:
    """(a copy of the nbformat-4 `notebook` whose Markdown cells have their glue filled in, the
    references no glued value was found for)."""
    nb = copy.deepcopy(notebook)
    missing: list[str] = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = _text(cell["source"])
        if "{glue" not in source:
            continue
        filler = Filler(glue, other)
        cell["source"] = filler.fill(source)
        if filler.attachments:
            cell.setdefault("attachments", {}).update(filler.attachments)
        missing += filler.missing
    return nb, missing


def read_glue(path: Path) -> dict[str, Any]:
    """The glued values myst-nb wrote for a page (``<docname>.glue.json``), or {} without one."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write_download(paired: Path, glue_dir: Path, docname: str, out: Path) -> list[str]:
    """Write the download of chapter `docname` (its paired notebook, glue filled in from the
    values under `glue_dir`, myst-nb's ``jupyter_execute``) to `out`; return what was missing."""
    import nbformat

    def other(doc: str) -> Glue:
        target = (Path(docname).parent / doc).as_posix()
        return read_glue(glue_dir / (target.removesuffix(".md").removesuffix(".ipynb") + ".glue.json"))

    nb = nbformat.read(str(paired), as_version=4)
    filled, missing = filled_notebook(nb, read_glue(glue_dir / (docname + ".glue.json")), other)
    nbformat.write(nbformat.from_dict(filled), str(out))
    return missing
