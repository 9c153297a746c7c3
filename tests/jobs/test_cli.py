"""``python -m lance_ops.jobs``: argument parsing and runs (in process, on the session fixture)."""

import json
import zipfile

import lance
import pytest
from datagen import simple_table
from helpers import snapshot

import lance_ops.format as lf
from lance_ops.jobs.__main__ import build_parser, main


def test_parser_rejects_a_missing_job_argument(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["delete", "/x"])  # --where is required
    assert e.value.code == 2
    args = build_parser().parse_args(["--storage-options", '{"token": "anon"}', "compact", "/x", "--dry-run"])
    assert (args.job, args.dry_run, args.storage_options) == ("compact", True, {"token": "anon"})


def test_cli_append_delete_compact(spark, uri, tmp_path, capsys):
    src = str(tmp_path / "in")
    spark.createDataFrame(simple_table(0, 100).to_pandas()).repartition(3).write.parquet(src)

    def run(*argv: str) -> dict:
        assert main(list(argv)) == 0
        return json.loads(capsys.readouterr().out)

    out = run("append", uri, "--source", src, "--format", "parquet", "--enable-stable-row-ids",
              "--max-rows-per-file", "20")
    assert (out["version"], out["rows_written"]) == (1, 100)
    assert run("delete", uri, "--where", "id >= 90")["num_deleted_rows"] == 10
    out = run("compact", uri, "--target-rows-per-fragment", "1000")
    assert out["fragments_added"] == 1 and out["failed_tasks"] == [] and out["rows_rewritten"] == 90
    assert lance.dataset(uri).count_rows() == 90
    assert sorted(snapshot(uri)["id"].to_pylist()) == list(range(90))
    assert lf.dataset(uri).has_stable_row_ids
    assert spark.range(3).count() == 3  # the CLI left the session it reused running


def test_cli_refusals_exit_2_naming_the_culprit(spark, uri, tmp_path, capsys):
    lance.write_dataset(simple_table(0, 5), uri)
    src = str(tmp_path / "in.json")
    spark.createDataFrame([("1", "x", 0.5)], "id string, val string, score double").coalesce(1).write.json(src)
    assert main(["append", uri, "--source", src, "--format", "json"]) == 2
    assert "SchemaError" in capsys.readouterr().err
    assert main(["compact", "s3://bucket/ds"]) == 2
    assert "InvalidURIError: dataset URI 's3://bucket/ds'" in capsys.readouterr().err
    assert main(["package", str(tmp_path / "pkg")]) == 0
    out = json.loads(capsys.readouterr().out)
    with zipfile.ZipFile(out["py_files"]) as z:
        assert {"lance_ops/jobs/__main__.py", "lance_ops/format/io/object_store.py", "lance_ops/py.typed"} <= set(z.namelist())
    assert lance.dataset(uri).version == 1
