"""Every chapter notebook follows the book's conventions and matches its reviewable pair."""
import json
import pathlib
import re

import jupytext
import pytest

import servelib
from servelib.grading import REGISTRY

NB_DIR = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9]*.ipynb"))


def test_there_are_chapters():
    assert NOTEBOOKS, "no chapter notebooks found"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_pair_in_sync(nb_path):
    """The .ipynb is generated from the .py pair by scripts/nbsync.py; they must agree."""
    py = nb_path.with_suffix(".py")
    assert py.exists(), f"{py.name} missing: edit the .py and run scripts/nbsync.py"
    a, b = jupytext.read(nb_path), jupytext.read(py)
    assert [(c.cell_type, c.source) for c in a.cells] == [(c.cell_type, c.source) for c in b.cells], \
        f"{nb_path.name} differs from {py.name}: run python scripts/nbsync.py {py.relative_to(NB_DIR.parent)}"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_badge_and_install_cell(nb_path):
    nb = json.loads(nb_path.read_text())
    first_md = "".join(nb["cells"][0]["source"])
    badge = f"colab.research.google.com/github/{servelib.REPO_URL.removeprefix('https://github.com/')}" \
            f"/blob/main/notebooks/{nb_path.name}"
    assert badge in first_md
    first_code = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert '"google.colab" in sys.modules' in first_code and servelib.REPO_URL in first_code


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


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_small_and_error_free(nb_path):
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error"
            assert "image/png" not in out.get("data", {}), "figures are made by the build, not stored"
