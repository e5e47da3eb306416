"""Key the notebook execution cache on servelib's source too, so a cache never hides a failure.

myst-nb's cache (jupyter-cache) re-executes a notebook when the notebook's code changes,
but not when the package it imports does: after an edit to ``servelib`` a cached build
would show outputs the new code may no longer produce, or a cell that now raises as passing.
So the cache lives in a folder named by a hash of every file under ``servelib/``: change
the package and the next build executes every notebook afresh (and a failing cell fails
the build, ``raise_on_error``); change nothing and the build reuses every result.
"""
from __future__ import annotations

import hashlib
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "servelib"


def source_digest(package: pathlib.Path = PACKAGE) -> str:
    """A short hash of the relative paths and contents of every source file under ``package``."""
    h = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def set_cache_path(app, config):
    """Point ``nb_execution_cache_path`` at ``<build>/.jupyter_cache/servelib-<digest>``."""
    if not config.nb_execution_cache_path:
        root = pathlib.Path(app.outdir).parent / ".jupyter_cache"
        config.nb_execution_cache_path = str(root / f"servelib-{source_digest()}")


def setup(app):
    app.connect("config-inited", set_cache_path)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
