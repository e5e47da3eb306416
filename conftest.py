"""The test suite runs the chapters as the book does (servelib.book.BOOK_RUN_ENV): glue values
are recorded, so nbval compares every number the prose shows, and every figure is checked."""
import os

from servelib.book import BOOK_RUN_ENV

os.environ[BOOK_RUN_ENV] = "1"
