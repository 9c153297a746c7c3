"""Every ``python`` and ``bash``/``shell`` block of README.md and docs/*.md runs as written.

As a new user would run them: a ``##`` section's blocks in order (its ``###`` subsections
included), one Python namespace per section, in a fresh working directory. A block marked
``<!-- fragment: why -->`` on the line before its fence (or with the info string
``python fragment``) is not run; keep those to what cannot run in a test (a cluster, a bucket,
a server). Sections whose blocks use Spark, Dagster or Airflow carry those marks (and ``slow``
where a shell block starts the ``lance-ops`` CLI), so the fast tier (a bare ``pytest``) runs
only the format examples.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "shell": "bash", "sh": "bash", "console": "bash"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})(?P<info>[^`]*)$")
FRAGMENT_NOTE = re.compile(r"<!--\s*fragment\b:?\s*(?P<why>.*?)\s*-->")
# what a section needs, from the text of its runnable blocks
NEEDS = {
    "airflow": re.compile(r"\bairflow\b", re.I),
    "dagster": re.compile(r"\bdagster\b"),
    "spark": re.compile(r"\bpyspark\b|\bSparkSession\b|\bspark_session\b|\bspark\.(read|sql|table|range|createDataFrame)"
                        r"|\bjobs\.\w+\(spark"),
    # each start of the CLI imports the package (about 2.5 s of CPU): kept out of the fast tier
    "slow": re.compile(r"(?m)^\s*lance-ops\s"),
}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the first line of code
    lang: str  # "python" | "bash" | anything else (not run)
    code: str
    fragment: str | None = None  # why it is not run

    @property
    def runnable(self) -> bool:
        return self.lang in ("python", "bash") and self.fragment is None


@dataclass
class Section:
    path: Path
    title: str
    line: int
    blocks: list[Block] = field(default_factory=list)

    @property
    def runnable(self) -> list[Block]:
        return [b for b in self.blocks if b.runnable]

    @property
    def id(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9_.]+", "-", self.title).strip("-").lower() or "top"
        return f"{self.path.name}::{slug}"

    @property
    def needs(self) -> list[str]:
        text = "\n".join(b.code for b in self.runnable)
        return [name for name, pattern in NEEDS.items() if pattern.search(text)]


def parse(path: Path) -> list[Section]:
    """A Markdown file's ``##`` sections with their fenced blocks (fences may be indented)."""
    lines = path.read_text().splitlines()
    sections = [Section(path, "(top)", 1)]
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m is None:
            if line.startswith("## "):
                sections.append(Section(path, line[3:].strip(), i + 1))
            i += 1
            continue
        indent, ticks, info = m["indent"], m["ticks"], m["info"].strip().split()
        end = i + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path.name}:{i + 1}: fence never closed")
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1 : end]]
        lang = RUNNABLE.get(info[0].lower(), info[0].lower()) if info else ""
        note = FRAGMENT_NOTE.search(lines[i - 1]) if i else None
        why = note["why"] or "marked" if note else ("marked in the info string" if "fragment" in info[1:] else None)
        sections[-1].blocks.append(Block(path, i + 2, lang, "\n".join(body) + "\n", why))
        i = end + 1
    return [s for s in sections if s.blocks]


SECTIONS = [s for p in DOCS for s in parse(p) if s.runnable]


def _param(section: Section):
    return pytest.param(section, id=section.id, marks=[getattr(pytest.mark, n) for n in section.needs])


def _run_python(block: Block, namespace: dict) -> None:
    # padded so that a traceback names the line of the Markdown file
    code = compile("\n" * (block.line - 1) + block.code, str(block.path), "exec")
    try:
        exec(code, namespace)
    except Exception as e:
        error = e
    else:
        return
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(block.path)]
    where = f"{block.path.name}:{frames[-1].lineno}" if frames else f"{block.path.name}:{block.line}"
    text = frames[-1].line if frames else ""
    detail = "".join(traceback.format_exception(error)[-12:])
    pytest.fail(f"{where}: {type(error).__name__}: {error}\n    {text}\n\n{detail}", pytrace=False)


def _run_bash(block: Block, cwd: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    if done.returncode:
        pytest.fail(f"{block.path.name}:{block.line}: bash exited {done.returncode}\n{block.code}\n"
                    f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}", pytrace=False)


@pytest.mark.parametrize("section", [_param(s) for s in SECTIONS])
def test_section_runs(section: Section, tmp_path, monkeypatch, request):
    """A section's runnable blocks, in order, in a fresh directory, one namespace."""
    if "spark" in section.needs:
        # one session for every Spark section (the docs' spark_session() reuses it), started before the
        # chdir: its JVM and Python workers keep the directory pytest started in, as in a full run
        request.getfixturevalue("spark")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    for block in section.runnable:
        if block.lang == "python":
            _run_python(block, namespace)
        else:
            _run_bash(block, tmp_path)


def test_blocks_found():
    """The extractor sees the documents' blocks, and fragments say why they are not run."""
    sections = [s for p in DOCS for s in parse(p)]
    readme = [b for s in sections if s.path.name == "README.md" for b in s.blocks]
    assert sum(b.runnable for b in readme) >= 10
    fragments = [b for s in sections for b in s.blocks if b.lang in ("python", "bash") and b.fragment]
    assert all(b.fragment != "marked" for b in fragments), [f"{b.path.name}:{b.line}" for b in fragments]
