"""The Colab path, as far as it can be run here: each chapter's first code cell with Colab simulated.

On Colab the cell must install servelib from the book's repository (pinned to its main
branch) and then report the device; anywhere else it must install nothing. ``google.colab``
is faked in ``sys.modules`` and ``subprocess.run`` is replaced by a recorder, so nothing is
installed for real. (scripts/check_ipywidgets7.sh runs the notebooks themselves with Colab's
ipywidgets 7.7, from a folder that holds nothing but the notebooks.)
"""
import importlib.util
import json
import pathlib
import subprocess
import sys
import types

import pytest

import servelib
from servelib.measure import pick_device

NB_DIR = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9]*.ipynb"))
DEVICE_KIND = pick_device().kind         # "cpu" here; what the setup cell must name


def first_code_cell(nb_path) -> str:
    nb = json.loads(nb_path.read_text())
    return next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def run_setup_cell(nb_path, monkeypatch, *, on_colab: bool, servelib_installed: bool):
    """Execute the notebook's first code cell; return the commands it passed to subprocess.run."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, *a, **kw: calls.append((list(cmd), kw)))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if not servelib_installed:
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a, **kw: None if name == "servelib" else real(name, *a, **kw))
    exec(compile(first_code_cell(nb_path), f"{nb_path.name}[setup]", "exec"), {"__name__": "__main__"})
    return calls


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_on_colab_the_setup_cell_installs_servelib_pinned_to_the_repository(nb_path, monkeypatch, capsys):
    calls = run_setup_cell(nb_path, monkeypatch, on_colab=True, servelib_installed=False)
    assert len(calls) == 1, calls
    cmd, kwargs = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert f"servelib @ git+{servelib.REPO_URL}@main" in cmd
    assert kwargs.get("check") is True                     # a failed install stops the notebook
    assert DEVICE_KIND in capsys.readouterr().out         # then it reports the device


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_on_colab_with_servelib_already_installed_nothing_is_reinstalled(nb_path, monkeypatch):
    assert run_setup_cell(nb_path, monkeypatch, on_colab=True, servelib_installed=True) == []


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_outside_colab_nothing_is_installed(nb_path, monkeypatch, capsys):
    # Even where servelib looked missing, the cell must leave a local environment alone.
    assert run_setup_cell(nb_path, monkeypatch, on_colab=False, servelib_installed=False) == []
    assert DEVICE_KIND in capsys.readouterr().out


def test_the_fake_colab_is_what_the_cell_tests():
    """Guard against a vacuous pass: the cell's condition really is the google.colab module."""
    src = first_code_cell(NOTEBOOKS[0])
    assert '"google.colab" in sys.modules' in src and "subprocess.run(" in src
