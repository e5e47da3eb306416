"""Regenerate chapter notebooks from their reviewable percent-format pairs.

    python scripts/nbsync.py [notebooks/NN_name.py ...]     (default: every pair)

Each ``notebooks/NN_name.py`` (jupytext percent format, the file to edit and review) is
converted to ``NN_name.ipynb`` (what Colab, nbval and the book use), executed in a fresh
kernel, and saved with only the outputs nbval compares: those of cells marked
``# NBVAL_CHECK_OUTPUT``. Everything else is re-executed by the book build, so the stored
file stays small and identical on every machine. ``tests/test_notebooks.py`` fails when
a pair has drifted.
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import time

import jupytext
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECK = "# NBVAL_CHECK_OUTPUT"


def sync(py: pathlib.Path) -> pathlib.Path:
    nb = jupytext.read(py)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(py.parent)}}).execute()
    nb.metadata.pop("widgets", None)   # live widget state: random ids, rebuilt on every run
    seen = set()
    for cell in nb.cells:
        # Ids from the content, not random, so regenerating an unchanged notebook changes nothing.
        digest = hashlib.sha1(cell.source.encode()).hexdigest()[:8]
        while digest in seen:
            digest = hashlib.sha1(digest.encode()).hexdigest()[:8]
        seen.add(digest)
        cell.id = digest
        if cell.cell_type == "code" and CHECK not in cell.source:
            cell.outputs = []
            cell.execution_count = None
    out = py.with_suffix(".ipynb")
    jupytext.write(nb, out, fmt="ipynb")
    print(f"{out.relative_to(ROOT)}: executed in {time.perf_counter() - t0:.1f} s")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip(),
                                     usage="python scripts/nbsync.py [notebooks/NN_name.py ...]")
    parser.add_argument("paths", nargs="*", type=pathlib.Path,
                        help="percent-format chapter sources (default: every notebooks/[0-9]*.py)")
    args = parser.parse_args()
    paths = [p.resolve() for p in args.paths] or sorted((ROOT / "notebooks").glob("[0-9]*.py"))
    for p in paths:
        if p.suffix != ".py" or not p.is_file():
            parser.error(f"{p} is not an existing .py chapter source")
    for p in paths:
        sync(p)
