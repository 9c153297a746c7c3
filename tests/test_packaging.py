"""Packaging as users install it: every import is declared in its layer's extra, and the base
install (``pip install lance_ops``, no extras) runs ``lance_ops.format`` and ``lance-ops inspect``.

``test_imports_are_declared`` walks each layer's imports with ``ast`` (top-level and inside
functions alike) and maps every third-party module to the distribution that provides it.
``test_base_install_in_a_fresh_venv`` builds the wheel, installs it with ``--no-deps`` plus the
base dependencies only (wheels fetched by ``pip download``, from pip's cache after the first run)
into a venv without system site-packages, then runs the ``lance-ops`` console script there.
"""

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: the extras each part of the package may import from (besides the base dependencies)
LAYER_EXTRAS: dict[str, tuple[str, ...]] = {
    "lance_ops/__init__.py": (),
    "lance_ops/format": (),
    "lance_ops/format/_proto/regen.py": ("dev",),
    "lance_ops/format/testing": ("testing",),  # the conformance suite for third-party stores  # the `make protos` tool, not run by users
    "lance_ops/jobs": ("spark",),
    "lance_ops/assets": ("spark", "dagster", "polars"),
    "lance_ops/airflow": ("spark", "airflow"),
    "lance_ops/settings.py": ("dagster", "airflow"),  # lance_ops.yaml: read by both orchestrators
    "lance_ops/policy.py": (),
    "lance_ops/orchestration": ("dagster", "airflow"),  # the planner reads lance_ops.yaml as settings.py does
    "lance_ops/cli.py": ("dagster",),
    "lance_ops/demo.py": ("dagster",),
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _norm(re.match(r"[A-Za-z0-9._-]+", req.strip()).group(0))


def _declared(extras: tuple[str, ...]) -> set[str]:
    """Distribution names of the base dependencies plus ``extras`` (``lance_ops[x]`` expanded)."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    names, todo, seen = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}, list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in optional[extra]:
            if _requirement_name(req) == "lance-ops":
                todo += re.search(r"\[(.*)\]", req).group(1).split(",")
            else:
                names.add(_requirement_name(req))
    return names


def _layer_of(rel: str) -> str:
    return max((k for k in LAYER_EXTRAS if rel == k or rel.startswith(k + "/")), key=len)


def _third_party_imports(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return {t for t in tops if t not in sys.stdlib_module_names and t != "lance_ops"}


def test_imports_are_declared() -> None:
    """Each module a layer imports comes from a distribution declared for that layer."""
    providers = importlib.metadata.packages_distributions()
    undeclared, checked = [], 0
    for path in sorted((ROOT / "lance_ops").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        layer = _layer_of(rel)
        allowed = _declared(LAYER_EXTRAS[layer])
        for module in _third_party_imports(path):
            checked += 1
            dists = {_norm(d) for d in providers.get(module, [module])}  # not installed: its own name
            if not dists & allowed:
                undeclared.append(f"{rel}: imports {module} (from {sorted(dists)}), not declared for "
                                  f"{layer} (base + {list(LAYER_EXTRAS[layer])})")
    assert checked > 100, checked
    assert not undeclared, "\n".join(undeclared)


def test_layer_table_matches_the_extras() -> None:
    """The test's own map names extras that exist, and format needs the base install only."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    assert {e for extras in LAYER_EXTRAS.values() for e in extras} <= set(optional)
    assert {"pyspark", "pandas"} <= _declared(("spark",)) - _declared(())
    assert {"dagster", "rich", "pyyaml", "pydantic"} <= _declared(("dagster",)) - _declared(())


# ------------------------------------------------------------------------ the base install
def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, **kw)


def _checked(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = _run(cmd, **kw)
    assert out.returncode == 0, f"{cmd}\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    """A venv (no system site-packages) holding lance_ops's wheel and the base dependencies only."""
    tmp = tmp_path_factory.mktemp("base-install")
    src = tmp / "src"  # a copy: building in the worktree would leave build/ and *.egg-info behind
    shutil.copytree(ROOT / "lance_ops", src / "lance_ops", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _checked([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(src)])
    wheels = tmp / "wheels"
    _checked([*pip, "download", "-q", "--only-binary=:all:", "-d", str(wheels),
              *PYPROJECT["project"]["dependencies"]])
    venv = tmp / "venv"
    _checked([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    _checked([*pip, "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", "--no-index",
              *map(str, sorted((tmp / "dist").glob("*.whl"))), *map(str, sorted(wheels.glob("*.whl")))])
    return venv


@pytest.mark.slow
def test_base_install_has_no_extras(base_venv: Path) -> None:
    code = ("import importlib.util as u, lance_ops.format; "
            "print(sorted(m for m in ('pyspark', 'pandas', 'dagster', 'rich', 'lance') if u.find_spec(m)))")
    out = _checked([str(base_venv / "bin" / "python"), "-c", code], cwd=base_venv)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_base_install_inspects_a_dataset(base_venv: Path, tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": pa.array(range(1000), pa.int64())}), uri, max_rows_per_file=400)
    lf.dataset(uri).delete(pc.field("id") < 10)
    out = _checked([str(base_venv / "bin" / "lance-ops"), "inspect", uri], cwd=tmp_path)
    assert "version   2 (latest 2, 2 versions present)" in out.stdout
    assert "990 rows, 3 fragments" in out.stdout
    assert re.search(r"^\s+2\s+\S+ \S+\s+delete\s+990\s+3\b", out.stdout, re.M), out.stdout


@pytest.mark.slow
def test_base_install_names_the_extras(base_venv: Path, tmp_path: Path) -> None:
    jobs = _run([str(base_venv / "bin" / "python"), "-c", "import lance_ops.jobs"], cwd=tmp_path)
    assert jobs.returncode == 1
    assert "MissingDependencyError" in jobs.stderr and "pip install 'lance_ops[spark]'" in jobs.stderr
    caught = _run([str(base_venv / "bin" / "python"), "-c",
                   "try:\n import lance_ops.jobs\nexcept ImportError as e:\n print(e.extra, e.missing)"], cwd=tmp_path)
    assert caught.stdout.split() == ["spark", "pyspark"], caught.stderr
    run = _run([str(base_venv / "bin" / "lance-ops"), "run", "compact", "--dry-run"], cwd=tmp_path)
    assert run.returncode == 2
    assert "pip install 'lance_ops[dagster]'" in run.stderr and "Traceback" not in run.stderr
