"""Instructor tools on the command line (see the book's instructor page).

    python -m servelib.grading student SRC -o OUT_DIR [--roster R.csv --secret-file S]
    python -m servelib.grading grade SUBMISSIONS_DIR -o grades.csv [--timeout S] [-j N] [--shard K/N]
                                     [--roster R.csv --secret-file S] [--report DIR] [limits]
    python -m servelib.grading report grades-*.csv -o DIR [--roster R.csv] [--show-reference]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

from . import grade as grading
from .report import write_report
from .roster import Course, read_roster
from .student import write_student_versions

#: Reference notebooks when ``--reference`` is not given: the chapters of this repository.
DEFAULT_REFERENCE = pathlib.Path(__file__).resolve().parents[2] / "notebooks"


def _positive_int(text: str) -> int:
    # isascii: "²".isdigit() is True, yet int("²") fails.
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _limit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (0: no limit), got {text!r}")
    return value


def _shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (text.isascii() and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"must be K/N with 1 <= K <= N (e.g. 2/4), got {text!r}")
    return int(k), int(n)


def _class_options(p: argparse.ArgumentParser, *, secret: bool = True) -> None:
    p.add_argument("--roster", type=pathlib.Path,
                   help="CSV of the class with an 'id' column (each student's folder name); see the instructor page")
    if secret:
        p.add_argument("--secret-file", type=pathlib.Path,
                       help="file holding the instructor's secret, which seeds every student's variant "
                            "(given with --roster; keep it private)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m servelib.grading",
                                     description="Make student notebooks, grade submissions, report grades.")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("student", help="write student versions of chapter notebooks (solutions removed)")
    st.add_argument("src", type=pathlib.Path, help="a chapter notebook, or a folder of them")
    st.add_argument("-o", "--out", type=pathlib.Path, required=True,
                    help="output folder (created); with --roster, one sub-folder per student")
    _class_options(st)
    gr = sub.add_parser("grade", help="execute every submission and write one CSV row per exercise")
    gr.add_argument("submissions", type=pathlib.Path,
                    help="folder of submissions: notebooks, or one sub-folder per student")
    gr.add_argument("-o", "--out", type=pathlib.Path, default=pathlib.Path("grades.csv"),
                    help="CSV to write (default grades.csv); it always starts with the header")
    gr.add_argument("--timeout", type=_positive_seconds, default=300.0,
                    help="seconds allowed to execute one notebook, kernel start excluded (default 300)")
    gr.add_argument("-j", "--jobs", type=_positive_int, default=1,
                    help="notebooks graded at once on this machine, one process each (default 1)")
    gr.add_argument("--shard", type=_shard, default=(1, 1), metavar="K/N",
                    help="grade only shard K of N of the sorted submissions (default 1/1: all)")
    gr.add_argument("--reference", type=pathlib.Path, action="append",
                    help="reference notebook or folder of them, repeatable (default: this "
                         f"repository's notebooks/, {DEFAULT_REFERENCE})")
    _class_options(gr)
    gr.add_argument("--max-memory-gib", type=_limit, default=4.0,
                    help="memory (data segment) of each process of a submission, GiB (default 4; 0: none)")
    gr.add_argument("--max-cpu-s", type=_limit, default=None,
                    help="CPU seconds of each process of a submission (default: twice --timeout; 0: none)")
    gr.add_argument("--max-output-mib", type=_limit, default=64.0,
                    help="largest file a submission may write, MiB (default 64; 0: none)")
    gr.add_argument("--report", type=pathlib.Path, metavar="DIR",
                    help="also write the gradebook, the flags and the feedback into DIR (see 'report')")
    gr.add_argument("--show-reference", action="store_true",
                    help="with --report: put the right answers in the students' feedback")
    rp = sub.add_parser("report", help="gradebook, integrity flags and feedback files from graded CSVs")
    rp.add_argument("csvs", type=pathlib.Path, nargs="+", help="the CSVs of 'grade' (all shards)")
    rp.add_argument("-o", "--out", type=pathlib.Path, required=True, help="output folder (created)")
    _class_options(rp, secret=False)
    rp.add_argument("--show-reference", action="store_true",
                    help="put the right answers in the students' feedback")
    return parser


def _report(csvs, out, roster_path, show_reference) -> None:
    roster = read_roster(roster_path) if roster_path else ()
    paths = write_report(csvs, out, roster=roster, show_reference=show_reference)
    print(f"wrote {out / 'gradebook.csv'}, {out / 'flags.csv'} and {len(paths) - 2} feedback file(s) "
          f"in {out / 'feedback'}")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status: 0, 1 if servelib's own files changed
    while grading (a submission may have edited them), 2 for a usage error."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "student":
            course = Course.from_files(args.roster, args.secret_file)
            paths = write_student_versions(args.src, args.out, course)
            for path in paths if len(paths) <= 20 else []:
                print(f"wrote {path}")
            if len(paths) > 20:
                print(f"wrote {len(paths)} notebooks under {args.out}")
            return 0
        if args.command == "report":
            _report(args.csvs, args.out, args.roster, args.show_reference)
            return 0
        course = Course.from_files(args.roster, args.secret_file)
        chapters = grading.load_chapters(args.reference or [DEFAULT_REFERENCE])
        limits = grading.Limits(memory_bytes=args.max_memory_gib * 2**30,
                                cpu_s=2 * args.timeout if args.max_cpu_s is None else args.max_cpu_s,
                                output_bytes=args.max_output_mib * 2**20)
        t0 = time.perf_counter()
        before = grading.servelib_digest()
        results = grading.grade(args.submissions, chapters, timeout_s=args.timeout, jobs=args.jobs,
                                shard_spec=args.shard, course=course, limits=limits)
        if not results and args.shard == (1, 1):   # an empty shard is normal; an empty class is a wrong path
            raise ValueError(f"no submissions found in {args.submissions}")
        grading.write_csv(results, args.out)
    except (ValueError, OSError) as err:
        parser.exit(2, f"{parser.prog} {args.command}: error: {err}\n")
    print(grading.summary(results))
    k, n = args.shard
    print(f"\n{len(results)} submission(s){f' (shard {k}/{n})' if n > 1 else ''} graded in "
          f"{time.perf_counter() - t0:.1f} s with -j {args.jobs}; rows written to {args.out}")
    if args.report:
        try:
            _report([args.out], args.report, args.roster, args.show_reference)
        except (ValueError, OSError) as err:
            parser.exit(2, f"{parser.prog} report: error: {err}\n")
    if grading.servelib_digest() != before:
        print("WARNING: servelib's source files changed while grading: a submission may have edited them. "
              "Reinstall servelib from a clean copy and grade again, in a container.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
