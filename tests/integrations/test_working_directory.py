"""Where an application meets the store, from a second working directory (issue 61): ``to_dict`` records absolute
folders and ``from_dict`` never creates an empty store; a store built from a relative model folder reopens from
anywhere, or names the folder it looked for; pickling carries the configuration, not the open store or the model
weights. Real MiniLM (or the tiny random BERT where a model folder of the user's is the point), real Edge shards."""

from __future__ import annotations

import logging
import pickle
import shutil
from pathlib import Path

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery
from typer.testing import CliRunner

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.cli import app
from lmk_rag.errors import InvalidInputError, ModelNotFoundError, StoreNotFoundError
from lmk_rag.store import LandmarkStore

TEXTS = {"tar": "the tar archiver bundles many files into one archive", "cp": "cp copies a file to another place"}


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """Two working directories: where a store is built, and another one."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    return first, second


def _fill(vector_store: LandmarkVectorStore) -> None:
    vector_store.store.upsert_documents(list(TEXTS.items()))


@pytest.fixture
def built(places: tuple[Path, Path], embed_model: LandmarkEmbedding, monkeypatch: pytest.MonkeyPatch) -> dict:
    """``to_dict()`` of a store built as ``LandmarkVectorStore(path="./s3")`` in the first directory (the working
    directory afterwards), holding :data:`TEXTS`."""
    monkeypatch.chdir(places[0])
    with LandmarkVectorStore(path="./s3", embed_model=embed_model) as vector_store:
        _fill(vector_store)
        return vector_store.to_dict()


def test_to_dict_records_absolute_folders_and_from_dict_reopens_them_from_elsewhere(
    places: tuple[Path, Path], built: dict, embed_model: LandmarkEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = places
    with LandmarkVectorStore("docs", location="./local", embed_model=embed_model) as local:
        _fill(local)
        local_data = local.to_dict()
    assert built["path"] == str(first / "s3") and local_data["location"] == str(first / "local")
    monkeypatch.chdir(second)
    with LandmarkVectorStore.from_dict(built) as reopened, LandmarkVectorStore.from_dict(local_data) as local:
        assert reopened.store.count_documents() == local.store.count_documents() == len(TEXTS)
        assert reopened.store.where == str(first / "s3")
    assert list(second.iterdir()) == []  # no stray folder


def test_from_dict_refuses_a_store_that_is_not_there(
    places: tuple[Path, Path], built: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = places
    shutil.rmtree(first / "s3")
    monkeypatch.chdir(second)
    with pytest.raises(StoreNotFoundError, match=f"no lmk-rag store at {first / 's3'}"):
        LandmarkVectorStore.from_dict(built)
    with pytest.raises(StoreNotFoundError, match=str(second / "other")):
        LandmarkVectorStore.from_dict({**built, "path": "other"})
    assert not (first / "s3").exists() and list(second.iterdir()) == []


def _other_model(source: Path, folder: Path) -> None:
    """A model folder like ``source`` (same config and tokenizer) with other random weights."""
    import torch
    from transformers import BertConfig, BertModel

    shutil.copytree(source, folder)
    torch.manual_seed(1)
    BertModel(BertConfig.from_pretrained(source)).save_pretrained(folder)


def test_a_store_built_from_a_relative_model_folder_reopens_from_anywhere(
    places: tuple[Path, Path], tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = places
    shutil.copytree(tiny_model, first / "tiny_st")
    _other_model(tiny_model, second / "tiny_st")  # the same name in the second directory: another model
    monkeypatch.chdir(first)
    embedding = LandmarkEmbedding(model_name="./tiny_st")
    assert embedding.model_name == str(first / "tiny_st")
    with LandmarkVectorStore(path="./store", embed_model=embedding) as vector_store:
        _fill(vector_store)
        data = vector_store.to_dict()
        assert vector_store.store.settings["encoder"]["settings"]["model_name"] == str(first / "tiny_st")
        built = vector_store.query(VectorStoreQuery(query_str="tar archive", similarity_top_k=2)).ids
    monkeypatch.chdir(second)
    with LandmarkVectorStore.from_dict(data) as reopened:  # its model from the record: first/tiny_st
        assert reopened.query(VectorStoreQuery(query_str="tar archive", similarity_top_k=2)).ids == built
        assert reopened.as_index().as_retriever(similarity_top_k=1).retrieve("tar archive")
    said = CliRunner().invoke(app, ["query", "tar archive", "--store", str(first / "store"), "--nodes"])
    assert said.exit_code == 0 and "tar" in said.stdout, said.output
    shutil.rmtree(first / "tiny_st")
    with LandmarkVectorStore.from_dict(data) as reopened, pytest.raises(ModelNotFoundError,
                                                                         match=str(first / "tiny_st")):
        reopened.query(VectorStoreQuery(query_str="tar archive"))
    said = CliRunner().invoke(app, ["query", "tar archive", "--store", str(first / "store")])
    assert said.exit_code == 1 and str(first / "tiny_st") in said.stderr and "edited or damaged" not in said.stderr


def test_pickling_carries_the_configuration_and_reopens_the_store(
    places: tuple[Path, Path], embed_model: LandmarkEmbedding, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture
) -> None:
    first, second = places
    monkeypatch.chdir(first)
    with LandmarkVectorStore(path="./s3", embed_model=embed_model) as vector_store:
        _fill(vector_store)
        expected = vector_store.query(VectorStoreQuery(query_str="tar archive", similarity_top_k=2)).ids
        data, index = vector_store.to_dict(), vector_store.as_index()
        with caplog.at_level(logging.WARNING):
            pickled, pickled_index = pickle.dumps(vector_store), pickle.dumps(index)
        removed = [record.getMessage().split()[-1] for record in caplog.records
                   if "unpickleable" in record.getMessage()]
        assert not {"_store", "_encoder", "_embed_model"} & set(removed)  # (the index's own SentenceSplitter logs some)
    assert len(pickled) < 10_000 and len(pickled_index) < 100_000  # no model weights (MiniLM: ~90 MB)
    monkeypatch.chdir(second)
    with pickle.loads(pickled) as loaded:
        assert loaded.store.where == str(first / "s3") and loaded.to_dict() == data
        assert loaded.query(VectorStoreQuery(query_str="tar archive", similarity_top_k=2)).ids == expected
    loaded_index = pickle.loads(pickled_index)
    assert loaded_index.as_retriever(similarity_top_k=1).retrieve("tar archive")[0].node.ref_doc_id == "tar"
    loaded_index.vector_store.close()
    shutil.rmtree(first / "s3")
    with pytest.raises(StoreNotFoundError, match=str(first / "s3")):
        pickle.loads(pickled)


def test_pickling_a_store_given_what_to_dict_leaves_out_is_refused(tmp_path: Path, embed_model) -> None:
    def fusion(dense, sparse, alpha, top_k):  # pragma: no cover - never called
        return dense

    refused = pytest.raises(InvalidInputError, match=r"hybrid_fusion_fn.*to_dict\(\).*from_dict")
    with LandmarkVectorStore(path=tmp_path / "s", embed_model=embed_model, hybrid_fusion_fn=fusion) as store, refused:
        pickle.dumps(store)


def test_a_store_path_is_recorded_absolute(places: tuple[Path, Path], minilm_encoder,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = places
    monkeypatch.chdir(first)
    with LandmarkStore("s3", encoder=minilm_encoder) as store:
        assert store.where == str(first / "s3") and store.info()["location"] == str(first / "s3")
