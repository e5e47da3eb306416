"""Include each page script once.

sphinx-thebe registers its inline configuration (``const THEBE_JS_URL = ...``) on every
read of the sources, and a build that reads twice (as an executing Jupyter Book build can)
puts it on each page twice; the second ``const`` is a SyntaxError in the reader's browser
console. Identical script entries are dropped here, keeping the first.
"""
from __future__ import annotations


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    """Remove repeated entries (same file or body, same attributes) from the page's scripts.

    Entries are Sphinx's ``_JavaScript`` objects (``filename`` None or "" for an inline body,
    which is then in ``attributes["body"]``), or plain strings from older extensions.
    """
    seen, unique = set(), []
    for js in context.get("script_files", []):
        key = (getattr(js, "filename", js) or None, tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", drop_repeated_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
