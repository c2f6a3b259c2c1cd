"""The book's sources are links: every one an address of its publisher, and the chapters that
print a source print it as a Markdown link."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from gpubook.facts import hardware, published, sources
from gpubook.models import gemm_model

ROOT = Path(__file__).resolve().parents[1]
ALL = [v for v in vars(sources).values() if isinstance(v, sources.Source)]
HOSTS = {"docs.nvidia.com", "arxiv.org", "doi.org", "github.com", "mlc.ai", "www.opencompute.org"}
LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")


def test_every_source_is_an_https_address_of_a_known_publisher():
    assert len(ALL) >= 20
    for s in ALL:
        u = urlparse(s.url)
        assert u.scheme == "https" and u.hostname in HOSTS, s
        assert s.label and "]" not in s.label and " " not in s.url
    arxiv = [s for s in ALL if urlparse(s.url).hostname == "arxiv.org"]
    for s in arxiv:   # an arXiv source names its number, and links that abstract
        number = re.search(r"\d{4}\.\d{5}", s.label).group()
        assert s.url == f"https://arxiv.org/abs/{number}", s


def test_a_source_renders_as_one_markdown_link():
    s = sources.Source("PTX ISA", "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html")
    assert s.markdown() == "[PTX ISA](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html)"
    line = sources.markdown_list([sources.PTX_ISA, sources.CUDA_GUIDE])
    assert LINK.findall(line) == [(sources.PTX_ISA.label, sources.PTX_ISA.url),
                                  (sources.CUDA_GUIDE.label, sources.CUDA_GUIDE.url)]


def test_the_hardware_table_links_its_sources():
    md = hardware.sources_markdown()
    links = LINK.findall(md)
    assert [u for _, u in links] == [s.url for s in hardware.SOURCE_LINKS]
    assert any("ml-engineering" in u for _, u in links) and any("parallel-thread-execution" in u for _, u in links)
    for gpu in hardware.GPUS.values():
        assert gpu.source_links == hardware.SOURCE_LINKS


def test_published_figures_link_where_they_were_read():
    md = published.sources_markdown()
    links = LINK.findall(md)
    assert len(links) == 4
    assert (published.TIRX_KERNELS, "https://github.com/mlc-ai/TIRx-kernels/blob/f495258/"
            "tirx_kernels/bench_suite/baseline.md") in links
    assert ("https://arxiv.org/abs/2603.05451" in md and "https://arxiv.org/abs/2407.08608" in md
            and "0251105a2fb19d2957484b7f023cd8c115286ced" in md)
    # the commit in a label is the commit in its address
    for label, url in links:
        for sha in re.findall(r"\b[0-9a-f]{7,40}\b", label):
            assert sha in url, (label, url)


def test_the_gemm_ladder_links_its_published_sources():
    for sota, commit in ((False, "0fdad07"), (True, "f495258")):
        (label, url), = LINK.findall(gemm_model.published_source_markdown(sota))
        assert commit in label and commit in url and urlparse(url).hostname == "github.com"


CHAPTERS = sorted((ROOT / "chapters").glob("[0-9A-Z]*.md"))


@pytest.mark.parametrize("path", [p for p in CHAPTERS if "## Further reading" in p.read_text()], ids=lambda p: p.stem)
def test_further_reading_links_its_documents(path):
    """Every list of further reading links at least one of its entries; every link there is one
    of the addresses in gpubook.facts.sources or a repository on GitHub."""
    text = path.read_text()
    section = text[text.index("## Further reading"):]
    section = section[:section.find("\n## ", 5)] if "\n## " in section[5:] else section
    links = LINK.findall(section)
    assert links, f"{path.name}: no link in Further reading"
    known = {s.url for s in ALL}
    for label, url in links:
        assert url in known or re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url), (label, url)
