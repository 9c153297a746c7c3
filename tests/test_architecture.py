"""The import layers hold: assets -> jobs -> format, and nothing imports pylance at run time."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 kept, 0 broken" in out.stdout


def test_format_package_imports_without_spark_or_dagster() -> None:
    code = (
        "import sys, lance_ops.format, lance_ops.format.maintenance; "
        "bad = [m for m in ('pyspark', 'dagster', 'lance') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


# ------------------------------------------------------------------ self-contained docs
FORBIDDEN_REFERENCES = re.compile(r"FORMAT_NOTES|\.\./shared|/work/shared")
RECIPES_OUTSIDE_DOCS = re.compile(r"(?<!docs/)\bRECIPES\.md")
SECTION_REFERENCE = re.compile(r"docs/(FORMAT|RECIPES)\.md((?:[ ,]*(?:and|-|–)?\s*§\d+(?:\.\d+)*)+)")


def _tracked_text_files() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                           timeout=60).stdout.decode().split("\0")
    texts = {}
    for name in filter(None, names):
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
    return texts


def _sections(doc: str) -> set[str]:
    """The section numbers of a docs/ file: "## 12. ..." -> "12", "### 12.3 ..." -> "12.3"."""
    return set(re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.?\s", (ROOT / "docs" / doc).read_text(), re.M))


def test_repository_refers_to_nothing_outside_it() -> None:
    """Every fact a maintainer needs lives in the repository: no notes outside it are cited."""
    bad = []
    for name, text in _tracked_text_files().items():
        for lineno, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN_REFERENCES.search(line) or (RECIPES_OUTSIDE_DOCS.search(line)
                                                     and not name.startswith("docs/")):
                bad.append(f"{name}:{lineno}: {line.strip()}")
    # the patterns themselves live in this file
    bad = [b for b in bad if not b.startswith("tests/test_architecture.py:")]
    assert not bad, "references to notes outside the repository:\n" + "\n".join(bad)


def test_cited_sections_exist() -> None:
    """``docs/FORMAT.md §N`` and ``docs/RECIPES.md §N`` name sections that exist."""
    sections = {"FORMAT": _sections("FORMAT.md"), "RECIPES": _sections("RECIPES.md")}
    assert {"3", "4.4", "7.3", "12.3", "13"} <= sections["FORMAT"]
    cited, missing = 0, []
    for name, text in _tracked_text_files().items():
        for doc, refs in SECTION_REFERENCE.findall(text):
            for number in re.findall(r"§(\d+(?:\.\d+)*)", refs):
                cited += 1
                if number not in sections[doc]:
                    missing.append(f"{name}: docs/{doc}.md §{number}")
    assert cited >= 40, cited
    assert not missing, "cited sections that do not exist:\n" + "\n".join(missing)
