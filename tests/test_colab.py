"""The Colab path, as far as it can be run here: each chapter's first code cell with Colab simulated.

On Colab the cell must install servelib from the book's repository, pinned to the book's
release tag (``scripts/release.py`` writes it), and then report the device; if the install
fails it says so in one sentence, with what to do, instead of a traceback; anywhere else it
installs nothing. ``google.colab`` is faked in ``sys.modules`` and ``subprocess.run`` is
replaced by a recorder, so nothing is installed for real. (scripts/check_ipywidgets7.sh
runs the notebooks themselves with Colab's ipywidgets 7.7, from a folder that holds nothing
but the notebooks.)
"""
import importlib.util
import json
import pathlib
import re
import subprocess
import sys
import types

import pytest
import yaml
from IPython.core.interactiveshell import InteractiveShell

import servelib
from servelib.measure import pick_device

ROOT = pathlib.Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9]*.ipynb"))
DEVICE_KIND = pick_device().kind         # "cpu" here; what the setup cell must name
TAG = f"v{servelib.__version__}"
# What pip writes when GitHub cannot be reached (coloured: a Jupyter kernel asks for colour).
PIP_FAILURE = ("  \x1b[1;31merror\x1b[0m: \x1b[1msubprocess-exited-with-error\x1b[0m\n"
               "  \x1b[31m   \x1b[0m fatal: unable to access 'https://github.com/x/y/': "
               "Could not resolve host: github.com\n"
               "\x1b[1;35mnote\x1b[0m: This error originates from a subprocess, and is likely not a problem with pip.\n"
               "\x1b[31mERROR: Failed to build 'servelib' when git clone https://github.com/x/y\x1b[0m\n")


def first_code_cell(nb_path) -> str:
    nb = json.loads(nb_path.read_text())
    return next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def fake_colab(monkeypatch, *, on_colab: bool, servelib_installed: bool, pip_returncode: int = 0):
    """Simulate (or not) a Colab runtime; return the list that records subprocess.run calls."""
    calls = []

    def run(cmd, *args, **kwargs):
        calls.append((list(cmd), kwargs))
        return subprocess.CompletedProcess(cmd, pip_returncode, "", PIP_FAILURE if pip_returncode else "")
    monkeypatch.setattr(subprocess, "run", run)
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if not servelib_installed:
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a, **kw: None if name == "servelib" else real(name, *a, **kw))
    return calls


def run_setup_cell(nb_path, monkeypatch, **colab):
    """Execute the notebook's first code cell; return the commands it passed to subprocess.run."""
    calls = fake_colab(monkeypatch, **colab)
    exec(compile(first_code_cell(nb_path), f"{nb_path.name}[setup]", "exec"), {"__name__": "__main__"})
    return calls


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_on_colab_the_setup_cell_installs_servelib_pinned_to_the_release(nb_path, monkeypatch, capsys):
    calls = run_setup_cell(nb_path, monkeypatch, on_colab=True, servelib_installed=False)
    assert len(calls) == 1, calls
    cmd, kwargs = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert f"servelib @ git+{servelib.REPO_URL}@{TAG}" in cmd
    assert kwargs.get("capture_output") is True                # pip's noise is read, not shown
    assert DEVICE_KIND in capsys.readouterr().out             # then it reports the device


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_failed_install_says_so_in_one_sentence(nb_path, monkeypatch, capsys):
    """Run as IPython runs a cell: what the reader sees is one sentence (what failed, why, what
    to do), no traceback, and the notebook stops there (the cell fails)."""
    fake_colab(monkeypatch, on_colab=True, servelib_installed=False, pip_returncode=1)
    shell = InteractiveShell.instance()
    result = shell.run_cell(first_code_cell(nb_path), store_history=False)
    shown = capsys.readouterr().out.strip()
    assert not result.success and type(result.error_in_exec).__name__ == "InstallFailed"
    assert "Traceback" not in shown and "CalledProcessError" not in shown
    assert len(shown.splitlines()) == 1, shown
    assert f"servelib @ git+{servelib.REPO_URL}@{TAG}" in shown
    assert "(unable to access 'https://github.com/x/y/': Could not resolve host: github.com)" in shown
    assert "run this cell again" in shown and "\x1b" not in shown


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


def test_every_pin_names_the_release_of_the_package():
    """scripts/release.py writes one version everywhere a reader's notebook points; none may lag."""
    pyproject = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
    assert pyproject == servelib.__version__
    assert yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["branch"] == TAG
    for py in sorted(NB_DIR.glob("[0-9]*.py")):
        text = py.read_text()
        assert re.findall(r'^RELEASE = "([^"]+)"', text, flags=re.M) == [TAG], py.name
        assert re.findall(r"/blob/([^/]+)/notebooks/", text) == [TAG], py.name


def test_release_script_writes_every_pin(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    for rel in ("pyproject.toml", "servelib/__init__.py", "_config.yml", "notebooks/01_prefill_decode.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    monkeypatch.setattr(release, "ROOT", tmp_path)
    changed = release.write_version("9.8.7")
    assert len(changed) == 4
    chapter = (tmp_path / "notebooks/01_prefill_decode.py").read_text()
    assert 'RELEASE = "v9.8.7"' in chapter and "/blob/v9.8.7/notebooks/01_prefill_decode.ipynb" in chapter
    assert 'version = "9.8.7"' in (tmp_path / "pyproject.toml").read_text()
    assert '__version__ = "9.8.7"' in (tmp_path / "servelib/__init__.py").read_text()
    assert "branch: v9.8.7" in (tmp_path / "_config.yml").read_text()
    with pytest.raises(ValueError, match="1.2.3"):
        release.write_version("v1")
