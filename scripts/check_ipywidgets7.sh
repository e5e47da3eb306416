#!/usr/bin/env bash
# Run the chapters as Colab would: with ipywidgets 7.7 (the version Colab ships; the book's
# own environment has 8) and from a folder holding nothing but the notebooks (a Colab
# runtime has no clone of this repository, so a notebook that reads a file from it fails
# here). The calculators' unit tests run under ipywidgets 7.7 too.
#
#   bash scripts/check_ipywidgets7.sh [VENV]     (VENV: the book's environment, default .venv)
#
# A throwaway venv holds only ipywidgets 7.7 and what it alone needs; everything else is
# taken from VENV, behind it on sys.path, so the check costs one small install.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-.venv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
py="$work/venv/bin/python"
base_site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
own_site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a plain path line) so the base's own .pth files, servelib's editable
# install among them, are processed too.
echo "import site; site.addsitedir('$base_site')" > "$own_site/zz_book_env.pth"
"$py" -m pip install -q --disable-pip-version-check --no-deps \
    ipywidgets==7.7.1 widgetsnbextension==3.6.10 ipython-genutils==0.2.0
"$py" -c 'import ipywidgets, servelib; assert ipywidgets.__version__ == "7.7.1", ipywidgets.__version__; print("ipywidgets", ipywidgets.__version__, "with servelib from", servelib.__file__)'

# The test suite's own setting (conftest.py): glue values are recorded, so nbval compares
# every number the notebooks' prose shows, and figures are checked.
export SERVELIB_BOOK_RUN=1
mkdir "$work/notebooks"
cp notebooks/[0-9]*.ipynb "$work/notebooks/"
"$py" -m pytest -c pyproject.toml --rootdir=. -p no:cacheprovider -q \
    tests/test_*widgets*.py "$work/notebooks"
