"""The autograder: run each submission in a fresh, limited kernel; grade its answers here.

A *submission* is a file directly in the submissions folder, or a notebook inside one of its
sub-folders (one folder per student; the folder is the notebook's working directory, so
data files beside it are available). Grading one goes in three steps.

1. **Before any kernel runs**, the grader reads the submission, matches it to a chapter,
   works out its student and their variant of every exercise (:class:`~.roster.Course`),
   and computes the references in its own process.
2. A worker process copies the submission (its sub-folder, or the file alone) into a new
   temporary folder and runs it top to bottom in a fresh ``python3`` kernel with nbclient
   (``allow_errors``: a cell that raises does not stop the exercises after it), under
   :class:`Limits`: a memory cap, a CPU-time cap and a cap on the size of files written
   (resource limits the kernel inherits), its environment reduced to ``PATH`` and a fresh,
   empty ``HOME`` and ``TMPDIR`` (no variable of the instructor's), every cell output
   dropped except errors, and one deadline for the whole notebook, after which every
   process the submission started is killed (the worker adopts orphans, so a process that
   left its session is still found).
3. :func:`~servelib.grading.check` in the kernel only appends the *answers* it was given
   to a file; the grader reads them back and compares them with its own references. A
   submission that writes "passed" into that file, replaces ``check`` or patches the
   comparison changes nothing but its own kernel. The CSV is written by the grader alone,
   after every kernel has ended.

What this does not stop (no network isolation, the kernel runs as the grader's user) is
stated on the book's instructor page, with the command to run the grader in a container.
"""
from __future__ import annotations

import concurrent.futures
import csv
import ctypes
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets.config import Config

from .check import ERROR, NOT_ATTEMPTED, PASSED, RESULTS_ENV, WRONG, Unusable, compare, decode_answer
from .integrity import source_flags
from .registry import ID_PATTERN, REGISTRY
from .roster import Course
from .student import BEGIN, strip_solutions
from .variants import inputs_for, normalise

TIMEOUT, UNREADABLE = "timeout", "unreadable"
#: Every status a CSV row can carry.
STATUSES = (PASSED, WRONG, NOT_ATTEMPTED, ERROR, TIMEOUT, UNREADABLE)
#: The long CSV: one row per submission and exercise. The first five columns are those of
#: earlier versions; ``flags`` repeats the submission's integrity flags on each of its rows.
CSV_HEADER = ("submission", "exercise", "points", "max_points", "status",
              "student", "chapter", "answer", "reference", "message", "inputs", "flags")
#: The ``exercise`` of the single row written for a submission whose chapter is unknown.
UNKNOWN_EXERCISE = "?"
# check("kv-3", ...) in a cell's source, or in a notebook's raw JSON text (quotes escaped).
_CHECK_ID = re.compile(r"""check\(\s*\\?["'](""" + ID_PATTERN + r""")\\?["']""")
# Extra seconds the worker may take beyond the notebook's deadline (kernel start, shut-down)
# before it is killed from outside.
_WORKER_GRACE_S = 90
# Most bytes of answers read back from a kernel (check writes one short line per call).
_MAX_RESULTS_BYTES = 8 * 2**20
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Limits:
    """What one submission's processes may use; 0 turns a limit off.

    ``memory_bytes``: data segment of each process (``RLIMIT_DATA``: heap and private
    mappings, what Python and torch allocate; address space merely reserved, as a CUDA
    context does, is not counted). ``cpu_s``: CPU seconds of each process
    (``RLIMIT_CPU``; all threads together). ``output_bytes``: largest file a process may
    write (``RLIMIT_FSIZE``); cell outputs other than errors are dropped, so they cannot
    fill the grader's memory either.
    """

    memory_bytes: int = 4 * 2**30
    cpu_s: float = 600
    output_bytes: int = 64 * 2**20

    def __post_init__(self):
        for name in ("memory_bytes", "cpu_s", "output_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a number >= 0 (0: no limit), got {value!r}")

    def apply(self) -> None:
        """Set these limits on the calling process (and so on everything it starts). POSIX only."""
        import resource
        caps = [(resource.RLIMIT_CORE, 0, 0)]
        if self.memory_bytes:
            caps.append((resource.RLIMIT_DATA, int(self.memory_bytes), int(self.memory_bytes)))
        if self.cpu_s:  # the soft limit sends SIGXCPU; the hard one kills what ignores it
            caps.append((resource.RLIMIT_CPU, math.ceil(self.cpu_s), math.ceil(self.cpu_s) + 5))
        if self.output_bytes:
            caps.append((resource.RLIMIT_FSIZE, int(self.output_bytes), int(self.output_bytes)))
        for kind, soft, hard in caps:
            ceiling = resource.getrlimit(kind)[1]
            if ceiling != resource.RLIM_INFINITY:
                soft, hard = min(soft, ceiling), min(hard, ceiling)
            resource.setrlimit(kind, (soft, hard))


@dataclass(frozen=True)
class Chapter:
    """A reference notebook: its file stem (``03_kv_cache``), its exercise ids in order, and
    its code cells as handed out (white space normalised), which integrity checks trust."""

    name: str
    exercises: tuple[str, ...]
    cells: frozenset = frozenset()


def load_chapters(paths) -> list[Chapter]:
    """The chapters of the reference notebooks ``paths`` (files, or folders of ``[0-9]*.ipynb``).

    A chapter's exercises are the ids of the ``check(...)`` calls in its solution cells.
    Raises ValueError when no reference notebook with exercises is found or an id is not
    registered in :data:`servelib.grading.REGISTRY`.
    """
    files = []
    for p in map(pathlib.Path, paths):
        files += sorted(p.glob("[0-9]*.ipynb")) if p.is_dir() else [p]
    chapters = []
    for f in files:
        nb = nbformat.read(f, as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        ids = [m for src in code if BEGIN in src for m in _CHECK_ID.findall(src)]
        unknown = [i for i in ids if i not in REGISTRY]
        if unknown:
            raise ValueError(f"{f}: exercise ids not registered in servelib.grading: {unknown}")
        if ids:
            handed_out = [strip_solutions(src) if BEGIN in src else src for src in code]
            chapters.append(Chapter(f.stem, tuple(dict.fromkeys(ids)),
                                    frozenset(map(normalise, code + handed_out))))
    if not chapters:
        raise ValueError(f"no reference notebook with exercises in {[str(p) for p in paths]}")
    return chapters


def find_submissions(root: pathlib.Path) -> list[str]:
    """Submission paths relative to ``root`` (posix, sorted): each top-level file, and each
    notebook in a top-level folder (a folder without one is itself a submission, unreadable).
    Hidden files and folders and ``.ipynb_checkpoints`` are skipped."""
    subs = []
    for entry in root.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_file():
            subs.append(entry.name)
        elif entry.is_dir():
            found = [p.relative_to(root).as_posix() for p in entry.rglob("*.ipynb")
                     if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)]
            subs += found or [entry.name]
    return sorted(subs)


def shard(items: list, k: int, n: int) -> list:
    """Shard ``k`` of ``n`` (1 <= k <= n) of ``items``: every n-th item starting at the k-th.

    Deterministic for a given order; the ``n`` shards are disjoint and together hold every
    item exactly once. Raises ValueError for k outside [1, n].
    """
    if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
        raise ValueError(f"shard must be K/N with 1 <= K <= N, got {k}/{n}")
    return items[k - 1::n]


def _normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _number(name: str) -> int | None:
    """The number a name starts with (``3`` for ``03_kv_cache`` or ``3_kv``), or None."""
    m = re.match(r"\d+", name)
    return int(m.group()) if m else None


def match_chapter(raw_text: str, filename: str, chapters: list[Chapter]) -> Chapter | None:
    """The chapter a submission belongs to, or None.

    First by the exercise ids its text mentions (most in common wins), then by file name
    (the chapter's stem, its number ``03``, or its topic ``kv_cache`` in the name), and, when
    there is only one chapter, that one.
    """
    ids = set(_CHECK_ID.findall(raw_text))
    overlap = max(chapters, key=lambda c: len(ids & set(c.exercises)))
    if ids & set(overlap.exercises):
        return overlap
    stem = _normalise(pathlib.PurePosixPath(filename).stem)
    for test in (lambda c: _normalise(c.name) in stem,
                 lambda c: _number(stem) is not None and _number(c.name) == _number(stem),
                 lambda c: _normalise(c.name.lstrip("0123456789_")) in stem):
        hits = [c for c in chapters if test(c)]
        if len(hits) == 1:
            return hits[0]
    return chapters[0] if len(chapters) == 1 else None


def _csv_text(value) -> str:
    """An answer or a reference as the CSV shows it ('' for none)."""
    if value is ... or value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, Unusable):
        return f"<{value.type_name}> {value.text}"
    return str(value)


@dataclass
class Result:
    """The grading of one submission: per exercise (in the chapter's order) its status, the
    answer given, the reference, the message a learner sees and the variant's inputs."""

    submission: str
    chapter: Chapter | None
    status: dict[str, str]
    seconds: float = 0.0
    note: str = ""
    student: str = ""
    answers: dict = field(default_factory=dict)
    references: dict = field(default_factory=dict)
    messages: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    flags: list = field(default_factory=list)

    def rows(self) -> list[tuple]:
        """CSV rows in the order of :data:`CSV_HEADER`."""
        flags = "; ".join(f"{f}: {d}".replace(";", ",") for f, d in self.flags)
        chapter = self.chapter.name if self.chapter else ""
        if self.chapter is None:
            return [(self.submission, UNKNOWN_EXERCISE, 0, 0, self.status[UNKNOWN_EXERCISE], self.student,
                     chapter, "", "", self.note, "", flags)]
        rows = []
        for ex, st in self.status.items():
            inputs = json.dumps(self.inputs.get(ex) or {}, sort_keys=True) if self.inputs.get(ex) else ""
            rows.append((self.submission, ex, REGISTRY[ex].points if st == PASSED else 0, REGISTRY[ex].points,
                         st, self.student, chapter, _csv_text(self.answers.get(ex)),
                         _csv_text(self.references.get(ex)), self.messages.get(ex, ""), inputs, flags))
        return rows


@dataclass
class _Plan:
    """What the grader knows of a submission before its kernel runs."""

    rel: str
    raw: str
    problem: str
    chapter: Chapter | None
    student: str
    inputs: dict
    references: dict      # exercise -> reference value, or the exception computing it raised
    digest: str
    flags: list


def _read(path: pathlib.Path) -> tuple[str, str]:
    """(raw text, '' if it is a readable notebook else why not)."""
    if path.is_dir():
        return "", "a folder without a notebook"
    raw = path.read_bytes().decode("utf-8", errors="replace")
    try:
        json.loads(raw)
    except ValueError as err:
        return raw, (f"invalid JSON ({err})") if path.suffix == ".ipynb" else f"not a notebook ({path.name})"
    try:
        nbformat.reads(raw, as_version=4)
    except Exception as err:  # nbformat raises several kinds for JSON that is not a notebook
        return raw, f"not a notebook: {str(err).splitlines()[0][:120]}"
    return raw, ""


def _digest(path: pathlib.Path) -> str:
    """SHA-256 over a file, or over every file of a folder (names and contents), links skipped."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    for f in files:
        h.update(f.relative_to(path.parent).as_posix().encode() + b"\0")
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"<unreadable>")
    return h.hexdigest()


class _References:
    """References computed in the grader's process, once per exercise and variant (an
    exception the reference raised is kept in place of the value)."""

    def __init__(self):
        self._cache = {}

    def get(self, ex_id: str, given: dict):
        key = (ex_id, tuple(sorted(given.items())))
        if key not in self._cache:
            ex = REGISTRY[ex_id]
            try:
                self._cache[key] = ex.reference(**inputs_for(ex, given))
            except Exception as err:  # a defect of the book: the rows say so, grading goes on
                self._cache[key] = err
        return self._cache[key]


#: The book's own answers, for the book-answer flag.
_BOOK = _References()


def prepare(root: pathlib.Path, rel: str, chapters: list[Chapter], course: Course,
            references: _References | None = None) -> _Plan:
    """Read submission ``rel`` and work out its chapter, student, variant and references."""
    references = references or _References()
    path = root / rel
    student = course.student_of(rel)
    flags = [] if course.on_roster(student) else [("not-on-roster", f"{student!r} is not on the roster")]
    try:
        raw, problem = _read(path)
        digest = _digest(path)
    except OSError as err:
        raw, problem, digest = "", f"the grader could not read it: {err}", ""
    chapter = match_chapter(raw, rel, chapters)
    inputs, refs = {}, {}
    if chapter and not problem:
        for ex in chapter.exercises:
            inputs[ex] = course.inputs(student, REGISTRY[ex])
            refs[ex] = references.get(ex, inputs[ex])
    return _Plan(rel, raw, problem, chapter, student, inputs, refs, digest, flags)


def grade_submission(root: pathlib.Path, rel: str, chapters: list[Chapter], timeout_s: float,
                     course: Course = Course(), limits: Limits = Limits(), plan: _Plan | None = None) -> Result:
    """Grade the submission ``root / rel`` (see the module doc). Never raises for a broken submission:
    what the grader itself cannot do (an unreadable file, a folder it may not copy) becomes
    the submission's rows, with status error and a note."""
    t0 = time.perf_counter()
    try:
        plan = plan or prepare(root, rel, chapters, course)
        return _grade(root, plan, timeout_s, limits, t0)
    except Exception as err:
        chapter = match_chapter("", rel, chapters)
        status = {ex: ERROR for ex in (chapter.exercises if chapter else (UNKNOWN_EXERCISE,))}
        return Result(rel, chapter, status, time.perf_counter() - t0,
                      f"the grader could not process it: {type(err).__name__}: {err}",
                      student=course.student_of(rel))


def _grade(root, plan: _Plan, timeout_s, limits, t0) -> Result:
    rel, chapter = plan.rel, plan.chapter
    exercises = chapter.exercises if chapter else (UNKNOWN_EXERCISE,)
    if plan.problem or chapter is None:
        note = plan.problem or "no exercise of any reference chapter found; name the file after its chapter"
        return Result(rel, chapter, {ex: UNREADABLE for ex in exercises}, time.perf_counter() - t0, note,
                      student=plan.student, flags=plan.flags)
    flags = list(plan.flags)
    if _digest(root / rel) != plan.digest:
        flags.append(("changed-during-grading", "its files changed after grading began"))
    nb = nbformat.reads(plan.raw, as_version=4)
    flags += source_flags([c.source for c in nb.cells if c.cell_type == "code"], chapter.cells)
    meant_for = nb.metadata.get("servelib", {}).get("student") if isinstance(nb.metadata.get("servelib"), dict) else None
    if meant_for is not None and meant_for != plan.student:
        flags.append(("wrong-student", f"written for {str(meant_for)[:60]!r}"))
    with tempfile.TemporaryDirectory(prefix="servelib-grade-", ignore_cleanup_errors=True) as tmp:
        tmp = pathlib.Path(tmp)
        work = tmp / "work"
        parts = pathlib.PurePosixPath(rel).parts
        if len(parts) > 1:  # the student's own folder, without symbolic links out of it
            shutil.copytree(root / parts[0], work, ignore=lambda d, names: [
                n for n in names if os.path.islink(os.path.join(d, n))])
            notebook = work.joinpath(*parts[1:])
        else:
            work.mkdir()
            notebook = work / rel
        notebook.write_text(plan.raw, encoding="utf-8")  # the notebook as read before any kernel ran
        outcome = _run_worker(notebook, tmp, timeout_s, limits)
        records = _read_records(tmp / "results.jsonl")
    result = Result(rel, chapter, {}, 0.0, outcome["note"], student=plan.student,
                    inputs=plan.inputs, references=plan.references, flags=flags)
    present = set(_CHECK_ID.findall(plan.raw))
    for ex in exercises:
        record = records.get(ex)
        if record is not None:
            result.answers[ex] = decode_answer(record.get("answer"))
        result.status[ex], result.messages[ex] = _status(ex, result.answers.get(ex, None), record is not None,
                                                         plan, present, outcome)
    result.flags += _answer_flags(plan, records, result)
    result.references = {ex: r for ex, r in plan.references.items() if not isinstance(r, Exception)}
    result.seconds = time.perf_counter() - t0
    return result


def _status(ex, answer, answered: bool, plan, present, outcome) -> tuple[str, str]:
    """(status, message) of exercise ``ex`` from its last recorded answer (or its absence)."""
    if answered:
        if answer is ...:
            return NOT_ATTEMPTED, "not attempted"
        ref = plan.references[ex]
        if isinstance(ref, Exception):
            return ERROR, (f"the reference could not be computed ({type(ref).__name__}: {ref}); "
                           f"a defect of the book, not of the submission")
        ok, message = compare(REGISTRY[ex], ref, answer)
        return (PASSED, "correct") if ok else (WRONG, message)
    if ex not in present:
        return NOT_ATTEMPTED, "no check of this exercise in the notebook"
    if ex in outcome["raised"]:
        return ERROR, "its cell raised an error before the check ran"
    if outcome["timed_out"]:
        return TIMEOUT, "the notebook hit the time limit before this check ran"
    if outcome["crashed"]:  # the kernel died, or nbclient could not run the notebook
        return ERROR, "the kernel died before this check ran"
    return NOT_ATTEMPTED, "its check never ran"  # commented out, in a branch not taken, another id


def _plain(value):
    """Recorded inputs as comparable values (JSON turns tuples into lists)."""
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _answer_flags(plan: _Plan, records: dict, result: Result) -> list[tuple[str, str]]:
    """``other-inputs`` and ``book-answer`` flags of a graded submission."""
    other, book = [], []
    for ex, record in records.items():
        if ex not in plan.inputs:
            continue
        given = _plain(record.get("inputs") or {})
        if given != plan.inputs[ex]:
            other.append(f"{ex} {json.dumps(given, default=str)[:80]}")
        answer, ref = result.answers.get(ex), plan.references.get(ex)
        book_ref = _BOOK.get(ex, {})
        if plan.inputs[ex] and answer is not ... and not isinstance(ref, Exception) \
                and not isinstance(book_ref, Exception):
            e = REGISTRY[ex]   # the book's answer, given where this variant's answer differs
            if not compare(e, ref, book_ref)[0] and compare(e, book_ref, answer)[0]:
                book.append(ex)
    flags = []
    if other:
        flags.append(("other-inputs", "; ".join(other)))
    if book:
        flags.append(("book-answer", ", ".join(book)))
    return flags


def _read_records(path: pathlib.Path) -> dict[str, dict]:
    """The last answer each exercise recorded (a notebook may re-run a check).

    Only lines with an ``answer`` count: a verdict a submission writes there is ignored, and
    so are junk lines and anything past the first few MiB.
    """
    last = {}
    if path.exists():
        with open(path, "rb") as fh:
            text = fh.read(_MAX_RESULTS_BYTES).decode("utf-8", errors="replace")
        for line in text.splitlines():
            try:
                rec = json.loads(line)
                if isinstance(rec, dict) and isinstance(rec.get("exercise"), str) and "answer" in rec:
                    last[rec["exercise"]] = rec
            except (ValueError, RecursionError):
                continue
    return last


def _scrubbed_env(tmp: pathlib.Path) -> dict:
    """The kernel's whole environment: a PATH, a fresh HOME and TMPDIR, and the results file."""
    home, scratch = tmp / "home", tmp / "tmp"
    home.mkdir(exist_ok=True)
    scratch.mkdir(exist_ok=True)
    servelib_parent = pathlib.Path(__file__).resolve().parents[2]
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), "TMPDIR": str(scratch),
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONPATH": str(servelib_parent),
            "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", RESULTS_ENV: str(tmp / "results.jsonl")}


def _run_worker(notebook: pathlib.Path, tmp: pathlib.Path, timeout_s: float, limits: Limits) -> dict:
    """Run :func:`_execute_main` in a new process (its own session) with the kernel's environment."""
    outcome_path, log = tmp / "outcome.json", tmp / "worker.log"
    job = json.dumps({"notebook": str(notebook), "outcome": str(outcome_path), "timeout_s": timeout_s,
                      "limits": [limits.memory_bytes, limits.cpu_s, limits.output_bytes]})
    code = "import sys; from servelib.grading.grade import _execute_main; _execute_main(sys.argv[1])"
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen([sys.executable, "-c", code, job], env=_scrubbed_env(tmp), cwd=notebook.parent,
                                stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s + _WORKER_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()
            return {"raised": [], "timed_out": True, "crashed": False,
                    "note": f"killed after {timeout_s + _WORKER_GRACE_S:g} s"}
    try:
        outcome = json.loads(outcome_path.read_text())
        return {"raised": [str(x) for x in outcome["raised"]][:1000], "timed_out": bool(outcome["timed_out"]),
                "crashed": bool(outcome["crashed"]), "note": str(outcome["note"])[:300]}
    except (OSError, ValueError, KeyError, TypeError):
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        return {"raised": [], "timed_out": False, "crashed": True,
                "note": "the grading worker failed" + (f": {tail[0][:160]}" if tail else "")}


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``; [] elsewhere)."""
    children = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(pid: int) -> None:
    """Kill ``pid``, its process group and every descendant: stopped first, so none can fork
    a replacement, then killed; repeated until none is left."""
    for _ in range(10):
        procs = _descendants(pid)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in procs:
                try:
                    os.kill(p, sig)
                except OSError:
                    pass
        if not procs:
            break
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def _execute_main(job_json: str) -> None:
    """Worker entry point: limit this process, adopt orphans, execute one notebook, write the
    outcome as JSON (see :func:`_execute`), then kill whatever the notebook left running."""
    job = json.loads(job_json)
    Limits(*job["limits"]).apply()
    try:  # orphans of the kernel's children become ours, so kill_tree still finds them
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    try:
        notebook, outcome_path = pathlib.Path(job["notebook"]), pathlib.Path(job["outcome"])
        outcome = _execute(notebook, float(job["timeout_s"]), sockets=outcome_path.parent / "kernel")
        outcome_path.write_text(json.dumps(outcome))
    finally:
        for p in _descendants(os.getpid()):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


class _GradingClient(NotebookClient):
    """An nbclient that keeps only error outputs (name and message, cut short): the grader
    needs to know which cells raised, and a submission cannot fill its memory with output."""

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] != "error":
            return None
        content = msg["content"]
        out = nbformat.v4.new_output("error", ename=str(content.get("ename", ""))[:100],
                                     evalue=str(content.get("evalue", ""))[:300], traceback=[])
        outs.append(out)
        return out


def _execute(notebook: pathlib.Path, timeout_s: float, sockets: pathlib.Path | None = None) -> dict:
    """Execute ``notebook`` in a fresh python3 kernel in its folder, all cells within ``timeout_s``.

    The kernel talks to this process over Unix sockets named ``sockets-1`` ... (default: in
    the notebook's folder), not TCP ports, which kernels started side by side can race for;
    a kernel that dies before it answers at all is started once more.
    Returns ``{"raised": [exercise ids whose cell raised], "timed_out": bool,
    "crashed": bool (the kernel died or the notebook could not be run), "note": str}``.
    """
    # A relative path keeps the socket names short (the system limits them to about 100 bytes).
    ip = os.path.relpath(sockets or notebook.parent / "kernel", notebook.parent)
    config = Config({"KernelManager": {"transport": "ipc", "ip": ip}})
    for attempt in (1, 2):
        nb = nbformat.read(notebook, as_version=4)
        deadline = None

        def remaining(cell):  # one deadline for the whole notebook, counted from its first cell
            nonlocal deadline
            if deadline is None:
                deadline = time.monotonic() + timeout_s
            return max(0.1, deadline - time.monotonic())

        client = _GradingClient(nb, kernel_name="python3", timeout_func=remaining, allow_errors=True,
                                shutdown_kernel="immediate", record_timing=False, store_widget_state=False,
                                config=config, resources={"metadata": {"path": str(notebook.parent)}})
        try:
            client.execute()
        except RuntimeError as err:
            if attempt == 1 and "before replying to kernel_info" in str(err):
                continue
            return _outcome(nb, timeout_s, err)
        except Exception as err:
            return _outcome(nb, timeout_s, err)
        return _outcome(nb, timeout_s, None)


def _outcome(nb, timeout_s: float, err: Exception | None) -> dict:
    """What :func:`_execute` returns for the executed ``nb`` and the error that stopped it."""
    timed_out, crashed, note = False, False, ""
    if isinstance(err, CellTimeoutError):
        timed_out, note = True, f"stopped at the {timeout_s:g} s time limit"
    elif isinstance(err, DeadKernelError):
        crashed, note = True, "the kernel died (did it reach the memory or CPU-time limit?)"
    elif err is not None:  # a notebook nbclient cannot run; report it, never stop the grader
        first_line = (str(err).splitlines() or [""])[0][:120]
        crashed, note = True, f"could not execute: {type(err).__name__}: {first_line}"
    raised, errors = [], []
    for n, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                raised += _CHECK_ID.findall(cell.source)
                errors.append(f"cell {n} raised {out.get('ename', 'an error')}")
    if errors and not note:
        note = "; ".join(errors[:3]) + (f" (+{len(errors) - 3} more)" if len(errors) > 3 else "")
    return {"raised": raised, "timed_out": timed_out, "crashed": crashed, "note": note}


def grade(root, chapters: list[Chapter], *, timeout_s: float = 300, jobs: int = 1,
          shard_spec: tuple[int, int] = (1, 1), course: Course = Course(),
          limits: Limits = Limits()) -> list[Result]:
    """Grade every submission in ``root`` (or shard ``k`` of ``n``) with ``jobs`` parallel workers.

    Every reference is computed before the first kernel starts. Results come back in the
    order of the sorted submission list. Raises ValueError for a folder that does not
    exist, ``jobs`` < 1, a timeout that is not positive or a bad shard.
    """
    root = pathlib.Path(root)
    if not root.is_dir():
        raise ValueError(f"submissions folder {root} does not exist")
    if not (isinstance(jobs, int) and jobs >= 1):
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
    subs = shard(find_submissions(root), *shard_spec)
    references = _References()
    plans = {}
    for rel in subs:
        try:
            plans[rel] = prepare(root, rel, chapters, course, references)
        except Exception:  # grade_submission reports it
            plans[rel] = None
    for ex in {e for p in plans.values() if p and p.chapter for e in p.chapter.exercises}:
        _BOOK.get(ex, {})   # the book's own answers too, before any kernel runs
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:  # each job is a process
        return list(pool.map(lambda rel: grade_submission(root, rel, chapters, timeout_s, course, limits,
                                                          plans[rel]), subs))


def write_csv(results: list[Result], path) -> None:
    """Write the rows of ``results`` under :data:`CSV_HEADER`, atomically: into a new file
    beside ``path`` that then replaces it (a link placed at ``path`` is replaced, not followed)."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(CSV_HEADER)
            for r in results:
                writer.writerows(r.rows())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def summary(results: list[Result]) -> str:
    """A plain-text table: one line per submission with points, counts per status, flags, time and a note."""
    head = ("submission", "chapter", "points", *STATUSES, "flags", "seconds", "note")
    lines = []
    for r in results:
        rows = r.rows()
        counts = [sum(row[4] == s for row in rows) for s in STATUSES]
        lines.append((r.submission, r.chapter.name if r.chapter else "?",
                      f"{sum(row[2] for row in rows)}/{sum(row[3] for row in rows)}",
                      *map(str, counts), ",".join(f for f, _ in r.flags) or "-", f"{r.seconds:.1f}", r.note))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = lambda row: "  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines)])


def servelib_digest() -> str:
    """SHA-256 of servelib's Python sources: the command line compares it before and after a
    run, since a kernel running as the grader's user could edit the installed package."""
    package = pathlib.Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(package.rglob("*.py")):
        h.update(f.relative_to(package).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()
