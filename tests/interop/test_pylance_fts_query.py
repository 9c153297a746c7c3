"""Full-text search and the text indices ``create_scalar_index`` builds, against pylance 14 on the
same data: an INVERTED index lance_ops creates (tokenizer keywords, ``with_position``) has
pylance's params and details and answers pylance's queries with pylance's row ids and BM25
scores; lance_ops answers ``full_text_query`` (strings, match / fuzzy / AND / phrase / boost /
multi-match / boolean objects, prefilter, limit) with pylance's rows and scores; a distributed
build (``fragment_ids`` / ``merge_index_metadata`` / ``CreateIndex`` of an ``Index``) equals the
single build; an NGRAM index lance_ops creates holds pylance's tokens and postings.
"""

import glob
import uuid

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.dataset import Index as PyIndex
from lance.file import LanceFileReader
from lance.query import (
    BooleanQuery,
    BoostQuery,
    FullTextOperator,
    MatchQuery,
    MultiMatchQuery,
    Occur,
    PhraseQuery,
)

import lance_ops.format as lf
from lance_ops.format.index.metadata import decode_index_section

WORDS = ("frodo was a happy puppy with the tail lance search text database quick brown fox jumped running runs "
         "café naïve Straße data-lake the and is of").split()


def corpus(n: int = 120, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    words = np.array(WORDS)
    text = [" ".join(words[rng.integers(0, len(words), rng.integers(0, 10))]) for _ in range(n)]
    title = [" ".join(words[rng.integers(0, len(words), rng.integers(1, 4))]) for _ in range(n)]
    text[1] = None
    return pa.table({"id": pa.array(np.arange(n), pa.int64()), "text": text, "title": title})


def hits(t: pa.Table) -> list[tuple[int, float]]:
    return sorted(zip(t["_rowid"].to_pylist(), t["_score"].to_pylist(), strict=True))


def both(tmp_path, index: dict | None = None, **write) -> tuple[lf.LanceDataset, lance.LanceDataset]:
    """The same rows written by each library (index built by each on its own, when given)."""
    data = corpus()
    ops = lf.write_dataset(data, str(tmp_path / "ops"), max_rows_per_file=50, **write)
    py = lance.write_dataset(data, str(tmp_path / "py"), max_rows_per_file=50, **write)
    if index is not None:
        ops.create_scalar_index("text", "INVERTED", **index)
        py.create_scalar_index("text", "INVERTED", **index)
    return ops, py


def _segment(uri: str):
    return decode_index_section(lf.dataset(uri).manifest.index_section, uri)[0]


@pytest.mark.parametrize("params", [{}, {"remove_stop_words": False, "stem": False},
                                    {"custom_stop_words": ["frodo"], "ascii_folding": False},
                                    {"max_token_length": None, "lower_case": False}, {"with_position": True}])
def test_created_inverted_index_is_pylances(tmp_path, params):
    ops, py = both(tmp_path, params)
    a, b = _segment(ops.uri), _segment(py.uri)
    assert (a.type_url, a.details, a.index_version) == (b.type_url, b.details, b.index_version)
    pa_stats = lance.dataset(ops.uri).stats.index_stats("text_idx")["indices"][0]
    pb_stats = py.stats.index_stats("text_idx")["indices"][0]
    assert pa_stats == pb_stats
    assert ops.index_statistics("text_idx")["indices"][0] == pb_stats  # lance_ops reads the same statistics
    reader = lance.dataset(ops.uri)
    for q in ("frodo", "running fox", "cafe", "the happy puppy", "strasse lake"):
        assert hits(reader.to_table(full_text_query=q, with_row_id=True)) == \
            hits(py.to_table(full_text_query=q, with_row_id=True)), q


def test_pylance_phrase_queries_on_lance_ops_positions(tmp_path):
    ops, py = both(tmp_path, {"with_position": True, "remove_stop_words": False})
    reader = lance.dataset(ops.uri)
    for q, slop in (("happy puppy", 0), ("frodo was", 0), ("quick fox", 1), ("the tail", 2), ("puppy puppy", 0)):
        want = hits(py.to_table(full_text_query=PhraseQuery(q, "text", slop=slop), with_row_id=True))
        assert hits(reader.to_table(full_text_query=PhraseQuery(q, "text", slop=slop), with_row_id=True)) == want
        assert hits(ops.to_table(full_text_query=lf.PhraseQuery(q, "text", slop=slop), with_row_id=True)) == want


QUERIES = [
    ("lance search text", "lance search text"),
    ({"query": "puppy", "columns": ["title"]}, {"query": "puppy", "columns": ["title"]}),
    (lf.MatchQuery("frodo frodo happy", "text"), MatchQuery("frodo frodo happy", "text")),
    (lf.MatchQuery("puppi runing", "text", fuzziness=1), MatchQuery("puppi runing", "text", fuzziness=1)),
    (lf.MatchQuery("quick fox", "text", operator="AND"), MatchQuery("quick fox", "text", operator=FullTextOperator.AND)),
    (lf.MatchQuery("tail", "text", boost=2.0), MatchQuery("tail", "text", boost=2.0)),
    (lf.BoostQuery(lf.MatchQuery("puppy", "text"), lf.MatchQuery("happy", "text"), negative_boost=0.3),
     BoostQuery(MatchQuery("puppy", "text"), MatchQuery("happy", "text"), negative_boost=0.3)),
    (lf.MultiMatchQuery("puppy fox", ["text", "title"]), MultiMatchQuery("puppy fox", ["text", "title"])),
    (lf.BooleanQuery([(lf.Occur.MUST, lf.MatchQuery("frodo", "text")), (lf.Occur.SHOULD, lf.MatchQuery("tail", "text")),
                      (lf.Occur.MUST_NOT, lf.MatchQuery("happy", "text"))]),
     BooleanQuery([(Occur.MUST, MatchQuery("frodo", "text")), (Occur.SHOULD, MatchQuery("tail", "text")),
                   (Occur.MUST_NOT, MatchQuery("happy", "text"))])),
    (lf.MatchQuery("frodo", "text") | lf.MatchQuery("fox", "title"), MatchQuery("frodo", "text") | MatchQuery("fox", "title")),
]


@pytest.mark.parametrize("i", range(len(QUERIES)))
def test_full_text_query_answers_as_pylance(tmp_path, i):
    ops, py = both(tmp_path, {"remove_stop_words": False})
    ops.create_scalar_index("title", "INVERTED")
    py.create_scalar_index("title", "INVERTED")
    mine, theirs = QUERIES[i]
    a = ops.to_table(full_text_query=mine, with_row_id=True)
    b = py.to_table(full_text_query=theirs, with_row_id=True)
    assert hits(a) == hits(b)
    assert a.schema.names == b.schema.names
    assert a["_score"].to_pylist() == sorted(a["_score"].to_pylist(), reverse=True)


def test_filter_limit_and_no_index(tmp_path):
    ops, py = both(tmp_path, {})
    for kw in ({"filter": "id > 40", "prefilter": True}, {"filter": "id > 40"}, {"columns": ["id"]}):
        a = ops.to_table(full_text_query="frodo puppy", with_row_id=True, **kw)
        b = py.to_table(full_text_query="frodo puppy", with_row_id=True, **kw)
        assert hits(a) == hits(b) and a.schema.names == b.schema.names, kw
    top = ops.to_table(full_text_query="frodo puppy", limit=5, with_row_id=True)
    want = py.to_table(full_text_query="frodo puppy", limit=5, with_row_id=True)
    assert top["_score"].to_pylist() == want["_score"].to_pylist()
    plain_ops, plain_py = both(tmp_path / "plain")  # no index: pylance searches flat with default params
    assert hits(plain_ops.to_table(full_text_query=lf.MatchQuery("frodo", "text"), with_row_id=True)) == \
        hits(plain_py.to_table(full_text_query=MatchQuery("frodo", "text"), with_row_id=True))
    with pytest.raises(ValueError, match="Cannot include deleted rows"):
        ops.to_table(full_text_query="frodo", with_row_id=True, include_deleted_rows=True)


def _distributed(ds, module, index_cls, **params):
    u = str(uuid.uuid4())
    frags = [f.fragment_id for f in ds.get_fragments()]
    for f in frags:
        ds.create_scalar_index("text", "INVERTED", name="dist_idx", replace=False, index_uuid=u, fragment_ids=[f],
                               **params)
    ds.merge_index_metadata(u, index_type="INVERTED")
    field = ds.schema.get_field_index("text")
    idx = index_cls(uuid=u, name="dist_idx", fields=[field], dataset_version=ds.version, fragment_ids=set(frags),
                    index_version=0)
    op = module.LanceOperation.CreateIndex(new_indices=[idx], removed_indices=[])
    return module.LanceDataset.commit(ds.uri, op, read_version=ds.version)


def test_distributed_build_equals_single(tmp_path):
    ops, py = both(tmp_path, None)
    mine = _distributed(ops, lf, lf.Index, remove_stop_words=False)
    theirs = _distributed(py, lance, PyIndex, remove_stop_words=False)
    reader = lance.dataset(mine.uri)
    assert reader.list_indices()[0]["type"] == "Inverted" and mine.list_indices()[0]["name"] == "dist_idx"
    for q in ("frodo", "the happy puppy", "lance database"):
        want = hits(theirs.to_table(full_text_query=q, with_row_id=True))
        assert hits(reader.to_table(full_text_query=q, with_row_id=True)) == want
        assert hits(mine.to_table(full_text_query=q, with_row_id=True)) == want
    assert not glob.glob(f"{mine.uri}/_indices/*/staging/*")


def test_ngram_index_is_pylances(tmp_path):
    t = pa.table({"t": ["hello world", "Hello", None, "wor", "Café 12ab", "ÀB-c", "", "apples", "x y"] * 4})
    lf.write_dataset(t, str(tmp_path / "ops"), max_rows_per_file=10).create_scalar_index("t", "NGRAM")
    lance.write_dataset(t, str(tmp_path / "py"), max_rows_per_file=10).create_scalar_index("t", "NGRAM")
    files = [glob.glob(f"{tmp_path}/{w}/_indices/*/ngram_postings.lance")[0] for w in ("ops", "py")]
    a, b = (LanceFileReader(f).read_all().to_table() for f in files)
    assert a.equals(b)
    a_seg, b_seg = _segment(str(tmp_path / "ops")), _segment(str(tmp_path / "py"))
    assert (a_seg.type_url, a_seg.details, a_seg.index_version) == (b_seg.type_url, b_seg.details, b_seg.index_version)
    reader = lance.dataset(str(tmp_path / "ops"))
    assert reader.list_indices()[0]["type"] == "NGram"
    assert lf.dataset(str(tmp_path / "ops")).index_statistics("t_idx")["indices"] == \
        reader.stats.index_stats("t_idx")["indices"]
    for f in ("contains(t, 'ello')", "contains(t, 'caf')", "t IS NULL", "contains(t, '12a')"):
        assert reader.to_table(filter=f).num_rows == lance.dataset(str(tmp_path / "py")).to_table(filter=f).num_rows
    ds = lf.dataset(str(tmp_path / "ops"))
    ds.insert(pa.table({"t": ["yellow"]}))
    ds.optimize_indices()
    assert lance.dataset(ds.uri).to_table(filter="contains(t, 'ello')").num_rows == 9


def test_nested_field_indices(tmp_path):
    """Indices on struct children (``data.text``, ``data.label``, ``data.n``) by dotted path: the
    same fields and kinds as pylance's, pylance answers from lance_ops' files, and full-text
    queries on the child score as pylance's."""
    n = 40
    data = pa.table({"id": range(n), "data": pa.StructArray.from_arrays(
        [pa.array([f"document {i} about lance database {'frodo' * (i % 3 == 0)}" for i in range(n)]),
         pa.array([f"label_{i % 3}" for i in range(n)]), pa.array(range(n), pa.int32())], names=["text", "label", "n"])})
    ops = lf.write_dataset(data, str(tmp_path / "ops"))
    py = lance.write_dataset(data, str(tmp_path / "py"))
    for ds in (ops, py):
        ds.create_scalar_index("data.text", index_type="INVERTED")
        ds.create_scalar_index("data.label", index_type="BITMAP")
        ds.create_scalar_index("data.n", index_type="BTREE")
    strip = [{k: v for k, v in i.items() if k not in ("uuid", "fragment_ids")} for i in ops.list_indices()]
    assert strip == [{k: v for k, v in i.items() if k not in ("uuid", "fragment_ids")} for i in py.list_indices()]
    reader = lance.dataset(ops.uri)
    for f in ("data.label = 'label_1'", "data.n < 7"):
        assert reader.to_table(filter=f).equals(py.to_table(filter=f))
    for q in ("frodo", "document 7"):
        want = hits(py.to_table(full_text_query=q, with_row_id=True))
        assert hits(reader.to_table(full_text_query=q, with_row_id=True)) == want
        assert hits(ops.to_table(full_text_query=q, with_row_id=True)) == want
    assert hits(ops.to_table(full_text_query=lf.MatchQuery("lance frodo", "data.text"), with_row_id=True)) == \
        hits(py.to_table(full_text_query=MatchQuery("lance frodo", "data.text"), with_row_id=True))


def test_list_of_strings_column(tmp_path):
    """A ``list<string>`` column is one document per row (positions run on across elements): the
    index lance_ops builds answers pylance's match and phrase queries as pylance's own does."""
    data = pa.table({"text": [["lance database", "the", "search"], ["lance database"], ["lance", "search"],
                              ["database", "search"], ["unrelated", "doc"], None, []] * 3})
    ops = lf.write_dataset(data, str(tmp_path / "ops"))
    py = lance.write_dataset(data, str(tmp_path / "py"))
    for ds in (ops, py):
        ds.create_scalar_index("text", "INVERTED", with_position=True)
    reader = lance.dataset(ops.uri)
    for mine, theirs in (("lance search", "lance search"),
                         (lf.PhraseQuery("database search", "text"), PhraseQuery("database search", "text")),
                         (lf.PhraseQuery("lance database", "text"), PhraseQuery("lance database", "text"))):
        want = hits(py.to_table(full_text_query=theirs, with_row_id=True))
        assert hits(reader.to_table(full_text_query=theirs, with_row_id=True)) == want
        assert hits(ops.to_table(full_text_query=mine, with_row_id=True)) == want


def test_nested_field_indices_extended(tmp_path):
    """``optimize_indices`` extends indices on struct children: pylance answers from them after
    lance_ops appends rows."""
    def rows(start: int, n: int) -> pa.Table:
        return pa.table({"id": range(start, start + n), "data": pa.StructArray.from_arrays(
            [pa.array([f"document {i} about lance" for i in range(start, start + n)]),
             pa.array([f"label_{i % 3}" for i in range(start, start + n)])], names=["text", "label"])})
    py = lance.write_dataset(rows(0, 30), str(tmp_path / "t"))
    py.create_scalar_index("data.text", index_type="INVERTED")
    py.create_scalar_index("data.label", index_type="BITMAP")
    ds = lf.write_dataset(rows(30, 20), py.uri, mode="append")
    ds.optimize_indices(num_indices_to_merge=0)
    reader = lance.dataset(py.uri)
    for name in ("data.text_idx", "data.label_idx"):
        assert reader.stats.index_stats(name)["num_unindexed_rows"] == 0
    assert reader.to_table(full_text_query="lance").num_rows == 50
    assert reader.to_table(filter="data.label = 'label_1'").num_rows == 17
    assert reader.to_table(full_text_query="42")["id"].to_pylist() == [42]  # a row lance_ops indexed


@pytest.mark.parametrize("params", [{"base_tokenizer": "ngram"},
                                    {"base_tokenizer": "ngram", "min_ngram_length": 2, "prefix_only": True},
                                    {"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 4}])
def test_ngram_base_tokenizer(tmp_path, params):
    """``base_tokenizer="ngram"`` (windows of the whole text, spaces included; pylance's defaults
    turn stemming and stop words off): the same params, details and statistics as pylance's, and
    the same rows and scores (to float32 rounding of the sum over many n-grams)."""
    data = pa.table({"text": ["hello world", "lance database", "lance is cool", "Café-X", None, "the thing was running",
                              "la"]})
    ops = lf.write_dataset(data, str(tmp_path / "ops"))
    py = lance.write_dataset(data, str(tmp_path / "py"))
    ops.create_scalar_index("text", "INVERTED", **params)
    py.create_scalar_index("text", "INVERTED", **params)
    assert _segment(ops.uri).details == _segment(py.uri).details
    reader = lance.dataset(ops.uri)
    assert reader.stats.index_stats("text_idx")["indices"] == py.stats.index_stats("text_idx")["indices"]

    def rounded(t: pa.Table) -> list[tuple[int, float]]:
        return [(r, round(s, 4)) for r, s in hits(t)]
    for q in ("lan", "nce", "la", "caf", "o w", "the", "running", "thing was"):
        want = rounded(py.to_table(full_text_query=q, with_row_id=True))
        assert rounded(reader.to_table(full_text_query=q, with_row_id=True)) == want, q
        assert rounded(ops.to_table(full_text_query=q, with_row_id=True)) == want, q


@pytest.mark.parametrize("builder", ["pylance", "lance_ops"])
def test_scores_with_unindexed_and_deleted_rows(tmp_path, builder):
    """Rows appended after the index and rows deleted since it was built: pylance scores indexed
    rows with the index's statistics (deleted documents included) and new rows with those and the
    new rows' together; lance_ops gives the same rows and scores, also after an index merge."""
    uri = str(tmp_path / "t")
    if builder == "pylance":
        lance.write_dataset(corpus(), uri, max_rows_per_file=50).create_scalar_index("text", "INVERTED")
    else:
        lf.write_dataset(corpus(), uri, max_rows_per_file=50).create_scalar_index("text", "INVERTED")
    lf.write_dataset(corpus(30, seed=9), uri, mode="append")
    lance.dataset(uri).delete("id < 20 and id > 3")
    queries = ("frodo", "happy puppy", "lance database", "fox")
    for step in ("appended and deleted", "merged"):
        py, ops = lance.dataset(uri), lf.dataset(uri)
        for q in queries:
            assert hits(ops.to_table(full_text_query=q, with_row_id=True)) == \
                hits(py.to_table(full_text_query=q, with_row_id=True)), (step, q)
        lf.dataset(uri).optimize_indices()  # merges the new rows into the index (deleted documents kept)


def test_two_indices_on_one_column(tmp_path):
    """Two full-text indices on one column (a single and a distributed build): each index's
    statistics are its own, so the scores are pylance's (not both corpora added up)."""
    ops, py = both(tmp_path, {"remove_stop_words": False})
    ops = _distributed(ops, lf, lf.Index, remove_stop_words=False)
    py = _distributed(py, lance, PyIndex, remove_stop_words=False)
    for q in ("frodo", "the happy puppy"):
        want = hits(py.to_table(full_text_query=q, with_row_id=True))
        assert hits(ops.to_table(full_text_query=q, with_row_id=True)) == want
        assert hits(lance.dataset(ops.uri).to_table(full_text_query=q, with_row_id=True)) == want
