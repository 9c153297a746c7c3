"""Full-text (INVERTED) segments added by lance_ops' ``optimize_indices``: an FTS index built by
pylance 14 or lancedb 0.40, with and without stable row ids, at file formats 2.0 and 2.2; lance_ops
appends and deletes rows and indexes the new ones.  pylance and lancedb then answer from the index
(plan ``MatchQuery``, no ``FlatMatchQuery``; nothing unindexed) exactly as brute force, with the
BM25 scores pylance's own ``optimize_indices`` gives on a copy of the same data, and pylance's
maintenance on top keeps the answers right.
"""

import re
import shutil
from datetime import timedelta

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from file_versions import pin_file_version
from templates import Templates

import lance_ops.format as lf
from lance_ops.format.index.build.text_tokens import DEFAULT_PARAMS, TokenizerParams, tokenize
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section

TABLE = "docs"
FRAG = 150
#: words of the generated documents: case, stems, accents, stop words, hyphens, a long token
VOCAB = ("Melon melons fox Foxes quick running runs ran café CAFE naïve Straße data-lake e-mail the and "
         "is of über 2024 x3 brown dog dogs lazy jumped Ærø ŋaŋ ½ ĸaĸ " + "y" * 45 + " " + "z" * 40 + " "
         + "w" * 39).split()
#: queries compared with pylance's own segment (ids and BM25 scores)
QUERIES = ("melon", "fox", "cafe", "naive", "run", "running", "lake", "uber", "2024", "dogs lazy", "strasse",
           "the", "quick brown", "aero", "nan", "12", "kak", "w" * 39)
#: words found only in one spelling (case aside): brute force is a regular expression
BRUTE = {"quick": "quick", "lake": "lake", "cafe": "caf[eé]", "brown": "brown", "jumped": "jumped", "2024": "2024"}
#: a token ends at the text's ends or any non-alphanumeric character (RE2's \b is ASCII-only)
_BEFORE, _AFTER = r"(?:^|[^\p{L}\p{N}])", r"(?:$|[^\p{L}\p{N}])"


@pytest.fixture(params=("2.0", "2.2"), autouse=True)
def file_version(request, monkeypatch):
    """This suite runs at 2.0 and 2.2 (overrides the interop conftest's three versions)."""
    return pin_file_version(monkeypatch, request.param)


def docs(n: int, start: int) -> pa.Table:
    rng = np.random.default_rng(start)
    words = np.array(VOCAB)
    text = [" ".join(words[rng.integers(0, len(words), rng.integers(0, 9))]) for _ in range(n)]
    text[0] = None  # a null document, and (when drawn) empty ones: no tokens
    return pa.table({"id": pa.array(np.arange(start, start + n), pa.int64()), "text": pa.array(text, pa.string())})


def build(root: str, client: str, stable: bool, file_version: str) -> str:
    uri = f"{root}/{TABLE}.lance"
    if client == "pylance":
        ds = lance.write_dataset(docs(2 * FRAG, 0), uri, max_rows_per_file=FRAG, enable_stable_row_ids=stable,
                                 data_storage_version=file_version)
        ds.create_scalar_index("text", "INVERTED")
    else:
        opts = {"new_table_enable_stable_row_ids": "true"} if stable else None
        tbl = lancedb.connect(root, storage_options=opts).create_table(TABLE, docs(FRAG, 0),
                                                                       data_storage_version=file_version)
        tbl.add(docs(FRAG, FRAG))
        tbl.create_fts_index("text")
    return uri


_TEMPLATES = Templates()


@pytest.fixture
def grown(request, tmp_path_factory, tmp_path, file_version):
    """An FTS-indexed table (built once per client / row-id mode / format, copied per test) to
    which lance_ops appended two fragments and deleted rows; (uri, root)."""
    client, stable = request.param

    def grow() -> str:
        root = str(tmp_path_factory.mktemp(f"fts_{client}_{int(stable)}"))
        uri = build(root, client, stable, file_version)
        lf.write_dataset(docs(FRAG, 2 * FRAG), uri, mode="append")
        lf.write_dataset(docs(FRAG, 3 * FRAG), uri, mode="append")
        lf.dataset(uri).delete("id % 7 = 3")
        return root

    root = _TEMPLATES.copy((client, stable, file_version), grow, tmp_path / "db")
    return f"{root}/{TABLE}.lance", root


def segments(uri: str) -> list[IndexMetadata]:
    return [i for i in decode_index_section(lf.dataset(uri).manifest.index_section) if i.name == "text_idx"]


def expected(uri: str, word: str) -> set[int]:
    t = lance.dataset(uri).to_table(columns=["id", "text"])
    hit = pc.fill_null(pc.match_substring_regex(pc.utf8_lower(t["text"]), _BEFORE + BRUTE[word] + _AFTER), False)
    return set(t["id"].filter(hit).to_pylist())


def wrong_answers(uri: str, root: str) -> list[str]:
    """FTS queries whose pylance or lancedb answer differs from brute force."""
    ds = lance.dataset(uri)
    tbl = lancedb.connect(root).open_table(TABLE)
    bad = []
    for word in BRUTE:
        want = expected(uri, word)
        mine = set(ds.to_table(columns=["id"], full_text_query=word)["id"].to_pylist())
        theirs = set(tbl.search(word, query_type="fts").select(["id"]).limit(100_000).to_arrow()["id"].to_pylist())
        bad += [f"{who} {word}: {len(got)} of {len(want)}" for who, got in (("pylance", mine), ("lancedb", theirs))
                if got != want]
    return bad


def scores(uri: str) -> dict[str, list[tuple[int, float]]]:
    ds = lance.dataset(uri)
    out = {}
    for q in QUERIES:
        t = ds.to_table(columns=["id"], full_text_query=q)
        out[q] = sorted(zip(t["id"].to_pylist(), t["_score"].to_pylist(), strict=True))
    return out


def uses_index(uri: str) -> bool:
    plan = lance.dataset(uri).scanner(columns=["id"], full_text_query="melon").explain_plan()
    return "MatchQuery" in plan and "FlatMatchQuery" not in plan


CASES = [("pylance", False), ("pylance", True), ("lancedb", False), ("lancedb", True)]
IDS = ["pylance-addresses", "pylance-stable", "lancedb-addresses", "lancedb-stable"]


@pytest.mark.parametrize("grown", CASES, indirect=True, ids=IDS)
def test_new_rows_get_a_full_text_segment_pylance_and_lancedb_search(grown, tmp_path):
    uri, root = grown
    theirs = str(tmp_path / "theirs" / f"{TABLE}.lance")
    shutil.copytree(uri, theirs)
    before = segments(uri)
    assert not uses_index(uri) and lance.dataset(uri).index_statistics("text_idx")["num_unindexed_rows"] > 0

    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(theirs).optimize.optimize_indices(num_indices_to_merge=0)

    after = segments(uri)
    assert [s.uuid for s in after[:-1]] == [s.uuid for s in before]  # a new segment, the old ones kept
    new = after[-1]
    assert new.fragment_ids == {2, 3} and new.index_version == 2 and new.details == before[0].details
    assert sorted(f.path for f in new.files or ()) == sorted(f.path for f in before[0].files or ())
    assert lance.dataset(uri).index_statistics("text_idx")["num_unindexed_rows"] == 0
    assert uses_index(uri)
    assert wrong_answers(uri, root) == []
    # the same ids and BM25 scores as pylance's own segment over the same rows (folded, stemmed words too)
    mine = scores(uri)
    assert mine == scores(theirs) and all(mine[q] for q in ("melon", "cafe", "run", "aero", "nan", "12", "kak", "w" * 39))

    # pylance's own maintenance on top: its merge of the newest segment, then of all (its or
    # lancedb's segment with lance_ops' one)
    lance.dataset(uri).optimize.optimize_indices()
    assert wrong_answers(uri, root) == [] and scores(uri) == scores(theirs)
    lance.dataset(uri).optimize.optimize_indices(num_indices_to_merge=2)
    assert len(segments(uri)) == 1 and wrong_answers(uri, root) == []
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=4 * FRAG)
    assert wrong_answers(uri, root) == []
    lance.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    assert wrong_answers(uri, root) == [] and uses_index(uri)


@pytest.mark.parametrize("grown", CASES, indirect=True, ids=IDS)
def test_default_merge_rebuilds_the_newest_segment_with_the_new_rows(grown, tmp_path):
    """``num_indices_to_merge=1`` (the default): one segment over the newest segment's fragments
    and the new ones, replacing it, as pylance does -- keeping the documents of rows deleted
    since the old segment was built, so the BM25 statistics (and scores) are pylance's."""
    uri, root = grown
    theirs = str(tmp_path / "theirs" / f"{TABLE}.lance")
    shutil.copytree(uri, theirs)
    lf.dataset(uri).optimize.optimize_indices()
    lance.dataset(theirs).optimize.optimize_indices()
    mine, ref = segments(uri), segments(theirs)
    assert len(mine) == len(ref) == 1 and mine[0].fragment_ids == ref[0].fragment_ids == {0, 1, 2, 3}
    assert wrong_answers(uri, root) == [] and uses_index(uri)
    assert scores(uri) == scores(theirs)
    # nothing new and one segment: no commit
    v = lf.dataset(uri).version
    lf.dataset(uri).optimize.optimize_indices()
    assert lf.dataset(uri).version == v
    # lance_ops' own compaction carries the segment (remapped, or followed with stable row ids)
    m = lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=4 * FRAG)
    assert m.fragments_removed == 4 and not m.fragments_skipped
    assert wrong_answers(uri, root) == [] and uses_index(uri)
    assert lance.dataset(uri).index_statistics("text_idx")["num_unindexed_rows"] == 0


def test_positions_and_list_indices_are_extended(tmp_path):
    """An index with positions (phrase queries) and one over a list column are extended by
    lance_ops' ``optimize_indices`` (a ``_position`` column, a list row as one document): pylance
    then answers match and phrase queries with the rows and BM25 scores its own
    ``optimize_indices`` gives on a copy of the same data."""
    uri, copy = str(tmp_path / "t.lance"), str(tmp_path / "copy.lance")

    def with_tags(t: pa.Table) -> pa.Table:
        return t.append_column("tags", pa.array([[w, w] if w else None for w in t["text"].to_pylist()],
                                                pa.list_(pa.string())))

    ds = lance.write_dataset(with_tags(docs(FRAG, 0)), uri)
    ds.create_scalar_index("text", "INVERTED", with_position=True, remove_stop_words=False)
    ds.create_scalar_index("tags", "INVERTED")
    lf.write_dataset(with_tags(docs(FRAG, FRAG)), uri, mode="append")
    shutil.copytree(uri, copy)
    assert set(lf.optimizable_index_names(lf.dataset(uri).manifest)) == {"text_idx", "tags_idx"}
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(copy).optimize.optimize_indices(num_indices_to_merge=0)
    ours, theirs = lance.dataset(uri), lance.dataset(copy)
    for name in ("text_idx", "tags_idx"):
        assert ours.stats.index_stats(name)["num_unindexed_rows"] == 0

    def answer(d, q):
        t = d.to_table(full_text_query=q, with_row_id=True)
        return sorted(zip(t["_rowid"].to_pylist(), t["_score"].to_pylist(), strict=True))

    from lance.query import MatchQuery, PhraseQuery
    for q in (PhraseQuery("quick brown", "text"), PhraseQuery("the dog", "text", slop=1), MatchQuery("fox", "text"),
              MatchQuery("melon", "tags"), MatchQuery("melon fox", "tags")):
        assert answer(ours, q) == answer(theirs, q)
    two = next(t.split()[:2] for t in docs(FRAG, FRAG)["text"].to_pylist()[1:] if t and len(t.split()) > 1)
    phrase = PhraseQuery(" ".join(two), "text")  # a phrase of an appended (lance_ops-indexed) row
    assert answer(ours, phrase) == answer(theirs, phrase) and answer(ours, phrase)


def test_tokenizer_matches_pylance_on_its_defaults():
    """Split on non-alphanumerics, drop tokens of 40 bytes or more, lower-case, Snowball-stem,
    drop stop words (after stemming), fold to ASCII (last)."""
    text = pa.array(["The QUICK foxes were running; naïve Café-owners don't ÜBER-care", None, "",
                     "x" * 39 + " " + "y" * 40 + " having being doing any"])
    toks = tokenize(text, TokenizerParams(DEFAULT_PARAMS))
    assert toks.row.tolist() == [0] * 10 + [3] * 2
    assert toks.token.to_pylist() == ["quick", "fox", "run", "naiv", "cafe", "owner", "don", "t", "uber", "care",
                                      "x" * 39, "ani"]
    assert re.fullmatch(r"[a-z0-9]+", "".join(toks.token.to_pylist()))
