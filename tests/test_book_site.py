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


# ---------------------------------------------------------------------------------------
# What a reader meets in the prose: each check below once failed on this book.

def browser_check():
    spec = importlib.util.spec_from_file_location("browser_check", ROOT / "scripts" / "browser_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def markdown_tokens(text: str):
    """Every token of ``text`` as the book's MyST parser reads it (maths, roles, code, text)."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser
    md = create_md_parser(MdParserConfig(enable_extensions={"colon_fence", "dollarmath", "linkify",
                                                            "substitution", "tasklist"}), RendererHTML)

    def walk(tokens):
        for t in tokens:
            yield t
            yield from walk(t.children or [])
    return list(walk(md.parse(text)))


def prose() -> dict[str, str]:
    """The markdown of every page: the chapters' markdown cells and the book's pages."""
    pages = {p.name: p.read_text() for p in BOOK.glob("*.md")}
    pages.update({p.name: "\n\n".join(c.source for c in jupytext.read(p).cells if c.cell_type == "markdown")
                  for p in CHAPTERS})
    return pages


def test_maths_never_typesets_words():
    """A ``$`` in prose opens maths ("$2.50 per H100-hour ... ($180,000" became one italic
    formula), and a word as a subscript turns italic (``d_{head}``): both are caught here
    from the sources, and in the built pages by scripts/browser_check.py."""
    math_words = browser_check().math_words
    found = []
    for name, text in prose().items():
        for t in markdown_tokens(text):
            if t.type in ("math_inline", "math_block", "math_block_label") or \
                    (t.type == "myst_role" and t.meta.get("name") == "math"):
                if math_words(t.content):
                    found.append(f"{name}: {t.content.strip()[:70]!r} {math_words(t.content)}")
    assert found == [], "write \\$ for a dollar sign, \\text{} for words in maths:\n" + "\n".join(found)


def test_math_words_is_not_vacuous():
    words = browser_check().math_words
    assert words("2.50 per H100-hour (") == ["per", "hour"] and words("d_{head}") == ["head"]
    assert words(r"d_\text{head} \cdot H_{kv} + \max(PN, \frac{a}{b})") == []
    tokens = markdown_tokens("It costs $2.50 per hour ($1 a minute) and `x$y` and $x$.")
    assert [t.content for t in tokens if t.type == "math_inline"] == ["2.50 per hour (", "x"]


def test_prose_writes_powers_as_maths():
    """"10^12" in text shows the caret; a power is maths: $10^{12}$."""
    for name, text in prose().items():
        for t in markdown_tokens(text):
            if t.type == "text":
                assert not re.search(r"\b\d+\^\d", t.content), f"{name}: {t.content!r}"


def test_reader_visible_text_does_not_say_syllabus():
    """Readers do not know what "the syllabus" refers to: not in prose, code or comments."""
    texts = dict(prose())
    texts.update({p.name: p.read_text() for p in CHAPTERS})
    for name, text in texts.items():
        assert "syllabus" not in text.lower(), name


def test_no_heading_is_empty():
    """A heading followed directly by another heading shows as a title with nothing under it."""
    for name, text in prose().items():
        tokens = [t for t in markdown_tokens(text) if t.level == 0 and not t.type.endswith("_close")]
        for a, b in zip(tokens, tokens[1:]):
            if a.type == "heading_open" and b.type == "heading_open":
                assert int(b.tag[1]) <= int(a.tag[1]), f"{name}: a {a.tag} with nothing before the next {b.tag}"


def test_references_hold_no_latex_markup():
    """pybtex prints LaTeX commands in a reference as they are ("\\emph How to Scale ...")."""
    bib = (BOOK / "references.bib").read_text()
    assert not re.search(r"\\[A-Za-z]+", bib), re.search(r".{30}\\[A-Za-z]+.{30}", bib).group(0)


def test_chapters_that_measure_say_why_the_figures_move():
    """A rate measured in two chapters comes out different on a busy machine; each chapter
    that measures this machine says so in the prose after its measurement."""
    for py in CHAPTERS:
        nb = jupytext.read(py)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and "measure_profile(" in cell.source:
                after = " ".join(c.source for c in nb.cells[i + 1:i + 4] if c.cell_type == "markdown")
                assert re.search(r"second run|run to run|from one run", after), \
                    f"{py.name}: say after the measurement that a second run can give other figures"


# Figures go through servelib.plots, which keeps legends off the data and labels off the lines
# (and checks every figure when the book runs it); a chapter that calls matplotlib's own
# legend, annotate or tight_layout is back to the faults that check was written for.
RAW_FIGURE_CALLS = re.compile(r"(?<!plots)\.legend\(|\.annotate\(|\.text\(|tight_layout\(|fontsize\s*=|figsize\s*=")


@pytest.mark.parametrize("py", CHAPTERS, ids=lambda p: p.name)
def test_figures_use_the_book_style(py):
    for cell in jupytext.read(py).cells:
        if cell.cell_type == "code":
            m = RAW_FIGURE_CALLS.search(cell.source)
            assert m is None, f"{py.name}: {m.group(0)!r}: use plots.legend(fig) / plots.label(ax, ...)"


def test_chapters_are_built_from_their_sources():
    sphinx = CONFIG["sphinx"]["config"]
    assert sphinx["nb_custom_formats"][".py"][0] == "jupytext.reads"
    assert "notebooks/*.ipynb" in CONFIG["exclude_patterns"] and "notebooks/*.py" not in CONFIG["exclude_patterns"]
    assert sphinx["nb_merge_streams"] is True          # a table printed in a loop is one output
    assert "book_run" in CONFIG["sphinx"]["local_extensions"]


def test_the_site_drops_check_verdicts_and_reports_failed_ones():
    drop = load_extension("book_run").drop_verdicts
    assert drop("answer 3.2 GiB\n[check] kv-3: correct\n") == ("answer 3.2 GiB\n", [])
    text, failed = drop("[check] kv-3: not yet: 2 is not within 1% of the answer.\n")
    assert failed == ["[check] kv-3: not yet: 2 is not within 1% of the answer."] and text
