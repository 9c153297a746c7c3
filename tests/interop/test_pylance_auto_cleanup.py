"""pylance's automatic cleanup on both libraries (issue 34, docs/PYLANCE_TESTS.md):
``write_dataset(auto_cleanup_options=AutoCleanupConfig(...))`` configures a new dataset only,
``optimize.enable_auto_cleanup`` / ``disable_auto_cleanup`` set and remove the table config keys,
and a commit whose version is a multiple of ``lance.auto_cleanup.interval`` cleans up the versions
older than ``lance.auto_cleanup.older_than``, keeping the version it was read from.

Each test runs the same calls on ``lance`` (pylance 14) and ``lance_ops.format``, and the other
library keeps writing to what one configured.
"""

import time
from datetime import timedelta

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.ops.auto_cleanup import format_duration, parse_duration

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
TABLE = pa.table({"a": range(10), "b": range(10)})


@pytest.mark.parametrize("seconds", [0, 1, 60, 100, 3600, 86400, 90061, 172800, 2630016, 31557600, 40000000])
def test_config_values_as_pylance(tmp_path, seconds):
    got = {}
    for name, impl in IMPLS.items():
        cfg = {"interval": 3, "older_than_seconds": seconds}
        ds = impl.write_dataset(TABLE, tmp_path / name, auto_cleanup_options=cfg)
        got[name] = ds.config()
        # an existing dataset's config is left as it is, as pylance's
        again = impl.write_dataset(TABLE, tmp_path / name, mode="overwrite",
                                   auto_cleanup_options={"interval": 5, "older_than_seconds": 7})
        assert again.config() == got[name]
    assert got["lance_ops"] == got["pylance"]
    assert got["lance_ops"]["lance.auto_cleanup.older_than"] == format_duration(seconds)


def test_parse_duration():
    assert parse_duration("1ms") == timedelta(milliseconds=1)
    assert parse_duration("1m 40s") == timedelta(seconds=100)
    assert parse_duration("1year 3months 6days 9h 25m 52s") == timedelta(seconds=40000000)
    assert parse_duration("2days") == timedelta(days=2)
    with pytest.raises(lf.errors.InvalidArgumentError, match="not a duration"):
        parse_duration("5 parsecs")


@pytest.mark.parametrize("writer", ["pylance", "lance_ops"])
@pytest.mark.parametrize("configurer", ["pylance", "lance_ops"])
def test_commit_cleans_up_as_configured(tmp_path, configurer, writer):
    """One library configures auto cleanup, the other appends; both then see the same versions."""
    uri = tmp_path / "t"
    conf, w = IMPLS[configurer], IMPLS[writer]
    ds = conf.write_dataset(TABLE, uri)
    ds.update_config({"lance.auto_cleanup.interval": "2", "lance.auto_cleanup.older_than": "1ms"})  # v2
    w.write_dataset(TABLE, uri, mode="append")  # v3: not a multiple of 2, nothing removed
    time.sleep(0.05)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2, 3]
    w.write_dataset(TABLE, uri, mode="append")  # v4: cleans up, keeps its read version 3
    assert [v["version"] for v in lance.dataset(uri).versions()] == [3, 4]
    assert [v["version"] for v in lf.dataset(uri).versions()] == [3, 4]
    assert lance.dataset(uri).count_rows() == 30
    conf.dataset(uri).optimize.disable_auto_cleanup()  # v5
    for _ in range(3):
        w.write_dataset(TABLE, uri, mode="append")
    time.sleep(0.05)
    w.write_dataset(TABLE, uri, mode="append")  # v9
    assert [v["version"] for v in lf.dataset(uri).versions()] == [3, 4, 5, 6, 7, 8, 9]
    assert lance.dataset(uri).to_table().num_rows == lf.dataset(uri).count_rows() == 70


@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_enable_auto_cleanup_config(tmp_path, name):
    impl = IMPLS[name]
    ds = impl.write_dataset(TABLE, tmp_path / "t")
    ds.optimize.enable_auto_cleanup({"interval": 1, "older_than_seconds": 1})
    assert ds.version == 2
    assert ds.config() == {"lance.auto_cleanup.interval": "1", "lance.auto_cleanup.older_than": "1s"}
    ds.optimize.disable_auto_cleanup()
    assert ds.version == 3 and ds.config() == {}


@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_config_change_from_a_handle_older_than_the_cleanup(tmp_path, name):
    """A handle on version 2 changes config keys after auto cleanup removed versions 2-4: the
    change lands on the latest version (pylance checks only the versions still listed)."""
    impl, uri = IMPLS[name], tmp_path / "t"
    ds = impl.write_dataset(TABLE, uri)
    ds.update_config({"lance.auto_cleanup.interval": "1", "lance.auto_cleanup.older_than": "1ms"})  # v2
    for _ in range(3):
        impl.write_dataset(TABLE, uri, mode="append")
        time.sleep(0.02)
    assert [v["version"] for v in impl.dataset(uri).versions()] == [4, 5]
    ds.delete_config_keys(["lance.auto_cleanup.interval", "lance.auto_cleanup.older_than"])
    assert ds.version == 6 and ds.config() == {}
    assert lance.dataset(uri).count_rows() == lf.dataset(uri).count_rows() == 40
