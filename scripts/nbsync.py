"""Write each chapter's reader notebook from its reviewable percent-format source.

    python scripts/nbsync.py [notebooks/NN_name.py ...]     (default: every chapter)

``notebooks/NN_name.py`` (jupytext percent format, MyST markdown) is what authors edit and
what the HTML book is built from. This script executes it in a fresh kernel and writes
``NN_name.ipynb``, the notebook readers open in Jupyter or on Colab (and nbval runs):

- markdown reads without Sphinx: each ``{glue:text}`` number is filled in (a value measured
  on the reader's own machine, named ``live_...``, points at the printed measurement
  instead), ``{term}`` roles become their text, ``{cite}`` roles "(Kwon et al., 2023)"
  linked to the source, admonitions block-quoted call-outs (a ``dropdown`` one a
  ``<details>`` toggle); labels and MyST comments are dropped;
- the nbval marker ``# NBVAL_CHECK_OUTPUT`` becomes the cell tag ``nbval-check-output``,
  so readers never see it;
- stored outputs are only those nbval compares: the marked cells' prints and the glue
  cells' values. So the test suite re-executes every notebook and compares each filled-in
  number with what the code computes now; ``tests/test_notebooks.py`` fails when a source
  and its notebook have drifted;
- cells the book removes (``remove-cell``: glue and other plumbing) start collapsed.

The run fails, naming the cell, when a cell raises or shows an error (a figure that breaks
the book's figure rules, see ``servelib.plots``), when plumbing prints something or a cell
echoes an object (``<... at 0x...>``), when a figure is not SVG, when a glued number
cannot be checked, or when MyST is left over.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import os
import pathlib
import re
import sys
import time

import jupytext
import nbformat
from myst_nb.core.variables import format_plain_text
from nbclient import NotebookClient
from pybtex.database import parse_file
from pybtex.richtext import Text

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from servelib.book import BOOK_RUN_ENV, MEASURED_PREFIX  # noqa: E402

MARKER = "# NBVAL_CHECK_OUTPUT"
CHECK_TAG = "nbval-check-output"
BIB = ROOT / "book" / "references.bib"
#: What a reader's notebook shows where the book glues a value measured on its own machine.
MEASURED_TEXT = "*[measured above]*"

ROLE = re.compile(r"\{([a-z]+(?::[a-z]+)?)\}`([^`]*)`")
FENCE_OPEN = re.compile(r"^(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[\w-]+)\}\s*(?P<arg>.*)$")
#: MyST that a plain Markdown renderer (Jupyter, Colab) would show as raw text.
LEFTOVER = re.compile(r"\{[a-z]+(?::[a-z]+)?\}`|^\s*(`{3,}|~{3,}|:{3,})\{|^\([\w-]+\)=\s*$|^%\s", re.M)
ADMONITIONS = {"admonition", "note", "tip", "hint", "important", "warning", "caution", "attention",
               "danger", "error", "seealso"}


class SyncError(Exception):
    """A chapter that cannot become a correct reader notebook; the message says where and why."""


# ---------------------------------------------------------------------------------------
# Citations


@functools.cache
def references(path: pathlib.Path = BIB) -> dict[str, tuple[str, str | None]]:
    """``{key: ("Kwon et al., 2023", url or None)}`` for every entry of the bibliography.

    The label is the book's author-year style: one author's last name, "A and B" for two,
    "A et al." for more; an organisation (``{NVIDIA}``) as written.
    """
    out = {}
    for key, entry in parse_file(str(path)).entries.items():
        people = entry.persons.get("author", [])
        names = [Text.from_latex(" ".join(p.prelast_names + p.last_names)).render_as("text") for p in people]
        who = (names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2
               else f"{names[0]} et al." if names else Text.from_latex(entry.fields["title"]).render_as("text"))
        url = entry.fields.get("url") or (f"https://doi.org/{entry.fields['doi']}" if "doi" in entry.fields else None)
        out[key] = (f"{who}, {entry.fields.get('year', 'n.d.')}", url)
    return out


def cite(keys: str, textual: bool = False) -> str:
    """``{cite}`a,b``` as "([A, 2023](url); [B, 2024](url))"; ``{cite:t}`` as "A (2023)"."""
    refs = references()
    parts = []
    for key in (k.strip() for k in keys.split(",")):
        if key not in refs:
            raise SyncError(f"{{cite}}`{key}`: no such key in {BIB.relative_to(ROOT)}")
        label, url = refs[key]
        if textual:
            who, year = label.rsplit(", ", 1)
            label = f"{who} ({year})"
        parts.append(f"[{label}]({url})" if url else label)
    return "; ".join(parts) if textual else f"({'; '.join(parts)})"


# ---------------------------------------------------------------------------------------
# MyST markdown -> the Markdown Jupyter and Colab render


def glue_text(name: str, glue: dict[str, str]) -> str:
    """The text ``{glue:text}`name[:fmt]``` shows, formatted as the HTML book formats it."""
    key, _, fmt = name.partition(":")
    if key.startswith(MEASURED_PREFIX):
        return MEASURED_TEXT
    if key not in glue:
        raise SyncError(f"{{glue:text}}`{name}`: no value glued under {key!r} in this chapter")
    # A dollar sign in a value would open maths in Jupyter's Markdown.
    return format_plain_text(glue[key], fmt).replace("$", r"\$")


def render_role(role: str, content: str, glue: dict[str, str]) -> str:
    text, target = content, None
    m = re.fullmatch(r"(.*?)\s*<([^>]+)>", content, flags=re.S)
    if m:
        text, target = m.groups()
    if role in ("glue", "glue:text"):
        return glue_text(content, glue)
    if role in ("term", "ref", "doc", "numref"):
        return " ".join(text.split())
    if role in ("cite", "cite:p", "cite:t"):
        return cite(content, textual=role == "cite:t")
    if role == "math":
        return f"${content}$"
    raise SyncError(f"{{{role}}}`{content}`: no plain-Markdown form for this role")


def callout(name: str, arg: str, body: str) -> str:
    """A directive's body as a block-quoted call-out, or a ``<details>`` toggle for a dropdown."""
    options = dict(re.findall(r"^:([\w-]+):\s*(.*)$", body, flags=re.M))
    body = re.sub(r"^:[\w-]+:.*\n?", "", body, flags=re.M).strip("\n")
    title = arg.strip() or name.capitalize()
    if name == "dropdown" or "dropdown" in options.get("class", "").split():
        return f"<details>\n<summary>{title}</summary>\n\n{body}\n\n</details>"
    quoted = "\n".join(f"> {line}".rstrip() for line in body.splitlines())
    return f"> **{title}**\n>\n{quoted}"


def render_markdown(source: str, glue: dict[str, str]) -> str:
    """``source`` (MyST) as plain Markdown: see the module docstring. Raises SyncError."""
    lines, out, i = source.splitlines(), [], 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence, name = m.group("fence"), m.group("name")
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise SyncError(f"directive {{{name}}} opened with {fence} is never closed")
        body = render_markdown("\n".join(lines[i + 1:end]), glue)
        if name in ADMONITIONS or name == "dropdown":
            out.extend(callout(name, m.group("arg"), body).splitlines())
        elif name == "math":
            out.extend(["$$", body, "$$"])
        else:
            raise SyncError(f"directive {{{name}}}: no plain-Markdown form for it")
        i = end + 1
    text = "\n".join(line for line in out if not re.match(r"^\([\w-]+\)=\s*$|^%(\s|$)", line))
    return ROLE.sub(lambda r: render_role(r.group(1), r.group(2), glue), text)


# ---------------------------------------------------------------------------------------
# Outputs


def glue_records(cell) -> dict[str, str]:
    """``{name: text/plain}`` of the myst-nb glue records among a code cell's outputs."""
    found = {}
    for out in cell.get("outputs", []):
        meta = out.get("metadata", {}).get("scrapbook")
        if meta:
            prefix = meta.get("mime_prefix", "")
            found[meta["name"]] = out["data"].get(prefix + "text/plain", "")
    return found


def check_executed(nb, name: str) -> None:
    """Raise SyncError for what must not reach a reader: see the module docstring."""
    for n, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"{name}, cell {n} ({cell.source.strip().splitlines()[0][:60] if cell.source.strip() else ''!r})"
        glued = glue_records(cell)
        checked = MARKER in cell.source.splitlines()
        others = [o for o in cell.outputs if not o.get("metadata", {}).get("scrapbook")]
        for out in cell.outputs:
            if out.output_type == "error":
                raise SyncError(f"{where}: {out.ename}: {out.evalue}")
            if "image/png" in out.get("data", {}) or "image/jpeg" in out.get("data", {}):
                raise SyncError(f"{where}: a bitmap figure; servelib.plots draws figures as SVG "
                                "(call plots.apply_style() or plots.new_axes)")
        for out in others:
            text = out.get("data", {}).get("text/plain", "")
            if out.output_type == "execute_result" and re.search(r"<[\w.]+ (object )?at 0x[0-9a-f]+>", text):
                raise SyncError(f"{where}: the cell ends with an expression whose value shows as "
                                f"{text[:60]!r}; end it with a statement (or ';')")
        if "remove-cell" in cell.metadata.get("tags", []) and others:
            raise SyncError(f"{where}: this cell is hidden from the book but shows output "
                            f"({others[0].output_type}); plumbing must print nothing")
        for key in glued:
            measured = key.startswith(MEASURED_PREFIX)
            if measured and checked:
                raise SyncError(f"{where}: {key!r} is named as measured ({MEASURED_PREFIX}...) but its "
                                "cell's output is compared by nbval")
            if not measured and others and not checked:
                raise SyncError(f"{where}: {key!r} is glued in a cell whose output nbval does not "
                                f"compare; glue it in a cell of its own, or name it {MEASURED_PREFIX}{key} "
                                "if it is measured on the reader's machine")


# ---------------------------------------------------------------------------------------
# The reader's notebook


def reader_cell(cell, glue: dict[str, str], executed):
    """The reader's version of one source cell (``executed``: the same cell after the run)."""
    if cell.cell_type == "markdown":
        source = render_markdown(cell.source, glue)
        left = LEFTOVER.search(source)
        if left:
            raise SyncError(f"MyST left in the reader's markdown: {left.group(0)!r} in\n{source[:300]}")
        return nbformat.v4.new_markdown_cell(source)
    if cell.cell_type != "code":
        return nbformat.v4.new_raw_cell(cell.source)
    lines = cell.source.splitlines()
    tags = list(cell.metadata.get("tags", []))
    fresh = nbformat.v4.new_code_cell("\n".join(line for line in lines if line.strip() != MARKER))
    outputs = executed.get("outputs", [])
    only_glue = bool(outputs) and all(o.get("metadata", {}).get("scrapbook") for o in outputs)
    if MARKER in lines or only_glue:
        tags.append(CHECK_TAG)
        fresh.outputs = outputs
        fresh.execution_count = executed.execution_count
    if tags:
        fresh.metadata["tags"] = tags
    if "remove-cell" in tags:
        fresh.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    return fresh


def reader_notebook(source_nb, executed_nb):
    """The reader's notebook for ``source_nb``: every cell through :func:`reader_cell`.

    ``executed_nb``: the source after a run, whose outputs and glue values are taken; or a
    stored reader notebook, which then comes back unchanged if nothing has drifted.
    """
    if len(source_nb.cells) != len(executed_nb.cells):
        raise SyncError(f"{len(source_nb.cells)} cells in the source, {len(executed_nb.cells)} executed")
    glue = {}
    for cell in executed_nb.cells:
        glue.update(glue_records(cell))
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": source_nb.metadata["kernelspec"]})
    if "language_info" in executed_nb.metadata:
        nb.metadata["language_info"] = executed_nb.metadata["language_info"]
    seen = set()
    for n, (cell, ran) in enumerate(zip(source_nb.cells, executed_nb.cells)):
        try:
            fresh = reader_cell(cell, glue, ran)
        except SyncError as err:
            raise SyncError(f"cell {n}: {err}") from None
        # Ids from the content, not random, so regenerating an unchanged notebook changes nothing.
        digest = hashlib.sha1(fresh.source.encode()).hexdigest()[:8]
        while digest in seen:
            digest = hashlib.sha1(digest.encode()).hexdigest()[:8]
        seen.add(digest)
        fresh.id = digest
        nb.cells.append(fresh)
    return nb


def execute(py: pathlib.Path):
    """The chapter source, executed as the book executes it (glue recorded, figures checked)."""
    nb = jupytext.read(py)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    os.environ[BOOK_RUN_ENV] = "1"
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(py.parent)}}).execute()
    return nb


def sync(py: pathlib.Path) -> pathlib.Path:
    t0 = time.perf_counter()
    name = py.relative_to(ROOT).as_posix() if py.is_relative_to(ROOT) else py.name
    executed = execute(py)
    check_executed(executed, name)
    try:
        nb = reader_notebook(jupytext.read(py), executed)
    except SyncError as err:
        raise SyncError(f"{name}, {err}") from None
    out = py.with_suffix(".ipynb")
    nbformat.validate(nb)
    nbformat.write(nb, out)
    print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: "
          f"executed in {time.perf_counter() - t0:.1f} s")
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
    try:
        for p in paths:
            sync(p)
    except SyncError as err:
        sys.exit(f"nbsync: {err}")
