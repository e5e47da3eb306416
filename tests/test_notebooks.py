"""Every chapter notebook follows the book's conventions and is the reader's copy of its source."""
import importlib.util
import json
import pathlib
import re

import jupytext
import nbformat
import pytest

import servelib
from servelib.book import MEASURED_PREFIX
from servelib.grading import REGISTRY
from servelib.grading.student import student_notebook

ROOT = pathlib.Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9]*.ipynb"))
SOURCES = sorted(NB_DIR.glob("[0-9]*.py"))

_spec = importlib.util.spec_from_file_location("nbsync", ROOT / "scripts" / "nbsync.py")
nbsync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbsync)

#: The longest code line a chapter may have: 88 characters fit the page's column.
MAX_LINE = 88


def test_there_are_chapters():
    assert NOTEBOOKS, "no chapter notebooks found"
    assert [p.stem for p in NOTEBOOKS] == [p.stem for p in SOURCES], "every source needs its notebook"


def cells(nb):
    return [(c.cell_type, c.source, c.metadata.get("tags", []), c.get("outputs", []),
             c.metadata.get("jupyter", {})) for c in nb.cells]


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_the_reader_copy_of_its_source(nb_path):
    """The .ipynb is what scripts/nbsync.py writes from the .py: rewriting it from the stored
    glue values and outputs must give it back unchanged. (That each stored value is what the
    code computes now is nbval's part: it compares the glue cells' outputs.)"""
    py = nb_path.with_suffix(".py")
    assert py.exists(), f"{py.name} missing: edit the .py and run scripts/nbsync.py"
    stored = nbformat.read(nb_path, as_version=4)
    hint = f"{nb_path.name} differs from {py.name}: run python scripts/nbsync.py notebooks/{py.name}"
    try:
        expected = nbsync.reader_notebook(jupytext.read(py), stored)
    except nbsync.SyncError as err:
        pytest.fail(f"{hint} ({err})")
    assert cells(expected) == cells(stored), hint


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_reader_sees_no_myst_and_no_test_markers(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            left = nbsync.LEFTOVER.search(cell.source)
            assert left is None, f"raw MyST {left.group(0)!r} in\n{cell.source[:300]}"
        else:
            assert nbsync.MARKER not in cell.source, "the nbval marker must be a cell tag"
    for cell in student_notebook(nb).cells:           # and the student versions made from it
        assert nbsync.MARKER not in cell.source and not nbsync.LEFTOVER.search(cell.source)


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_filled_in_number_is_compared_by_nbval(nb_path):
    """Each glued value is stored in a cell that nbval compares, and every value the prose
    uses is there (values measured on the reader's machine are not filled in)."""
    nb = nbformat.read(nb_path, as_version=4)
    glued = {}
    for cell in nb.cells:
        found = nbsync.glue_records(cell)
        if found:
            assert nbsync.CHECK_TAG in cell.metadata.get("tags", []) and cell.execution_count, cell.source
        glued.update(found)
    source = "\n".join(c.source for c in jupytext.read(nb_path.with_suffix(".py")).cells if c.cell_type == "markdown")
    used = {m.group(2).split(":")[0] for m in nbsync.ROLE.finditer(source) if m.group(1).startswith("glue")}
    fixed = {n for n in used if not n.startswith(MEASURED_PREFIX)}
    assert fixed <= set(glued), f"used in the prose but not stored: {fixed - set(glued)}"


def test_sources_do_not_pair_with_the_reader_notebook():
    """jupytext must not write a .ipynb from a .py (or back): the notebook is nbsync's output."""
    for py in SOURCES:
        assert jupytext.read(py).metadata["jupytext"].get("formats") in (None, "py:percent"), py.name


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_badge_and_install_cell(nb_path):
    nb = json.loads(nb_path.read_text())
    first_md = "".join(nb["cells"][0]["source"])
    badge = f"colab.research.google.com/github/{servelib.REPO_URL.removeprefix('https://github.com/')}" \
            f"/blob/v{servelib.__version__}/notebooks/{nb_path.name}"
    assert badge in first_md
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    first_code = "".join(first["source"])
    assert '"google.colab" in sys.modules' in first_code and servelib.REPO_URL in first_code
    assert "hide-input" in first["metadata"].get("tags", []), "the set-up cell sits behind a toggle in the HTML"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_have_solutions_and_checks(nb_path):
    nb = json.loads(nb_path.read_text())
    ids = []
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "### BEGIN SOLUTION" in src:
            assert "### END SOLUTION" in src
            m = re.search(r'check\("([\w-]+)"', src.split("### END SOLUTION")[1])
            assert m, f"solution cell without check(...) after it:\n{src}"
            assert m.group(1) in REGISTRY
            assert "hide-input" in cell["metadata"].get("tags", [])
            ids.append(m.group(1))
    assert len(ids) >= 5 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.name)
def test_self_test_answers_wait_behind_a_toggle(py):
    """Under a "Self-test" heading, a cell that prints (the answers) is tagged hide-output."""
    in_self_test = False
    for cell in jupytext.read(py).cells:
        if cell.cell_type == "markdown":
            headings = re.findall(r"^#+\s+(.*)$", cell.source, flags=re.M)
            if headings:
                in_self_test = "self-test" in headings[-1].lower()
        elif in_self_test and ("print(" in cell.source or "display(" in cell.source):
            assert "hide-output" in cell.metadata.get("tags", []), cell.source[:200]


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_small_and_error_free(nb_path):
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error"
            assert not {"image/png", "image/svg+xml"} & set(out.get("data", {})), \
                "figures are made by the build, not stored"


def long_lines(py: pathlib.Path) -> list[str]:
    return [line for c in jupytext.read(py).cells if c.cell_type == "code"
            for line in c.source.splitlines() if len(line) > MAX_LINE]


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.name)
def test_code_lines_fit_the_column(py):
    """A code line over 88 characters scrolls sideways on the page (scripts/browser_check.py
    counts the cells that do in the built site)."""
    lines = long_lines(py)
    assert not lines, (f"{py.name}: {len(lines)} code lines over {MAX_LINE} characters; wrap:\n"
                       + "\n".join(lines[:5]))
