"""A battery of bad inputs and faults against the real Edge store, the encoder, the CLI (subprocesses) and the
LlamaIndex store: each ends in a typed :class:`~lmk_rag.errors.LmkRagError` (the CLI: one ``error:`` line and a
non-zero status) or a correct result, and what was stored before each bad call is intact afterwards."""

from __future__ import annotations

import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.errors import (
    CorruptStoreError,
    EmptyTextError,
    InvalidInputError,
    LmkRagError,
    ModelNotFoundError,
    SettingsMismatchError,
    StoreError,
    StoreNotFoundError,
    StoreReadOnlyError,
    StoreUnavailableError,
    VectorSizeError,
)
from lmk_rag.store import EncodedQuery, FieldCondition, Filter, LandmarkStore, NodeRecord, ServerOptions, StorageOptions

LMK_RAG = str(Path(sys.executable).parent / "lmk-rag")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory, minilm_encoder, docs) -> LandmarkStore:
    """A real Edge store of four real pages, open for the whole module."""
    store = LandmarkStore(tmp_path_factory.mktemp("hostile") / "store", encoder=minilm_encoder)
    first = list(docs.items())[:4]
    store.upsert_documents([(doc_id, text, {"n": i, "tag": "x"}) for i, (doc_id, text) in enumerate(first)])
    yield store
    store.close()


@pytest.fixture
def intact(filled: LandmarkStore, docs) -> Callable[[], None]:
    """A check that the store still holds exactly what it held, and still finds a page by its own words."""
    before = (filled.doc_ids(), filled.count())
    doc_id, text = next(iter(docs.items()))

    def check() -> None:
        assert (filled.doc_ids(), filled.count()) == before
        assert filled.search(text[:150], k=1)[0].doc_id == doc_id

    return check


BAD_METADATA = [uuid.uuid4(), math.nan, math.inf, object(), b"bytes", 2**80, np.array([1, 2]), np.float32(1.0),
                [1, {"deep": object()}], [float("nan")]]


@pytest.mark.parametrize("value", BAD_METADATA, ids=lambda v: type(v).__name__)
def test_metadata_that_cannot_round_trip_is_refused(filled, intact, value) -> None:
    with pytest.raises(InvalidInputError, match="metadata"):
        filled.upsert_document("new.txt", "A page about archives.", {"key": value})
    intact()


@pytest.mark.parametrize(
    "metadata",
    [{1: "int key"}, "a string", ["a", "list"], {"a.b": 1}, {"": 1}, {"x[0]": 1}, {"outer": [{"in.ner": 1}]}],
    ids=["int-key", "str", "list", "dotted-key", "empty-key", "bracket-key", "nested-dotted-key"],
)
def test_metadata_of_the_wrong_shape_is_refused(filled, intact, metadata) -> None:
    with pytest.raises(InvalidInputError):
        filled.upsert_document("new.txt", "A page about archives.", metadata)
    intact()


@pytest.mark.parametrize(
    "doc_id, text, error",
    [(None, "t", InvalidInputError), (5, "t", InvalidInputError), ("", "t", InvalidInputError),
     ("\ud800", "t", InvalidInputError), ("d", None, InvalidInputError), ("d", b"bytes", InvalidInputError),
     ("d", 5, InvalidInputError), ("d", "", EmptyTextError), ("d", " \n\t", EmptyTextError),
     ("d", "lone \ud800 surrogate", InvalidInputError)],
)
def test_bad_documents_are_refused(filled, intact, doc_id, text, error) -> None:
    with pytest.raises(error):
        filled.upsert_document(doc_id, text)
    intact()


def test_a_doc_id_twice_in_one_call_is_refused(filled, intact) -> None:
    with pytest.raises(InvalidInputError, match="twice"):
        filled.upsert_documents([("same", "one text", None), ("same", "another text", None)])
    intact()


@pytest.mark.parametrize(
    "documents, words",
    [("a page", "iterable"), ({"d": "text"}, "iterable"), (5, "iterable"), ([("d",)], "1 items"),
     ([("d", "t", None, "extra")], "4 items"), (["just text"], "str"), ([None], "NoneType")],
    ids=["str", "dict", "int", "one-item", "four-items", "bare-text", "none-item"],
)
def test_documents_of_the_wrong_shape_are_refused(filled, intact, documents, words) -> None:
    with pytest.raises(InvalidInputError, match=words):
        filled.upsert_documents(documents)
    intact()


def test_documents_without_metadata_and_from_a_generator(filled, docs) -> None:
    _doc_id, text = list(docs.items())[5]
    before = filled.count_documents()
    assert filled.upsert_documents(iter([("pair.txt", text)])) >= 1  # (doc_id, text): no metadata
    assert filled.count_documents() == before + 1
    assert filled.search(text[:150], k=1)[0].doc_id == "pair.txt"
    assert filled.delete_document("pair.txt") and filled.count_documents() == before


@pytest.mark.parametrize("doc_id", [None, "", 5])
def test_deleting_a_bad_doc_id_is_refused(filled, intact, doc_id) -> None:
    with pytest.raises(InvalidInputError, match="doc_id"):
        filled.delete_document(doc_id)
    intact()


@pytest.mark.parametrize("limit", [0, -3, 2.5, "100", True])
def test_bad_candidate_counts_are_refused(filled, intact, limit) -> None:
    query = filled.encoder.encode_queries("archives of files")
    with pytest.raises(InvalidInputError, match="prefetch_limit"):
        filled.search_encoded(query, prefetch_limit=limit)
    with pytest.raises(InvalidInputError, match="candidates"):
        filled.search_mmr("archives of files", candidates=limit)
    intact()


@pytest.mark.parametrize(
    "kwargs",
    [{"k": "5"}, {"k": 2.5}, {"k": 0}, {"k": -1}, {"k": True}, {"k": None}, {"rerank": "bogus"}, {"alpha": 1.5},
     {"alpha": -0.1}, {"alpha": "0.5"}, {"alpha": math.nan}, {"filter": "section=1"}, {"filter": [("tag", "x")]},
     {"filter": {"tag": {"nested": 1}}}, {"filter": {"tag": object()}}, {"rerank": "static"}, {"k": 2**70},
     {"filter": {"n": math.nan}}, {"filter": {"n": [1, math.inf]}}, {"filter": {"": 1}}],
    ids=lambda kwargs: repr(kwargs),
)
def test_bad_search_arguments_are_typed_errors(filled, intact, kwargs) -> None:
    with pytest.raises(LmkRagError):
        filled.search("archives of files", **kwargs)
    intact()


@pytest.mark.parametrize("query", ["", "   ", None, 5, b"bytes"])
def test_bad_queries_are_typed_errors(filled, intact, query) -> None:
    with pytest.raises(InvalidInputError):
        filled.search(query)
    intact()


def test_odd_but_valid_searches_give_correct_results(filled, intact, docs) -> None:
    assert filled.search("the and of", k=3)  # stop words only: the rerank alone ranks
    assert filled.search("zzzqqq unmatched", k=3, alpha=0.0) == []  # BM25 alone, no term matches: nothing
    assert filled.search("archives", k=3, filter={"tag": None}) == []  # None means "missing": every page has it
    assert filled.search("archives", k=3, filter={"tag": []}) == []  # an empty "any of" matches nothing
    assert {h.doc_id for h in filled.search("archives", k=10, filter={"n": 1.0})} == {list(docs)[1]}  # float 1.0 = 1
    assert len(filled.search("x" * 20_000, k=2)) == 2  # a query of many chunks
    intact()


def test_bad_node_records_are_refused(filled, intact) -> None:
    good = filled.get_nodes(filter={"n": 0})[0]
    cases: list[tuple[str, list[NodeRecord], type[Exception]]] = [
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), np.ones(8, np.float32), good.chunk_vectors)], VectorSizeError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), good.vector, np.ones((2, 9), np.float32))], VectorSizeError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), good.vector, np.ones((0, 384), np.float32))], VectorSizeError),
        ("x", [], InvalidInputError),
        ("x", [good], InvalidInputError),  # a record of another document
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), good.vector, good.chunk_vectors)] * 2, InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "\ud800", (0, 1), good.vector, good.chunk_vectors)], InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), good.vector, good.chunk_vectors, {"d": b"x"})], InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), np.full(384, np.nan, np.float32), good.chunk_vectors)],
         InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), np.zeros(384, np.float32), good.chunk_vectors)], InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), good.vector, np.vstack([good.chunk_vectors, np.zeros(384)]))],
         InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1), good.vector, good.chunk_vectors * np.inf)], InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (5, 1), good.vector, good.chunk_vectors)], InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (-1, 1), good.vector, good.chunk_vectors)], InvalidInputError),
        ("x", [NodeRecord("x#0", "x", "t", (0, 1.5), good.vector, good.chunk_vectors)], InvalidInputError),
    ]
    for doc_id, records, error in cases:
        with pytest.raises(error):
            filled.upsert_encoded_document(doc_id, records)
    with pytest.raises(SettingsMismatchError):
        static = np.ones((2, 16), np.float32)
        filled.search_encoded(EncodedQuery(good.vector, good.chunk_vectors, static_vectors=static), rerank="static")
    for vector, chunks in ((np.full(384, np.nan), good.chunk_vectors), (np.zeros(384), good.chunk_vectors),
                           (good.vector, np.zeros((2, 384)))):
        with pytest.raises(InvalidInputError, match=r"NaN|zeros"):
            filled.search_encoded(EncodedQuery(vector, chunks))
    for call in (lambda: filled.get_nodes(node_ids="x#0"), lambda: filled.delete_nodes(node_ids="x#0")):
        with pytest.raises(InvalidInputError, match="node_ids"):
            call()
    intact()


def test_filters_of_the_wrong_shape_are_refused() -> None:
    for make in (lambda: FieldCondition("a", "like", 1), lambda: FieldCondition("a", "in", "abc"),
                 lambda: FieldCondition("a", "gt", "3"), lambda: Filter(must=[("a", 1)])):
        with pytest.raises(InvalidInputError):
            from lmk_rag.store.edge import EdgeConditions
            from lmk_rag.store.filters import translate

            translate(make(), EdgeConditions())


def test_a_store_path_that_is_a_file_names_the_argument_not_a_damaged_store(tmp_path: Path, minilm_encoder) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("not a folder")
    for opening in ({"path": file}, {"path": file, "read_only": True}, {"path": file, "create": False},
                    {"location": str(file)}):
        with pytest.raises(InvalidInputError, match=f"{file} is a file, not a store folder") as raised:
            LandmarkStore(**opening, encoder=minilm_encoder)
        assert not isinstance(raised.value, CorruptStoreError)  # whose remedy, rebuilding, is wrong here
    said = CliRunner().invoke(app, ["query", "tar", "--store", str(file)])
    assert said.exit_code == 1 and said.stderr.strip() == (
        f"error: {file} is a file, not a store folder: give the folder of a lmk-rag store, or the path of a new "
        "folder to create one there")
    assert file.read_text() == "not a folder"


def test_bad_store_openings(tmp_path: Path, minilm_encoder) -> None:
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    cases: list[tuple[Callable[[], Any], type[Exception]]] = [
        (lambda: LandmarkStore(tmp_path / "file"), InvalidInputError),
        (lambda: LandmarkStore(tmp_path / "foreign"), CorruptStoreError),
        (lambda: LandmarkStore(tmp_path / "missing", create=False), StoreError),
        (lambda: LandmarkStore(tmp_path / "missing", read_only=True), StoreError),
        (lambda: LandmarkStore(url="http://127.0.0.1:9", create=False), StoreUnavailableError),
        (lambda: LandmarkStore(tmp_path / "a", url="http://127.0.0.1:9"), InvalidInputError),
        (lambda: LandmarkStore(tmp_path / "q", storage=StorageOptions(quantization="int4")), InvalidInputError),
        (lambda: LandmarkStore(tmp_path / "al", alpha=2), InvalidInputError),
        (lambda: LandmarkStore(tmp_path / "s", server=ServerOptions(shard_number=2)), InvalidInputError),
    ]
    for make, error in cases:
        with pytest.raises(error):
            make().close()
    assert sorted(p.name for p in (tmp_path / "foreign").iterdir()) == ["notes.txt"]  # nothing written there


def test_reading_where_there_is_no_store_writes_nothing(tmp_path: Path, minilm_encoder) -> None:
    (tmp_path / "empty").mkdir()
    for make in (
        lambda: LandmarkStore(tmp_path / "empty", read_only=True),
        lambda: LandmarkStore(tmp_path / "empty", create=False),
        lambda: LandmarkStore(location=str(tmp_path / "local"), read_only=True),
        lambda: LandmarkStore(location=":memory:", read_only=True),
    ):
        with pytest.raises(StoreNotFoundError, match="no lmk-rag store"):
            make().close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and not any((tmp_path / "empty").iterdir())


@pytest.mark.parametrize("collection", ["", "a/b", "../up", "x:y", "nul\0", "c" * 256, 7])
def test_bad_collection_names_are_refused_before_anything_is_written(tmp_path: Path, collection) -> None:
    with pytest.raises(InvalidInputError, match="collection_name"):
        LandmarkStore(location=str(tmp_path / "local"), collection_name=collection)
    assert not (tmp_path / "local").exists()


@pytest.mark.parametrize("url", ["not a url", "ftp://host", "http://[::1"])
def test_urls_qdrant_client_cannot_parse_are_refused(url) -> None:
    with pytest.raises(InvalidInputError, match="cannot use url"):
        LandmarkStore(url=url)


def test_a_read_only_handle_refuses_every_write(tmp_path: Path, minilm_encoder) -> None:
    with LandmarkStore(tmp_path / "s", encoder=minilm_encoder) as store:
        store.upsert_document("a", "A page about archives and compression.")
    with LandmarkStore(tmp_path / "s", read_only=True) as reader:
        assert reader.doc_ids() == ["a"] and reader.search("archives", k=1)[0].doc_id == "a"
        for write in (lambda: reader.upsert_document("b", "text"), lambda: reader.delete_document("a"), reader.clear):
            with pytest.raises(StoreReadOnlyError):
                write()
        assert reader.doc_ids() == ["a"]


def test_read_only_folder_as_an_unprivileged_user(tmp_path: Path, minilm_encoder) -> None:
    """root ignores file modes, so the read-only folder is tried by the user ``nobody``."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a check as the unprivileged user nobody")
    folder = Path(tempfile.mkdtemp(prefix="lmk_ro_"))
    try:
        with LandmarkStore(folder / "store", encoder=minilm_encoder) as store:
            store.upsert_document("a", "A page about archives.")
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(folder)], check=True)
        code = ("from lmk_rag.store import LandmarkStore\n"
                "import sys\n"
                "for kw in ({}, {'read_only': True}):\n"
                "    try:\n"
                f"        LandmarkStore({str(folder / 'store')!r}, **kw)\n"
                "    except Exception as e:\n"
                "        print(type(e).__name__)\n")
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        result = subprocess.run([*as_nobody, sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert result.stdout.split() == ["StoreReadOnlyError", "StoreReadOnlyError"], result.stderr
        cli = subprocess.run([*as_nobody, LMK_RAG, "query", "archives", "--store", str(folder / "store")],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 1 and cli.stderr.strip().startswith("error: ") and "Traceback" not in cli.stderr
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(folder)], check=True)
        shutil.rmtree(folder)


@pytest.mark.parametrize(
    "texts, error",
    [(None, InvalidInputError), ([], InvalidInputError), ([5], InvalidInputError), (["  "], EmptyTextError),
     (["ok", "\ud800"], InvalidInputError), (b"bytes", InvalidInputError), (7, InvalidInputError)],
    ids=["none", "empty-list", "int-item", "blank", "surrogate", "bytes", "int"],
)
def test_bad_encoder_inputs(minilm_encoder, texts, error) -> None:
    with pytest.raises(error):
        minilm_encoder.encode_documents(texts)


@pytest.mark.parametrize("texts", [None, 5, [None], ["ok", b"bytes"]], ids=["none", "int", "none-item", "bytes-item"])
def test_bad_static_encoder_inputs(texts) -> None:
    from lmk_rag.static.document_encoder import StaticDocumentEncoder

    with pytest.raises(InvalidInputError):
        StaticDocumentEncoder().encode_documents(texts)


@pytest.mark.parametrize(
    "kwargs, error",
    [({"granularity": "abc"}, InvalidInputError), ({"granularity": 0}, InvalidInputError),
     ({"granularity": -3}, InvalidInputError), ({"context": "page"}, InvalidInputError),
     ({"pooling": "median"}, InvalidInputError), ({"chunk_vector": "cls"}, InvalidInputError),
     ({"batch_size": 0}, InvalidInputError), ({"window_overlap": -1}, InvalidInputError),
     ({"window_overlap": "64"}, InvalidInputError), ({"batch_size": 2.5}, InvalidInputError),
     ({"max_length": 0}, InvalidInputError), ({"max_length": 100_000}, InvalidInputError),
     ({"sentence_max_tokens": 0}, InvalidInputError), ({"device": "cuda:7"}, InvalidInputError),
     ({"device": "no-such-device"}, InvalidInputError),
     ({"model_name": "no-such/model-xyz"}, ModelNotFoundError)],
    ids=lambda v: repr(v),
)
def test_bad_encoder_settings(kwargs, error) -> None:
    from lmk_rag.encoder import LandmarkEncoder

    with pytest.raises(error):
        LandmarkEncoder(**kwargs)


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path: Path) -> None:
    import torch

    from lmk_rag.train.trainer import Trainer

    class Payload:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1, "evil": Payload()}, path)
    trainer = Trainer.__new__(Trainer)  # only load_checkpoint's file handling is under test
    trainer.device = torch.device("cpu")
    with pytest.raises(InvalidInputError, match="not a checkpoint"):
        trainer.load_checkpoint(path)
    assert not (tmp_path / "pwned").exists()
    assert pickle.loads(pickle.dumps(1)) == 1


CLI_CASES = [
    (["encode", ""], "empty"),
    (["encode", "x", "--granularity", "abc"], "granularity"),
    (["encode", "x", "--granularity", "0"], "granularity"),
    (["encode", "x", "--granularity", "-3"], "granularity"),
    (["encode", "x", "--model", "no-such/x"], "no-such/x"),
    (["ingest", "STORE_DIR", "--store", "NEW", "--document-batch-size", "-1"], "document-batch-size"),
    (["query", "x", "--store", "STORE", "-k", "0"], "-k"),
    (["query", "x", "--store", "STORE", "--alpha", "2"], "alpha"),
    (["query", "x", "--store", "STORE", "--rerank", "bogus"], "rerank"),
    (["query", "x", "--store", "MISSING"], "no lmk-rag store"),
    (["info", "--store", "MISSING"], "no lmk-rag store"),
    (["check", "--store", "MISSING"], "no lmk-rag store"),
    (["query", "x", "--store", "STORE_DIR"], "no lmk-rag store"),
    (["query", "x", "--url", "not a url"], "cannot use url"),
    (["info", "--location", "MISSING"], "no lmk-rag store"),
    (["query", "x", "--store", "STORE", "--collection-name", "other"], "--collection-name names a collection"),
    (["ingest", "MISSING", "--store", "NEW"], "no such file"),
    (["query", "x"], "exactly one of"),
    (["nosuchcommand"], "No such command"),
    (["eval", "MISSING", "-p", "bm25"], "MISSING"),
]


@pytest.fixture(scope="module")
def closed_store(tmp_path_factory: pytest.TempPathFactory, minilm_encoder) -> Path:
    """A store folder nobody holds open (the CLI opens it in another process)."""
    folder = tmp_path_factory.mktemp("closed") / "store"
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.upsert_document("a.txt", "A page about archives and compression.")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("args, words", CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_cli_fails_with_one_error_line(tmp_path: Path, closed_store: Path, args, words) -> None:
    names = {"STORE": str(closed_store), "MISSING": str(tmp_path / "missing"), "NEW": str(tmp_path / "new"),
             "STORE_DIR": str(tmp_path)}
    argv = [names.get(a, a) for a in args]
    result = subprocess.run([LMK_RAG, *argv], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert result.returncode in (1, 2), result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert words.replace("MISSING", names["MISSING"]) in lines[0]
