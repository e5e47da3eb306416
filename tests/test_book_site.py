"""The book as readers meet it: pages, glossary, references, the numbers appendix, figures, Colab settings.

The build itself (``jupyter-book build -W -n``) proves every link and citation resolves, and
scripts/browser_check.py proves the pages render; these tests pin what a build cannot see.
"""
import importlib.util
import pathlib
import re

import jupytext
import pytest
import yaml

import servelib

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = (ROOT / "_toc.yml").read_text()

# The syllabus's vocabulary, as glossary term names.
SYLLABUS_TERMS = ["KV cache", "GQA", "MQA", "Prefill", "Decode", "TTFT", "ITL", "TPOT",
                  "Arithmetic intensity", "Ridge point", "Continuous batching", "In-flight batching",
                  "PagedAttention", "Preemption", "Chunked prefill", "PTU", "Spillover", "TP degree"]
REQUIRED_REFERENCES = ["kwon2023vllm", "yu2022orca", "agrawal2024sarathi", "zhong2024distserve",
                       "austin2025scalinginference", "chen2022inferencearithmetic", "nvidia_a100",
                       "nvidia_h100", "nvidia_h200", "nvidia_l4", "nvidia_t4", "nvidia_l40s", "amd_mi300x",
                       "nvidia_hgx_b200"]


def glossary_terms() -> list[str]:
    text = (BOOK / "glossary.md").read_text()
    block = text.split("```{glossary}")[1].split("```")[0]
    return [line.strip() for line in block.splitlines() if line.strip() and not line.startswith(" ")]


def book_sources() -> dict[str, str]:
    """Every page's text: the prose pages and the chapters' reviewable .py pairs."""
    pages = {p.name: p.read_text() for p in BOOK.glob("*.md")}
    pages.update({p.name: "\n".join(c.source for c in jupytext.read(p).cells) for p in CHAPTERS})
    return pages


def test_glossary_defines_the_syllabus_vocabulary():
    terms = glossary_terms()
    assert len(terms) == len(set(terms)), "a glossary term is defined twice"
    missing = [t for t in SYLLABUS_TERMS if t not in terms]
    assert not missing, f"glossary lacks {missing}"


def test_every_term_role_names_a_glossary_term():
    terms = {t.lower() for t in glossary_terms()}        # Sphinx matches terms case-insensitively
    for name, text in book_sources().items():
        for m in re.finditer(r"\{term\}`([^`]+)`", text):
            target = re.search(r"<([^>]+)>$", m.group(1))
            term = " ".join((target.group(1) if target else m.group(1)).split())   # as Sphinx reads it
            assert term.lower() in terms, f"{name}: {m.group(0)}"


def bib_keys() -> list[str]:
    return re.findall(r"^@\w+\{([^,\s]+),", (BOOK / "references.bib").read_text(), flags=re.M)


def test_references_hold_the_syllabus_sources_once_each_and_all_are_cited():
    keys = bib_keys()
    assert len(keys) == len(set(keys)), "duplicate bibtex key"
    assert set(REQUIRED_REFERENCES) <= set(keys)
    cited = set()
    for text in book_sources().values():
        for m in re.finditer(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            cited.update(k.strip() for k in m.group(1).split(","))
    assert cited <= set(keys), f"cited but not in references.bib: {cited - set(keys)}"
    assert set(REQUIRED_REFERENCES) <= cited, f"never cited: {set(REQUIRED_REFERENCES) - cited}"


def test_toc_has_the_reader_pages():
    for page in ("book/intro", "book/how_to_use", "book/appendix_numbers", "book/glossary", "book/references"):
        assert re.search(rf"(root|file): {page}\s*$", TOC, flags=re.M), page
    assert TOC.index("book/how_to_use") < TOC.index("notebooks/")


def prose_of_appendix() -> str:
    """The appendix's prose: no front matter, code cells, comments, maths or roles."""
    text = (BOOK / "appendix_numbers.md").read_text().split("---", 2)[2]
    text = re.sub(r"```\{code-cell\}.*?```", "", text, flags=re.S)
    text = re.sub(r"```\{glue\}.*?```", "", text, flags=re.S)
    text = re.sub(r"^%.*$", "", text, flags=re.M)
    text = re.sub(r"\$[^$]+\$", "", text)
    return re.sub(r"\{[\w:]+\}`[^`]+`", "", text)


def test_appendix_types_no_number():
    """Every number on the appendix page comes from servelib through glue."""
    prose = prose_of_appendix()
    typed = re.findall(r"(?<![\w.-])\d[\d,.]*%?(?![\w-])", prose)
    assert typed == [], f"typed numbers in the appendix: {typed}"
    assert "{glue:text}`conc_gqa`" in (BOOK / "appendix_numbers.md").read_text()


def test_appendix_is_an_executed_text_notebook():
    head = (BOOK / "appendix_numbers.md").read_text().split("---", 2)[1]
    meta = yaml.safe_load(head)
    assert meta["file_format"] == "mystnb" and meta["kernelspec"]["name"] == "python3"


# Words that carry a unit or say what is counted, for axis labels without a "(unit)"
# ("batch size" counts sequences, as the field says it).
UNIT_WORDS = {"batch", "tokens", "token", "sequences", "requests", "users", "gpus", "usd", "day", "days", "hour",
              "hours", "percentile", "fraction", "ratio", "s", "ms", "bytes", "gib", "gb", "flop", "flop/s"}
FIGURE_CELL = re.compile(r"new_axes\(|plt\.subplots|\bfig\w*\s*=\s*\w+_figure\(")


def axis_labels(code: str) -> list[str]:
    labels = []
    for m in re.finditer(r'new_axes\(\s*f?"([^"]*)"\s*,\s*f?"([^"]*)"', code):
        labels += m.groups()
    labels += re.findall(r'set_[xy]label\(\s*f?"([^"]*)"', code)
    labels += re.findall(r'[xy]label\s*=\s*f?"([^"]*)"', code)
    return labels


def has_unit(label: str) -> bool:
    words = set(re.findall(r"[\w/$%]+", label.lower())) | set(re.findall(r"[\w$%]+", label.lower()))
    return "(" in label or "$" in label or bool(words & UNIT_WORDS)


@pytest.mark.parametrize("py", CHAPTERS, ids=lambda p: p.name)
def test_figures_have_captions_and_axes_have_units(py):
    cells = jupytext.read(py).cells
    n_figures = 0
    for i, cell in enumerate(cells):
        if cell.cell_type != "code" or not FIGURE_CELL.search(cell.source):
            continue
        n_figures += 1
        nxt = next((c for c in cells[i + 1:] if c.cell_type == "markdown"), None)
        assert nxt is not None and nxt.source.lstrip().startswith("*Figure"), \
            f"{py.name}: the figure made by\n{cell.source[:200]}\nneeds an italic '*Figure: ...*' caption after it"
        for label in axis_labels(cell.source):
            # An empty label is a categorical axis, named by its tick labels.
            assert label == "" or has_unit(label), f"{py.name}: axis label {label!r} has no unit"
    assert n_figures >= 1, f"{py.name} has no figure"


def test_unit_check_is_not_vacuous():
    assert not has_unit("throughput") and has_unit("time (ms)") and has_unit("concurrent sequences")
    assert has_unit("decode tokens/s") and has_unit("FLOP/s") and not has_unit("speed")
    assert axis_labels('plots.new_axes("context length (tokens)", "concurrent sequences", "t")') == \
        ["context length (tokens)", "concurrent sequences"]


def test_colab_and_repository_settings():
    assert CONFIG["repository"]["url"] == servelib.REPO_URL
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["html"]["use_repository_button"] is True


def test_maths_is_served_from_the_book_not_a_cdn():
    sphinx = CONFIG["sphinx"]
    assert sphinx["config"]["mathjax_path"] == "mathjax/tex-chtml.js"     # relative: _static/mathjax
    assert "offline_assets" in sphinx["local_extensions"]
    assert sphinx["config"]["nb_ipywidgets_js"] == {}
    import mathjax                                                           # django-static-mathjax
    assert (pathlib.Path(mathjax.__file__).parent / "static/mathjax/es5/tex-chtml.js").is_file()


CALCULATOR_CALL = re.compile(r"^\s*\w+_(explorer|calculator)\(", re.M)


@pytest.mark.parametrize("py", CHAPTERS, ids=lambda p: p.name)
def test_calculators_have_a_static_figure_beside_them(py):
    """A live calculator shows nothing in the HTML book: its cell hides its output there, and
    the next code cell draws the static figure, so the page is never blank where it stands."""
    cells = jupytext.read(py).cells
    for i, cell in enumerate(cells):
        if cell.cell_type == "code" and CALCULATOR_CALL.search(cell.source):
            assert "remove-output" in cell.metadata.get("tags", []), f"{py.name}: {cell.source!r}"
            nxt = next((c for c in cells[i + 1:] if c.cell_type == "code"), None)
            assert nxt is not None and FIGURE_CELL.search(nxt.source), \
                f"{py.name}: no static figure after {cell.source!r}"


def load_extension(name):
    spec = importlib.util.spec_from_file_location(name, BOOK / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_execution_cache_key_changes_with_the_package_source(tmp_path):
    digest = load_extension("execution_cache").source_digest
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text("X = 1\n")
    before = digest(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_bytes(b"bytecode")
    assert digest(tmp_path) == before                      # compiled files do not count
    (tmp_path / "sub" / "m.py").write_text("X = 2\n")
    assert digest(tmp_path) != before                      # an edit re-executes every notebook
    assert len(load_extension("execution_cache").source_digest()) == 16   # the real package hashes


def test_repeated_page_scripts_are_dropped_keeping_order():
    class JS:                                              # the shape of Sphinx's _JavaScript
        def __init__(self, filename, **attributes):
            self.filename, self.attributes = filename, attributes
    a, body1, b, body2 = JS("a.js"), JS("", body="const X = 1"), JS("b.js"), JS(None, body="const X = 1")
    context = {"script_files": [a, body1, b, body2, JS("a.js")]}
    load_extension("single_scripts").drop_repeated_scripts(None, "p", "t", context, None)
    assert context["script_files"] == [a, body1, b]


def test_colab_badge_is_served_locally():
    from docutils import nodes
    ext = load_extension("offline_assets")
    doc = nodes.document(None, None)
    doc += nodes.image(uri=ext.COLAB_BADGE_URL)
    doc += nodes.image(uri="other.png")
    ext.local_colab_badge(None, doc, "notebooks/03_kv_cache")
    assert [i["uri"] for i in doc.findall(nodes.image)] == ["../_static/colab-badge.svg", "other.png"]
    assert ext.BADGE.is_file()
