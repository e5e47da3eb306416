"""A class: its roster (who the students are) and the instructor's secret (their variants).

The roster is a CSV file with a header. Its ``id`` column is required: the id that names
each student's folder of submissions (or starts their file names) and seeds their
variants. Optional columns are carried into the gradebook: ``name``, ``canvas_id``,
``sis_user_id``, ``sis_login_id`` and ``section`` (Canvas's own column names, such as
``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID`` and ``Section``, are understood too,
so a roster can be Canvas's exported gradebook with an ``id`` column added).
"""
from __future__ import annotations

import csv
import pathlib
import re
from dataclasses import dataclass

from . import variants
from .registry import Exercise

#: What a student id may look like: it becomes a folder name.
STUDENT_ID = r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}"
#: Shortest secret accepted, in bytes.
MIN_SECRET_BYTES = 16
_ALIASES = {"id": "id", "student_id": "id",
            "name": "name", "student": "name",
            "canvas_id": "canvas_id",
            "sis_user_id": "sis_user_id", "sis user id": "sis_user_id",
            "sis_login_id": "sis_login_id", "sis login id": "sis_login_id",
            "section": "section"}


@dataclass(frozen=True)
class Student:
    """One row of the roster (every field but ``id`` may be empty)."""

    id: str
    name: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


def read_roster(path) -> list[Student]:
    """The students of the roster CSV at ``path``, in its order.

    Raises ValueError naming the file and the line for a missing ``id`` column, an empty,
    malformed (see :data:`STUDENT_ID`) or repeated id, or an empty roster.
    """
    path = pathlib.Path(path)
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        fields = {f: _ALIASES.get(f.strip().lower()) for f in reader.fieldnames or []}
        if "id" not in fields.values():
            raise ValueError(f"{path}: the roster needs an 'id' column (found: {reader.fieldnames})")
        students, seen = [], set()
        for n, row in enumerate(reader, start=2):
            data = {fields[k]: (v or "").strip() for k, v in row.items() if k in fields and fields[k]}
            sid = data.get("id", "")
            if not re.fullmatch(STUDENT_ID, sid):
                raise ValueError(f"{path}, line {n}: student id {sid!r} must be letters, digits and . _ @ + - "
                                 f"(it names a folder)")
            if sid in seen:
                raise ValueError(f"{path}, line {n}: student id {sid!r} appears twice")
            seen.add(sid)
            students.append(Student(**data))
    if not students:
        raise ValueError(f"{path}: the roster lists no student")
    return students


def read_secret(path) -> bytes:
    """The instructor's secret: the file's bytes without surrounding white space.

    Raises ValueError if it is shorter than :data:`MIN_SECRET_BYTES` bytes (make one with
    ``python -c "import secrets; print(secrets.token_hex(32))" > secret.txt``; keep it out of
    the course's repository: whoever holds it can work out every student's variant).
    """
    secret = pathlib.Path(path).read_bytes().strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"{path}: the secret must be at least {MIN_SECRET_BYTES} bytes; make one with "
                         f"python -c \"import secrets; print(secrets.token_hex(32))\" > {path}")
    return secret


@dataclass(frozen=True)
class Course:
    """Who is graded and on which variants: a roster and a secret, or neither (self-study).

    Without a roster every submission is graded on the book's own variant and its student is
    the name of its folder (or its file name without the extension).
    """

    roster: tuple[Student, ...] = ()
    secret: bytes = b""

    def __post_init__(self):
        if bool(self.roster) != bool(self.secret):
            raise ValueError("a roster and a secret go together: give both (variants) or neither")

    @classmethod
    def from_files(cls, roster_path=None, secret_path=None) -> "Course":
        """The course of a roster CSV and a secret file (both None: self-study)."""
        if (roster_path is None) != (secret_path is None):
            raise ValueError("--roster and --secret-file go together: give both or neither")
        if roster_path is None:
            return cls()
        return cls(tuple(read_roster(roster_path)), read_secret(secret_path))

    @property
    def ids(self) -> list[str]:
        """The student ids on the roster, in its order ([] without a roster)."""
        return [s.id for s in self.roster]

    def student_of(self, submission: str) -> str:
        """The student a submission path (relative to the class folder) belongs to.

        Its top-level folder; for a file at the top, the longest roster id that starts its
        name followed by a separator (``alice_03_kv_cache.ipynb``), else the file name
        without its extension.
        """
        parts = pathlib.PurePosixPath(submission).parts
        if len(parts) > 1:
            return parts[0]
        stem = pathlib.PurePosixPath(parts[0]).stem
        hits = [i for i in self.ids if stem == i or (stem.startswith(i) and not stem[len(i)].isalnum())]
        return max(hits, key=len) if hits else stem

    def on_roster(self, student: str) -> bool:
        """True if ``student`` is on the roster (every student is, without one)."""
        return not self.roster or student in self.ids

    def inputs(self, student: str, ex: Exercise) -> dict:
        """The varying inputs of ``student``'s variant of ``ex`` ({} for the book's own)."""
        if not self.roster or student not in self.ids:
            return {}
        return variants.draw(ex, student, self.secret)
