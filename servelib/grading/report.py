"""What instructors and students receive, from one or more long CSVs (shards) of the grader.

* ``gradebook.csv``: one row per student, one column per chapter (points) and ``Total``,
  in the shape of Canvas's gradebook import (see :data:`GRADEBOOK_IDENTITY`);
* ``flags.csv``: one row per integrity flag (:data:`servelib.grading.integrity.FLAGS`),
  those found in each submission plus ``same-answers`` across the whole class;
* ``feedback/<student>.md``: per student, each exercise with its points, the student's
  answer and the feedback ``check`` would print, without the reference unless asked.
"""
from __future__ import annotations

import csv
import json
import os
import pathlib
import tempfile
from collections import defaultdict

from .grade import CSV_HEADER
from .integrity import FLAGS, same_answers
from .roster import Student

#: The identity columns of Canvas's gradebook import, in its export's order. Canvas needs
#: one of Student (the name), ID or SIS User ID to find the student, plus SIS Login ID and
#: Section; every other column is an assignment.
GRADEBOOK_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
FLAGS_HEADER = ("submission", "student", "flag", "detail", "meaning")


def read_long_csvs(paths) -> list[dict]:
    """The rows of the grader's long CSVs ``paths`` (shards in any order), as dicts.

    Raises ValueError for a file whose header is not the grader's.
    """
    rows = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if tuple(reader.fieldnames or ()) != CSV_HEADER:
                raise ValueError(f"{path}: not a CSV of the grader (header {reader.fieldnames})")
            rows += list(reader)
    return rows


def _by_submission(rows):
    subs = defaultdict(list)
    for r in rows:
        subs[r["submission"]].append(r)
    return subs


def _chapter_points(rows) -> tuple[dict, dict]:
    """({student: {chapter: best points}}, {chapter: max points}); a student's best submission counts."""
    points, maximum = defaultdict(dict), {}
    for sub, sub_rows in _by_submission(rows).items():
        chapter = sub_rows[0]["chapter"]
        if not chapter:
            continue
        got = sum(int(r["points"]) for r in sub_rows)
        maximum[chapter] = max(maximum.get(chapter, 0), sum(int(r["max_points"]) for r in sub_rows))
        student = sub_rows[0]["student"]
        points[student][chapter] = max(points[student].get(chapter, 0), got)
    return points, maximum


def _points(x: float) -> str:
    return f"{x:g}"


def gradebook(rows: list[dict], roster=()) -> list[list[str]]:
    """The gradebook as a table (header first): :data:`GRADEBOOK_IDENTITY`, one column per
    chapter (sorted), ``Total``. With a roster its students come first, in its order, each
    with the identity it gives (a student without a submission scores 0); students not on
    it follow, by id."""
    points, maximum = _chapter_points(rows)
    chapters = sorted(maximum)
    students = list(roster) + [Student(s) for s in sorted(points) if s not in {r.id for r in roster}]
    table = [[*GRADEBOOK_IDENTITY, *chapters, "Total"]]
    for s in students:
        got = [points.get(s.id, {}).get(c, 0) for c in chapters]
        table.append([s.name or s.id, s.canvas_id, s.sis_user_id, s.sis_login_id, s.section,
                      *map(_points, got), _points(sum(got))])
    return table


def flag_rows(rows: list[dict]) -> list[list[str]]:
    """Every flag of the class as rows of :data:`FLAGS_HEADER` (header first)."""
    found = []
    for sub, sub_rows in _by_submission(rows).items():
        student = sub_rows[0]["student"]
        for item in filter(None, sub_rows[0]["flags"].split("; ")):
            flag, _, detail = item.partition(": ")
            found.append([sub, student, flag, detail, FLAGS.get(flag, "")])
    students = {sub: r[0]["student"] for sub, r in _by_submission(rows).items()}
    for sub, flags in same_answers(rows).items():
        for flag, detail in flags:
            found.append([sub, students[sub], flag, detail, FLAGS[flag]])
    return [list(FLAGS_HEADER), *sorted(found)]


def _cell(text) -> str:
    """Text for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ") or " "


def feedback(student: str, rows: list[dict], *, show_reference: bool = False) -> str:
    """The Markdown feedback of ``student`` from their rows of the long CSV."""
    lines = [f"# Feedback for {student}", ""]
    subs = _by_submission(rows)
    if not subs:
        return "\n".join(lines + ["No submission was received.", ""])
    total = sum(int(r["points"]) for r in rows)
    out_of = sum(int(r["max_points"]) for r in rows)
    lines += [f"{_points(total)} of {_points(out_of)} points over {len(subs)} notebook(s).", ""]
    for sub, sub_rows in sorted(subs.items()):
        head = sub_rows[0]
        got = sum(int(r["points"]) for r in sub_rows)
        most = sum(int(r["max_points"]) for r in sub_rows)
        lines += [f"## {head['chapter'] or 'unknown chapter'} (`{sub}`): {_points(got)} of {_points(most)} points",
                  ""]
        if head["exercise"] == "?":
            lines += [f"This file could not be graded: {head['message']}", ""]
            continue
        cols = ["exercise", "points", "your answer", "feedback"] + (["answer"] if show_reference else [])
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in sub_rows:
            message = r["message"] if r["status"] != "unreadable" else "the notebook could not be read"
            cells = [r["exercise"], f"{r['points']}/{r['max_points']}", r["answer"], message]
            lines.append("| " + " | ".join(map(_cell, cells + ([r["reference"]] if show_reference else []))) + " |")
        variant = [f"{r['exercise']}: " + ", ".join(f"{k}={v}" for k, v in json.loads(r["inputs"]).items())
                   for r in sub_rows if r["inputs"]]
        if variant:
            lines += ["", "Your inputs: " + "; ".join(variant) + "."]
        lines.append("")
    return "\n".join(lines)


def _write(path: pathlib.Path, write) -> None:
    """Create ``path`` through a temporary file beside it (a link at ``path`` is replaced)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def write_report(csv_paths, out_dir, *, roster=(), show_reference: bool = False) -> list[pathlib.Path]:
    """Write ``gradebook.csv``, ``flags.csv`` and ``feedback/<student>.md`` into ``out_dir``
    from the long CSVs ``csv_paths``; returns the paths written. Raises ValueError for a
    CSV that is not the grader's."""
    rows = read_long_csvs(csv_paths)
    out_dir = pathlib.Path(out_dir)
    (out_dir / "feedback").mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in (("gradebook.csv", gradebook(rows, roster)), ("flags.csv", flag_rows(rows))):
        _write(out_dir / name, lambda fh, t=table: csv.writer(fh).writerows(t))
        written.append(out_dir / name)
    by_student = defaultdict(list)
    for r in rows:
        by_student[r["student"]].append(r)
    for student in dict.fromkeys([s.id for s in roster] + sorted(by_student)):
        path = out_dir / "feedback" / f"{student}.md"
        text = feedback(student, by_student.get(student, []), show_reference=show_reference)
        _write(path, lambda fh, t=text: fh.write(t))
        written.append(path)
    return written
