#!/usr/bin/env python3
r"""Open every page of the built book in headless Chromium, offline, and check what a reader sees.

    python scripts/browser_check.py [HTML_DIR] [--screenshots DIR]

HTML_DIR defaults to ``_build/html``; screenshots of each chapter (and the front page) go to
``_build/screenshots`` unless told otherwise. The pages are served over HTTP on 127.0.0.1,
and every other host is made unreachable, so a page that needs the network fails here.
Per page it checks:

- maths rendered: MathJax produced an ``mjx-container`` for every maths element, and no
  raw ``$$``, ``\\(`` or ``\\[`` is left in the text (outside code);
- every image loaded (``naturalWidth > 0``);
- no traceback or error output;
- no console errors (failed loads included);
- every internal link resolves: the file exists and so does its ``#anchor``;
- on chapter pages (``notebooks/``): the exercise solutions sit behind toggles, closed, and
  the page's launch button opens this chapter's notebook on Colab;
- what a reader should never meet (each once a defect of this book):
  maths that typesets words (a ``$`` in prose, ``d_{head}`` for ``d_\text{head}``: see
  :func:`math_words`); a display equation wider than the column; raw LaTeX (``\emph``) or
  a caret power (``10^12``) in the text; a check's verdict under the book's own solution;
  a printed table split into several output boxes; the same table twice on a page; a
  heading with nothing under it before the next one; an output that must wait behind a
  closed toggle (a ``hide-output`` cell, anything under a "Self-test" heading) shown; a bitmap figure (figures are SVG);
  the word "syllabus";
- code that scrolls sideways: a chapter's code cell wider than the column (code is wrapped
  at 88 characters, and book/_ext/code_width.py makes 88 fit at the check's 1280 px).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and
``selenium`` (requirements.txt). Exits 1 listing every failure.
"""
from __future__ import annotations

import argparse
import functools
import html
import html.parser
import http.server
import pathlib
import re
import sys
import tempfile
import threading
import time
import urllib.parse

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1600",
         # Offline: every host but this machine fails to resolve, so a CDN load shows up as an error.
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
MATH_TIMEOUT_S = 30

# \text{...} and friends: words that are meant to be upright text.
_TEXT_IN_MATH = re.compile(r"\\(?:text|mathrm|textrm|operatorname|mbox|textit|textbf|mathit|begin|end)"
                           r"\s*\{[^{}]*\}")


def math_words(tex: str) -> list[str]:
    """Words that ``tex`` (one formula) would set in maths italic, letters run together.

    A word here is three or more lowercase letters outside ``\\text{}`` (or ``\\mathrm{}``
    ...) and outside a command name: "per" and "hour" in ``$2.50 per H100-hour ... ($``
    (prose dollars read as maths), "head" in ``d_{head}`` (write ``d_\\text{head}``).
    Variables (``PN``, ``KV``, ``H_{kv}``) are not words.
    """
    body = _TEXT_IN_MATH.sub(" ", tex)
    body = re.sub(r"\\[A-Za-z]+", " ", body)
    return re.findall(r"(?<![A-Za-z])[a-z]{3,}", body)


def page_maths(page_html: str) -> list[tuple[str, str]]:
    """Every formula of a built page as ("inline" or "display", TeX), from Sphinx's markup."""
    found = []
    for kind, pattern in (("inline", r'<span class="math[^"]*">\\\((.*?)\\\)</span>'),
                          ("display", r'<div class="math[^"]*"[^>]*>\s*(?:<p>)?\\\[(.*?)\\\]')):
        found += [(kind, html.unescape(t)) for t in re.findall(pattern, page_html, flags=re.S)]
    return found

# What the page shows, read in the browser after it has settled.
PAGE_STATE_JS = """
const body = document.body.cloneNode(true);
body.querySelectorAll('pre, code, script, style, mjx-container, mjx-assistive-mml').forEach(e => e.remove());
const solutions = [...document.querySelectorAll('.cell')].filter(c => c.textContent.includes('BEGIN SOLUTION'));
const toggles = solutions.map(c => {
  const d = c.querySelector('details');
  if (!c.classList.contains('tag_hide-input')) return 'untagged';
  return d === null ? 'missing' : (d.open ? 'open' : 'closed');
});
const wider = e => e.scrollWidth > e.clientWidth + 1;
const tables = [...document.querySelectorAll('table')].map(t => t.outerHTML);
return {
  text: body.textContent,
  outputs: [...document.querySelectorAll('.cell_output')].map(o => o.textContent).join(' '),
  scrolling: [...document.querySelectorAll('.cell .cell_input pre')].filter(wider).length,
  codeCells: document.querySelectorAll('.cell .cell_input pre').length,
  wideMaths: [...document.querySelectorAll('mjx-container[display="true"]')]
      .filter(c => c.querySelector('mjx-math').getBoundingClientRect().width > c.getBoundingClientRect().width + 1)
      .map(c => c.getAttribute('aria-label') || c.textContent.slice(0, 60)),
  splitOutputs: [...document.querySelectorAll('.cell_output')]
      .filter(o => o.querySelectorAll(':scope > .output.stream').length > 1).length,
  repeatedTables: tables.filter((t, i) => tables.indexOf(t) !== i).length,
  emptyHeadings: [...document.querySelectorAll('section > :is(h1, h2, h3, h4)')]
      .filter(h => { const n = h.nextElementSibling; return n !== null && n.tagName === 'SECTION'; })
      .map(h => h.textContent.replace('#', '').trim()),
  // Outputs that must wait behind a closed toggle: hide-output cells, and every output
  // under a "Self-test" heading (its answers).
  openHidden: [...document.querySelectorAll('.cell.tag_hide-output .cell_output, ' +
                                           'section[id^="self-test"] .cell_output')]
      .filter(o => { const d = o.closest('details'); return !d || d.open; }).length,
  bitmaps: [...document.querySelectorAll('.cell_output img')].map(i => i.getAttribute('src'))
      .filter(src => !src.endsWith('.svg')),
  images: [...document.images].map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]),
  errorOutputs: document.querySelectorAll('.output.error, .output.traceback, .cell_output .traceback').length,
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  toggles: toggles,
  colab: [...document.querySelectorAll('.dropdown-launch-buttons a[href^="https://colab.research.google.com/github/"]')]
      .map(a => a.getAttribute('href')),
};
"""


class _Ids(html.parser.HTMLParser):
    """Collects every ``id`` and ``name`` in a page: the anchors a link may point at."""

    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(v for k, v in attrs if k in ("id", "name") and v)


@functools.cache
def anchors(path: pathlib.Path) -> frozenset:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def serve(root: pathlib.Path):
    """A quiet HTTP server for ``root`` on 127.0.0.1 (any free port), in a thread."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def pages(root: pathlib.Path) -> list[pathlib.Path]:
    """Every HTML page of the book (not the theme's or Sphinx's support files)."""
    skip = {"_static", "_sources", "_images", "_sphinx_design_static"}
    return sorted(p for p in root.rglob("*.html") if not skip & set(p.relative_to(root).parts))


def check_link(root: pathlib.Path, base: str, href: str) -> str | None:
    """None if an internal link resolves (file and anchor), else what is wrong with it."""
    url = urllib.parse.urlsplit(href)
    if not href.startswith(base):
        return None                      # external links are not followed (offline)
    rel = urllib.parse.unquote(url.path)[1:] or "index.html"
    target = root / rel
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return f"broken link {href}: no file {rel}"
    if url.fragment and target.suffix == ".html" and url.fragment not in anchors(target):
        return f"broken link {href}: no anchor #{url.fragment} in {rel}"
    return None


def wait_for_math(driver, n_math: int) -> int:
    """Wait until MathJax has typeset ``n_math`` elements; return how many it did."""
    deadline = time.monotonic() + MATH_TIMEOUT_S
    while True:
        done = driver.execute_script("return document.querySelectorAll('mjx-container').length")
        if done >= n_math or time.monotonic() > deadline:
            return done
        time.sleep(0.1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html_dir", nargs="?", default="_build/html", type=pathlib.Path)
    ap.add_argument("--screenshots", type=pathlib.Path, default=None,
                    help="where to save a screenshot per chapter (default: beside HTML_DIR)")
    args = ap.parse_args(argv)
    root = args.html_dir.resolve()
    shots = (args.screenshots or root.parent / "screenshots").resolve()
    shots.mkdir(parents=True, exist_ok=True)
    if not (root / "index.html").is_file():
        print(f"no built book at {root} (build it first)", file=sys.stderr)
        return 1

    server = serve(root)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    failures, totals = [], dict(pages=0, math=0, images=0, links=0, toggles=0, chapters=0)
    totals["maths_words"] = {"inline": 0, "display": 0}
    scrolling = {}
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        opts.add_argument(f"--user-data-dir={profile}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            for page in pages(root):
                rel = page.relative_to(root).as_posix()
                fail = functools.partial(lambda r, msg: failures.append(f"{r}: {msg}"), rel)
                driver.get(base + rel)
                n_math = driver.execute_script("return document.querySelectorAll('.math').length")
                typeset = wait_for_math(driver, n_math)
                if typeset < n_math:
                    fail(f"maths not rendered: {typeset} of {n_math} elements typeset by MathJax")
                state = driver.execute_script(PAGE_STATE_JS)
                for raw in ("$$", "\\(", "\\["):
                    if raw in state["text"]:
                        fail(f"raw maths left in the text: {raw!r}")
                for kind, tex in page_maths(page.read_text(encoding="utf-8")):
                    words = math_words(tex)
                    if words:
                        totals["maths_words"][kind] += 1
                        fail(f"{kind} maths typesets words {words} (a $ in prose? \\text{{}} missing?): {tex[:80]!r}")
                for tex in state["wideMaths"]:
                    fail(f"display equation wider than the column: {tex[:80]!r}")
                for pattern, what, where in ((r"\\[A-Za-z]+\b", "raw LaTeX", "text"),
                                             (r"\b\d+\^\d", "a caret power (write $10^{12}$)", "text"),
                                             (r"(?i)syllabus", "the word 'syllabus'", "text"),
                                             (r"\[check\] [\w-]+:", "a check's verdict", "outputs")):
                    m = re.search(pattern, state[where])
                    if m:
                        fail(f"{what} in the {where}: {state[where][max(0, m.start() - 30):m.end() + 30]!r}")
                if state["splitOutputs"]:
                    fail(f"{state['splitOutputs']} printed output(s) split into several boxes")
                if state["repeatedTables"]:
                    fail(f"{state['repeatedTables']} table(s) shown twice")
                for heading in state["emptyHeadings"]:
                    fail(f"heading with nothing under it: {heading!r}")
                if state["openHidden"]:
                    fail(f"{state['openHidden']} output(s) that must wait behind a toggle (hide-output, "
                         "self-test answers) are shown")
                for src in state["bitmaps"]:
                    fail(f"bitmap figure (figures are SVG): {src}")
                for src, ok in state["images"]:
                    if not ok:
                        fail(f"image did not load: {src}")
                if state["errorOutputs"] or "Traceback (most recent call last)" in state["text"]:
                    fail("traceback or error output on the page")
                for entry in driver.get_log("browser"):
                    # Browsers ask every site for /favicon.ico; its 404 is not the page's fault.
                    if entry["level"] == "SEVERE" and "/favicon.ico " not in entry["message"]:
                        fail(f"console error: {entry['message']}")
                for href in state["links"]:
                    problem = check_link(root, base, href)
                    if problem:
                        fail(problem)
                if rel.startswith("notebooks/"):
                    totals["chapters"] += 1
                    toggles = state["toggles"]
                    if not toggles:
                        fail("no exercise solutions found")
                    if any(t != "closed" for t in toggles):
                        fail(f"solution toggles not all present and closed: {toggles}")
                    totals["toggles"] += len(toggles)
                    if not any(h.endswith(f"/notebooks/{page.stem}.ipynb") for h in state["colab"]):
                        fail(f"no Colab launch button for notebooks/{page.stem}.ipynb: {state['colab']}")
                    scrolling[page.stem] = (state["scrolling"], state["codeCells"])
                    if state["scrolling"]:
                        fail(f"{state['scrolling']} code cells scroll sideways (wrap code at 88 "
                             "characters)")
                if rel.startswith("notebooks/") or rel == "index.html":
                    driver.save_screenshot(str(shots / (page.stem + ".png")))
                totals["pages"] += 1
                totals["math"] += typeset
                totals["images"] += len(state["images"])
                totals["links"] += sum(h.startswith(base) for h in state["links"])
        finally:
            driver.quit()
            server.shutdown()

    print(f"browser check: {totals['pages']} pages, {totals['math']} formulas typeset, "
          f"{totals['images']} images loaded, {totals['links']} internal links resolved, "
          f"{totals['toggles']} solution toggles on {totals['chapters']} chapters; "
          f"screenshots in {shots}")
    print(f"code cells that scroll sideways: {sum(n for n, _ in scrolling.values())} of "
          f"{sum(c for _, c in scrolling.values())} ("
          + ", ".join(f"{name} {n}/{c}" for name, (n, c) in sorted(scrolling.items())) + ")")
    print(f"formulas that typeset words: {totals['maths_words']['inline']} inline, "
          f"{totals['maths_words']['display']} display")
    for f in failures:
        print("FAIL", f)
    bad = len({f.split(":")[0] for f in failures})
    print(f"browser check: {bad} of {totals['pages']} pages failed" if bad
          else f"browser check: all {totals['pages']} pages passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
