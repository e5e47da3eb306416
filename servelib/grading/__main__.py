"""Instructor tools on the command line (see the book's instructor page).

    python -m servelib.grading student SRC -o OUT_DIR
    python -m servelib.grading grade SUBMISSIONS_DIR -o grades.csv [--timeout S] [-j N] [--shard K/N]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

from . import grade as grading
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


def _shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (text.isascii() and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"must be K/N with 1 <= K <= N (e.g. 2/4), got {text!r}")
    return int(k), int(n)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m servelib.grading",
                                     description="Make student notebooks and grade submissions.")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("student", help="write student versions of chapter notebooks (solutions removed)")
    st.add_argument("src", type=pathlib.Path, help="a chapter notebook, or a folder of them")
    st.add_argument("-o", "--out", type=pathlib.Path, required=True, help="output folder (created)")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "student":
            for path in write_student_versions(args.src, args.out):
                print(f"wrote {path}")
            return 0
        chapters = grading.load_chapters(args.reference or [DEFAULT_REFERENCE])
        t0 = time.perf_counter()
        results = grading.grade(args.submissions, chapters, timeout_s=args.timeout, jobs=args.jobs,
                                shard_spec=args.shard)
        if not results and args.shard == (1, 1):   # an empty shard is normal; an empty class is a wrong path
            raise ValueError(f"no submissions found in {args.submissions}")
        grading.write_csv(results, args.out)
    except (ValueError, OSError) as err:
        parser.exit(2, f"{parser.prog} {args.command}: error: {err}\n")
    print(grading.summary(results))
    k, n = args.shard
    print(f"\n{len(results)} submission(s){f' (shard {k}/{n})' if n > 1 else ''} graded in "
          f"{time.perf_counter() - t0:.1f} s with -j {args.jobs}; rows written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
