"""The one URI rule (store.split_uri / resolve_uri): every form Spark, Hadoop and users write."""

import os

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore, resolve_uri, split_uri


def table(start: int = 0, n: int = 5) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"r{i}" for i in range(start, start + n)]})


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("/data/ds", ("file", "/data/ds")),
        ("file:/data/ds", ("file", "/data/ds")),  # Spark's and Hadoop's form (CREATE TABLE ... LOCATION)
        ("file:///data/ds/", ("file", "/data/ds")),
        ("file://localhost/data/ds", ("file", "/data/ds")),
        ("FILE:/data/a%20b", ("file", "/data/a b")),  # a URI: %-escapes decoded, scheme case-insensitive
        ("/data/a%20b", ("file", "/data/a%20b")),  # a path: taken literally
        ("/data/x:y", ("file", "/data/x:y")),
        ("memory://bucket/ds/", ("memory", "/bucket/ds")),
        ("gs://bucket/lance/ds/", ("gs", "bucket/lance/ds")),
    ],
)
def test_uri_forms(uri, expected):
    assert split_uri(uri) == expected
    assert split_uri(resolve_uri(uri)) == expected  # resolve_uri is stable under the rule
    assert resolve_uri(resolve_uri(uri)) == resolve_uri(uri)


def test_relative_paths_resolve_against_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_uri("rel/ds") == str(tmp_path / "rel" / "ds")
    assert resolve_uri("file:rel/ds") == str(tmp_path / "rel" / "ds")
    assert resolve_uri("memory://x") == "memory://x" and resolve_uri("gs://b/p") == "gs://b/p"


@pytest.mark.parametrize(
    ("uri", "culprit"),
    [
        ("s3://bucket/ds", "'s3'"),
        ("hdfs://nn:8020/ds", "'hdfs'"),
        ("foo:bar", "'foo'"),
        ("file://otherhost/data/ds", "'otherhost'"),
        ("gs:///ds", "no bucket"),
        ("", "empty"),
        ("file://", "no path"),
    ],
)
def test_unknown_schemes_are_typed_errors_naming_the_uri(uri, culprit):
    with pytest.raises(lf.InvalidURIError) as e:
        ObjectStore(uri)
    assert culprit in str(e.value) and repr(uri) in str(e.value)
    assert isinstance(e.value, lf.LanceOpsError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("form", ["file:{p}", "file://{p}", "file://localhost{p}"])
def test_file_uris_write_where_they_point(tmp_path, monkeypatch, form):
    """``file:/x`` used to become ``./file:/x`` under the current directory."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    target = tmp_path / "ds"
    uri = form.format(p=target)
    lf.write_dataset(table(), uri)
    lf.write_dataset(table(5), uri, mode="append")
    assert os.listdir(cwd) == []  # nothing under ./file:...
    assert sorted(os.listdir(target)) == ["_transactions", "_versions", "data"]
    want = table(0, 10).to_pylist()
    assert lance.dataset(str(target)).to_table().sort_by("id").to_pylist() == want
    assert lance.dataset(uri).to_table().sort_by("id").to_pylist() == want  # pylance reads the same URI
    assert lf.dataset(uri).to_table().sort_by("id").to_pylist() == want
    assert lf.dataset(uri).uri == uri  # the URI is kept as given (as pylance does)
