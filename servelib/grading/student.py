"""Student versions of chapter notebooks: each solution replaced by a placeholder.

In a chapter notebook a solution sits between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` (nbgrader's markers) and is followed by ``check("kv-3", answer)``.
The student version keeps the check line and puts ``answer = ...  # your answer here``
where the solution was. Nothing of the solution survives: outputs, execution counts,
attachments of solution cells, widget state and every metadata key other than the
kernelspec, the language name and the cells' tags are dropped.
"""
from __future__ import annotations

import pathlib
import re

import nbformat
from nbformat import NotebookNode

from .registry import ID_PATTERN

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


def student_notebook(nb: NotebookNode) -> NotebookNode:
    """A new nbformat-4 notebook: ``nb`` without solutions, outputs or metadata (see module doc)."""
    student = nbformat.v4.new_notebook()
    if "kernelspec" in nb.metadata:
        student.metadata["kernelspec"] = dict(nb.metadata["kernelspec"])
    if "name" in nb.metadata.get("language_info", {}):
        student.metadata["language_info"] = {"name": nb.metadata["language_info"]["name"]}
    new_cell = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
                "raw": nbformat.v4.new_raw_cell}
    for n, cell in enumerate(nb.cells):
        has_solution = BEGIN in cell.source or END in cell.source
        try:
            source = strip_solutions(cell.source, cell.cell_type) if has_solution else cell.source
        except ValueError as err:
            raise ValueError(f"cell {n}: {err}") from None
        tags = list(cell.metadata.get("tags", []))
        if has_solution:
            tags = [t for t in tags if t not in _HIDING_TAGS]
        fresh = new_cell[cell.cell_type](source, metadata={"tags": tags} if tags else {})
        if "id" in cell:
            fresh["id"] = cell["id"]
        if cell.cell_type == "markdown" and cell.get("attachments") and not has_solution:
            fresh["attachments"] = cell["attachments"]  # figures of the statement, not of a solution
        student.cells.append(fresh)
    nbformat.validate(student)
    return student


def write_student_versions(src: pathlib.Path | str, out_dir: pathlib.Path | str) -> list[pathlib.Path]:
    """Write the student version of ``src`` (a notebook, or every ``*.ipynb`` in a folder) into ``out_dir``.

    File names are kept. Returns the paths written. Raises ValueError when ``out_dir`` would
    overwrite a source notebook, when there is no notebook to convert, or (naming the file
    and cell) when a notebook's solution markers do not pair up; nothing is written then.
    """
    src, out_dir = pathlib.Path(src), pathlib.Path(out_dir)
    sources = [src] if src.is_file() else sorted(p for p in src.glob("*.ipynb") if not p.name.startswith("."))
    if not sources:
        raise ValueError(f"no notebook (*.ipynb) found in {src}")
    if any((out_dir / p.name).resolve() == p.resolve() for p in sources):
        raise ValueError(f"output folder {out_dir} would overwrite the source notebooks: choose another")
    students = []
    for path in sources:  # convert them all before writing any
        try:
            students.append(student_notebook(nbformat.read(path, as_version=4)))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, student in zip(sources, students):
        nbformat.write(student, out_dir / path.name)
    return [out_dir / p.name for p in sources]
