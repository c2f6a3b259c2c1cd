"""What the prose promises about the book: numbered chapters, an index that says what exists,
and no claim about the hardware that the next run could contradict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))
APPENDICES = sorted((ROOT / "chapters").glob("[A-Z]-*.md"))


def _title(path: Path) -> str:
    return next(ln[2:].strip() for ln in path.read_text().splitlines() if ln.startswith("# "))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_titles_carry_their_number(chapter):
    number = int(chapter.name[:2])
    assert _title(chapter).startswith(f"{number}. "), (
        f"{chapter.name}: the title must start with '{number}. ' so that 'chapter {number}' "
        "can be found in the sidebar")


@pytest.mark.parametrize("appendix", APPENDICES, ids=[p.stem for p in APPENDICES])
def test_appendix_titles_carry_their_letter(appendix):
    assert _title(appendix).startswith(f"Appendix {appendix.name[0]}")


def test_the_index_says_what_a_reader_needs_and_lists_what_exists():
    text = (ROOT / "index.md").read_text()
    for heading in ("## Before you start", "## What runs where", "## Run the notebooks",
                    "## What is written so far"):
        assert heading in text
    assert "pip install -r requirements.txt" in text and "jupyter lab notebooks/" in text
    globs = re.findall(r"```\{toctree\}.*?\n\n(.*?)\n```", text, flags=re.S)
    assert globs == ["chapters/[0-9]*", "chapters/[A-Z]*", "glossary\nIndex <genindex>"]  # chapters from the files present


GLOSSARY = ROOT / "glossary.md"
# terms the verdicts print, and the book's own, that the glossary must define
REQUIRED_TERMS = (
    "tier", "compile tier", "simulate tier", "run on Hopper", "run on Blackwell", "NumSim", "synccheck",
    "racecheck", "compute-sanitizer", "allowance", "replay", "coverage", "TMA", "mbarrier", "expect_tx",
    "TMEM", "tcgen05", "wgmma", "CTA pair", "CLC", "swizzle", "warp specialization", "persistent kernel",
    "online softmax", "L2 flush", "roofline",
)


def glossary_terms() -> dict[str, str]:
    """term -> definition, from the `{glossary}` blocks of the glossary page (a term is an
    unindented line, its definition the indented lines under it)."""
    text = GLOSSARY.read_text()
    terms: dict[str, str] = {}
    for block in re.findall(r"```\{glossary\}\n(.*?)\n```", text, flags=re.S):
        term = None
        for line in block.splitlines():
            if line.strip() and not line.startswith(" "):
                term = line.strip()
                assert term not in terms, f"{term!r} is defined twice"
                terms[term] = ""
            elif line.strip() and term is not None:
                terms[term] += " " + line.strip()
    return terms


def test_the_glossary_defines_the_books_terms_briefly():
    terms = glossary_terms()
    missing = [t for t in REQUIRED_TERMS if t not in terms]
    assert not missing, f"the glossary lacks {missing}"
    assert len(terms) >= len(REQUIRED_TERMS) + 20, len(terms)
    for term, definition in terms.items():
        sentences = len(re.findall(r"[.!?](?:\s|$)", definition.strip() + " "))
        assert definition.strip() and sentences <= 3, f"{term!r}: one or two sentences, got {definition!r}"


@pytest.mark.parametrize("path", [*CHAPTERS, *APPENDICES, ROOT / "index.md", GLOSSARY], ids=lambda p: p.name)
def test_every_term_the_prose_refers_to_is_defined(path):
    """`{term}` references resolve only to a glossary entry (sphinx-build -W fails otherwise);
    Sphinx matches terms without regard to case."""
    defined = {t.lower() for t in glossary_terms()}
    for ref in re.findall(r"\{term\}`([^`]+)`", path.read_text()):
        target = re.search(r"<([^>]+)>\s*$", ref)
        name = (target.group(1) if target else ref).strip()
        assert name.lower() in defined, f"{path.name}: {{term}} `{ref}` names no glossary entry"


@pytest.mark.parametrize("path", [*CHAPTERS, *APPENDICES, ROOT / "index.md", ROOT / "README.md", ROOT / "glossary.md"],
                         ids=lambda p: p.name)
def test_no_prose_declares_a_gpu_absent(path):
    text = path.read_text().lower()
    for claim in ("there is no b200", "there is no gpu", "no b200 exists"):
        assert claim not in text, f"{path.name} hard-codes {claim!r}: say what the build did instead"


@pytest.mark.book
def test_the_sidebar_shows_chapter_numbers(built_book):
    html = (built_book / "index.html").read_text()
    nav = html[html.index('class="bd-docs-nav'):]
    for chapter in CHAPTERS:
        assert _title(chapter).split(":")[0] in nav, f"sidebar lacks {_title(chapter)!r}"
    assert "Appendices" in nav and "Appendix A" in nav
