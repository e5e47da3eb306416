"""Pin the book to a release, so a notebook opened on Colab installs the servelib it was written with.

    python scripts/release.py 0.2.0       write version 0.2.0 (tag v0.2.0) everywhere, regenerate the notebooks
    python scripts/release.py --verify    ask the repository whether the current version's tag exists there

Writing a version sets, in one go:

- the package version (``pyproject.toml`` and ``servelib.__version__``);
- in every chapter source (``notebooks/NN_name.py``), the set-up cell's ``RELEASE = "vX.Y.Z"``
  (Colab installs ``servelib @ git+REPO@vX.Y.Z``) and the Open-in-Colab badge
  (``.../blob/vX.Y.Z/notebooks/NN_name.ipynb``);
- ``_config.yml``'s ``repository.branch``, which the site's launch buttons open;

and then runs ``scripts/nbsync.py`` on every chapter. Then commit, ``git tag vX.Y.Z``,
``git push origin vX.Y.Z``, check with ``--verify``, and publish the site built from the tag.
``tests/test_colab.py`` fails if any of these places disagrees with the package version.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
VERSION = re.compile(r"^\d+\.\d+\.\d+$")
#: (file glob, pattern whose group 1 is replaced by the tag or version, "tag" or "version")
PLACES = [
    ("pyproject.toml", re.compile(r'^version = "([^"]+)"', re.M), "version"),
    ("servelib/__init__.py", re.compile(r'^__version__ = "([^"]+)"', re.M), "version"),
    ("notebooks/[0-9]*.py", re.compile(r'^RELEASE = "([^"]+)"', re.M), "tag"),
    ("notebooks/[0-9]*.py", re.compile(r"colab\.research\.google\.com/github/[^/]+/[^/]+/blob/([^/]+)/notebooks/"),
     "tag"),
    ("_config.yml", re.compile(r"^  branch: (\S+)", re.M), "tag"),
]


def write_version(version: str) -> list[pathlib.Path]:
    """Write ``version`` (and its tag ``v<version>``) into every place of :data:`PLACES`."""
    if not VERSION.match(version):
        raise ValueError(f"version must look like 1.2.3, got {version!r}")
    changed = []
    for pattern, regex, kind in PLACES:
        value = version if kind == "version" else f"v{version}"
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text()
            new, n = regex.subn(lambda m: text[m.start(0):m.start(1)] + value + text[m.end(1):m.end(0)], text)
            if n == 0:
                raise ValueError(f"{path.relative_to(ROOT)}: nothing matches {regex.pattern!r}")
            if new != text:
                path.write_text(new)
                changed.append(path)
    return sorted(set(changed))


def verify(repo_url: str, tag: str) -> bool:
    """True if ``tag`` exists in the repository at ``repo_url`` (asks it with ``git ls-remote``)."""
    out = subprocess.run(["git", "ls-remote", "--tags", repo_url, f"refs/tags/{tag}"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        print(f"could not reach {repo_url}: {out.stderr.strip()}", file=sys.stderr)
        return False
    return bool(out.stdout.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("version", nargs="?", help="the new version, e.g. 0.2.0 (its tag is v0.2.0)")
    group.add_argument("--verify", action="store_true", help="check that the current version's tag exists")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import servelib
    if args.verify:
        tag = f"v{servelib.__version__}"
        ok = verify(servelib.REPO_URL, tag)
        print(f"{tag} {'exists' if ok else 'is missing'} at {servelib.REPO_URL}")
        return 0 if ok else 1
    try:
        changed = write_version(args.version)
    except ValueError as err:
        ap.error(str(err))
    for path in changed:
        print("wrote", path.relative_to(ROOT))
    subprocess.run([sys.executable, str(ROOT / "scripts" / "nbsync.py")], check=True)
    print(f"now: git commit -am 'Release {args.version}' && git tag v{args.version} && "
          f"git push origin v{args.version} && python scripts/release.py --verify")
    return 0


if __name__ == "__main__":
    sys.exit(main())
