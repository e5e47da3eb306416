"""Student versions of chapter notebooks: each solution replaced by a placeholder.

In a chapter notebook a solution sits between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` (nbgrader's markers) and is followed by ``check("kv-3", answer)``.
The student version keeps the check line and puts ``answer = ...  # your answer here``
where the solution was. Nothing of the solution survives: outputs, execution counts,
attachments of solution cells, widget state and every metadata key other than the
kernelspec, the language name and the cells' tags are dropped.

With a class (:class:`~servelib.grading.roster.Course`: a roster and the instructor's
secret) each student gets their own set, in which every exercise's statement and ``check``
call show that student's variant (:mod:`servelib.grading.variants`), and the notebook's
metadata names the student.
"""
from __future__ import annotations

import pathlib
import re

import nbformat
from nbformat import NotebookNode

from . import variants
from .registry import ID_PATTERN, REGISTRY
from .roster import Course

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
#: ``check("kv-3", answer)``: group 1 is the id, group 2 the answer expression.
CHECK_CALL = re.compile(r"""check\(\s*["'](""" + ID_PATTERN + r""")["']\s*,\s*(.*?)\s*\)""")
# Tags that hide a cell in the book; a student must see the cell they answer in.
_HIDING_TAGS = {"hide-input", "hide-output", "hide-cell", "remove-input", "remove-output", "remove-cell"}


def _placeholder(indent: str, after: list[str], cell_type: str) -> str:
    if cell_type != "code":
        return f"{indent}_Your answer here._"
    for line in after:
        m = CHECK_CALL.search(line)
        if m and m.group(2).isidentifier():
            return f"{indent}{m.group(2)} = ...  # your answer here"
    return f"{indent}...  # your code here"


def strip_solutions(source: str, cell_type: str = "code") -> str:
    """``source`` with every BEGIN/END SOLUTION block (markers included) replaced by a placeholder.

    The placeholder assigns ``...`` to the variable that the following ``check(...)`` call
    grades (``answer = ...  # your answer here``), so the cell runs and records "not
    attempted". Raises ValueError for an unmatched or nested marker, rather than risk
    leaving part of a solution behind.
    """
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(END):
            raise ValueError(f"{END!r} without {BEGIN!r} before it (line {i + 1})")
        if not line.strip().startswith(BEGIN):
            out.append(line)
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(END):
            if lines[j].strip().startswith(BEGIN):
                raise ValueError(f"nested {BEGIN!r} (line {j + 1})")
            j += 1
        if j == len(lines):
            raise ValueError(f"{BEGIN!r} without {END!r} after it (line {i + 1})")
        indent = line[: len(line) - len(line.lstrip())]
        out.append(_placeholder(indent, lines[j + 1:], cell_type))
        i = j + 1
    return "\n".join(out)


def _variant_of(source: str, cell_type: str, inputs: dict) -> str:
    """``source`` with each exercise statement and ``check`` call showing the variant ``inputs``
    (``{exercise id: {input: value}}``)."""
    if cell_type == "markdown":
        for ex_id, given in inputs.items():
            start = variants.statement_start(source, ex_id)
            if start is not None and given:
                source = source[:start] + variants.wrap(variants.render(REGISTRY[ex_id], given))
        return source

    def call(m):
        given = inputs.get(m.group(1))
        if not given:
            return m.group(0)
        if not m.group(2).isidentifier():
            raise ValueError(f"cannot show a variant in {m.group(0)!r}: check's answer must be a plain name")
        return variants.check_call(m.group(1), m.group(2), given)

    return CHECK_CALL.sub(call, source) if cell_type == "code" else source


def student_notebook(nb: NotebookNode, student: str | None = None, course: Course = Course()) -> NotebookNode:
    """A new nbformat-4 notebook: ``nb`` without solutions, outputs or metadata (see module doc).

    With ``student`` and a ``course`` that has a roster, the statements and ``check`` calls
    show that student's variants, and the metadata holds ``{"servelib": {"student": id}}``.
    """
    ids = {m.group(1) for c in nb.cells if c.cell_type == "code" for m in CHECK_CALL.finditer(c.source)}
    inputs = ({i: course.inputs(student, REGISTRY[i]) for i in ids if i in REGISTRY}
              if student is not None and course.roster else {})
    out = nbformat.v4.new_notebook()
    if "kernelspec" in nb.metadata:
        out.metadata["kernelspec"] = dict(nb.metadata["kernelspec"])
    if "name" in nb.metadata.get("language_info", {}):
        out.metadata["language_info"] = {"name": nb.metadata["language_info"]["name"]}
    new_cell = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
                "raw": nbformat.v4.new_raw_cell}
    for n, cell in enumerate(nb.cells):
        has_solution = BEGIN in cell.source or END in cell.source
        try:
            source = strip_solutions(cell.source, cell.cell_type) if has_solution else cell.source
        except ValueError as err:
            raise ValueError(f"cell {n}: {err}") from None
        if inputs:
            source = _variant_of(source, cell.cell_type, inputs)
        tags = list(cell.metadata.get("tags", []))
        if has_solution:
            tags = [t for t in tags if t not in _HIDING_TAGS]
        fresh = new_cell[cell.cell_type](source, metadata={"tags": tags} if tags else {})
        if "id" in cell:
            fresh["id"] = cell["id"]
        if cell.cell_type == "markdown" and cell.get("attachments") and not has_solution:
            fresh["attachments"] = cell["attachments"]  # figures of the statement, not of a solution
        out.cells.append(fresh)
    if inputs:
        out.metadata["servelib"] = {"student": student}
    nbformat.validate(out)
    return out


def write_student_versions(src: pathlib.Path | str, out_dir: pathlib.Path | str,
                           course: Course = Course()) -> list[pathlib.Path]:
    """Write the student version of ``src`` (a notebook, or every ``*.ipynb`` in a folder) into ``out_dir``.

    File names are kept. With a ``course`` that has a roster, each student's set goes into
    ``out_dir/<student id>/`` and shows that student's variants. Returns the paths written.
    Raises ValueError when ``out_dir`` would overwrite a source notebook, when there is no
    notebook to convert, or (naming the file and cell) when a notebook's solution markers
    do not pair up; nothing is written then.
    """
    src, out_dir = pathlib.Path(src), pathlib.Path(out_dir)
    sources = [src] if src.is_file() else sorted(p for p in src.glob("*.ipynb") if not p.name.startswith("."))
    if not sources:
        raise ValueError(f"no notebook (*.ipynb) found in {src}")
    folders = [out_dir / s.id for s in course.roster] if course.roster else [out_dir]
    if any((f / p.name).resolve() == p.resolve() for f in folders for p in sources):
        raise ValueError(f"output folder {out_dir} would overwrite the source notebooks: choose another")
    notebooks = []
    for path in sources:  # convert them all before writing any
        try:
            nb = nbformat.read(path, as_version=4)
            if course.roster:
                notebooks += [(out_dir / s.id / path.name, student_notebook(nb, s.id, course)) for s in course.roster]
            else:
                notebooks.append((out_dir / path.name, student_notebook(nb)))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    for path, nb in notebooks:
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return [path for path, _ in notebooks]
