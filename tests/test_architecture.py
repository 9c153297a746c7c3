"""The import layers hold: assets -> jobs -> format, and nothing imports pylance at run time."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 kept, 0 broken" in out.stdout


def test_format_package_imports_without_spark_or_dagster() -> None:
    code = (
        "import sys, lance_ops.format, lance_ops.format.maintenance; "
        "bad = [m for m in ('pyspark', 'dagster', 'lance') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
