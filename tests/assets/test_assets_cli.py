"""``lance-ops inspect`` and ``lance-ops run`` (options generated from the launchpad Config)."""

import io

import pyarrow.compute as pc
import pytest
from dagster_support import settings_for
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.cli import build_parser, main


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The data rows of the table whose header line starts with ``header_start``."""
    lines = text.splitlines()
    want = header_start.split()
    i = next(n for n, line in enumerate(lines) if line.split()[: len(want)] == want)
    out = []
    for line in lines[i + 2:]:
        if not line.strip():
            break
        out.append(line.split())
    return out


def test_inspect_prints_versions_fragments_and_stats(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    ds = lf.write_dataset(simple_table(3000, 500), uri, mode="append")
    ds.delete(pc.field("id") < 250)
    buf = io.StringIO()
    assert main(["inspect", uri, "--small-fragment-rows", "800"], out=buf) == 0
    text = buf.getvalue()
    assert "version   3 (latest 3, 3 versions present)" in text
    assert "3250 rows, 4 fragments (2 smaller than 800 rows), 250 deleted rows (ratio 0.0714)" in text
    versions = table_rows(text, "version  timestamp")
    assert [(r[0], r[3], r[4], r[5]) for r in versions] == [
        ("1", "overwrite", "3000", "3"), ("2", "append", "3500", "4"), ("3", "delete", "3250", "4")]
    frags = table_rows(text, "id  physical_rows")
    assert [r[:4] for r in frags] == [["0", "1000", "250", "750"], ["1", "1000", "0", "1000"],
                                      ["2", "1000", "0", "1000"], ["3", "500", "0", "500"]]
    assert frags[0][-1].endswith(".arrow")  # the deletion file of fragment 0
    assert main(["inspect", str(tmp_path / "nothing")], out=io.StringIO()) == 2


def test_run_options_come_from_the_config_classes():
    parser, fields = build_parser()
    assert fields["compact"] == ["target_rows_per_fragment", "max_rows_per_group", "materialize_deletions",
                                 "materialize_deletions_threshold", "max_source_fragments", "max_source_rows",
                                 "max_source_bytes", "bin_order", "data_storage_version", "cluster_by", "strategy",
                                 "dry_run"]
    assert fields["restore"] == ["version", "timestamp", "tag", "tag_current"]
    assert fields["remove_orphan_files"] == ["older_than_hours", "dry_run", "retention_duration_check"]
    args = parser.parse_args(["run", "restore", "--version", "3"])  # the job's --version, not lance-ops'
    assert (args.job, args.version, args.tag, args.tag_current) == ("restore", 3, None, None)
    args = parser.parse_args(["run", "compact", "--cluster-by", "x", "y", "--strategy", "zorder",
                              "--data-storage-version", "2.2"])
    assert (args.cluster_by, args.strategy, args.data_storage_version) == (["x", "y"], "zorder", "2.2")
    args = parser.parse_args(["run", "compact", "--dry-run", "--no-materialize-deletions",
                              "--target-rows-per-fragment", "5000"])
    assert (args.dry_run, args.materialize_deletions, args.target_rows_per_fragment) == (True, False, 5000)
    args = parser.parse_args(["run", "upsert", "--on", "id", "kind", "--rows", "10"])
    assert args.on == ["id", "kind"] and args.rows == 10
    args = parser.parse_args(["run", "change_feed", "--begin-version", "3", "--format", "lance"])
    assert args.job == "change_feed" and args.begin_version == 3 and args.format == "lance"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "delete"])  # --where is required, as in the launchpad


def test_run_executes_the_dagster_job(tmp_path, spark, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = settings_for(tmp_path)
    cfg = str(tmp_path / "lance_ops.yaml")
    uri = settings.datasets[0].uri
    lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    buf = io.StringIO()
    assert main(["run", "compact", "--config", cfg, "--dry-run", "--target-rows-per-fragment", "10000"], out=buf) == 0
    text = buf.getvalue()
    assert "SUCCESS" in text and "fragments_removed=3" in text and "dry_run=True" in text
    assert lf.dataset(uri).version == 1
    buf = io.StringIO()
    assert main(["run", "delete", "--config", cfg, "--where", "id < 100"], out=buf) == 0
    (row,) = table_rows(buf.getvalue(), "event")
    assert row[:5] == ["materialization", "events", "2", "2900", "3"]
    assert lf.dataset(uri).count_rows() == 2900
    assert main(["run", "delete", "--config", cfg, "--where", "no_such_column < 1"], out=io.StringIO()) == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_rich_bar_on_a_terminal_and_plain_lines_elsewhere():
    from lance_ops.console import progress

    plain = io.StringIO()
    with progress("reading 3 manifests", 3, stream=plain) as advance:
        for _ in range(3):
            advance(1)
    lines = plain.getvalue().splitlines()
    assert lines[-1].startswith("reading 3 manifests 3/3 ") and lines[-1].endswith(" done")
    assert "\x1b[" not in plain.getvalue()  # no escape codes off a terminal

    tty = _Terminal()
    with progress("reading 3 manifests", 3, stream=tty) as advance:
        for _ in range(3):
            advance(1)
    out = tty.getvalue()
    assert "\x1b[" in out and "3/3" in out and "reading 3 manifests" in out
