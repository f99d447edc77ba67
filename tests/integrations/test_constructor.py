"""LandmarkVectorStore takes QdrantVectorStore's constructor vocabulary: each argument mapped with its meaning,
accepted with a warning, or refused with the reason; the async client is called natively."""

from __future__ import annotations

import asyncio
import inspect
import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode, VectorStoreQueryResult
from llama_index.vector_stores.qdrant import QdrantVectorStore
from llama_index.vector_stores.qdrant.utils import relative_score_fusion
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore
from llama_index.vector_stores.landmark.base import UNSUPPORTED
from lmk_rag.errors import InvalidInputError, SettingsMismatchError, StoreReadOnlyError, StoreUnavailableError
from lmk_rag.store import LandmarkStore, server
from lmk_rag.store.types import ServerOptions

TEXTS = [
    "gzip reduces the size of the named files using Lempel-Ziv coding.",
    "tar saves many files together into a single tape or disk archive.",
    "rsync copies files to and from remote hosts over ssh.",
]


def _nodes(embed_model: LandmarkEmbedding, metadata: list[dict[str, Any]] | None = None) -> list[TextNode]:
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-0")}
    return [TextNode(text=text, id_=f"n{i}", embedding=vector, relationships=source,
                     metadata=(metadata or [{}] * len(TEXTS))[i])
            for i, (text, vector) in enumerate(zip(TEXTS, embed_model.get_text_embedding_batch(TEXTS)))]


# ------------------------------------------------------------------ the vocabulary


def test_every_qdrant_vector_store_argument_is_taken_or_refused_with_a_reason() -> None:
    """Read from the installed QdrantVectorStore: a new upstream argument fails this test until it is decided."""
    ours = set(inspect.signature(LandmarkVectorStore.__init__).parameters)
    upstream = set(inspect.signature(QdrantVectorStore.__init__).parameters) - {"self", "kwargs"}
    assert upstream - ours == set(UNSUPPORTED)
    assert not set(UNSUPPORTED) & ours
    assert ours - upstream == {"self", "kwargs", "path", "location", "read_only", "create", "alpha", "store",
                               "embed_model", "static_encoder", "rerank"}  # no second copy of the store's options


@pytest.mark.parametrize("name", ["quantization", "on_disk", "hnsw_ef", "prefetch_limit", "node_tokens", "prefer_grpc"])
def test_other_store_options_go_through_a_store_object(tmp_path: Path, name: str) -> None:
    with pytest.raises(TypeError, match=rf"store=LandmarkStore\(\.\.\.\).* '{name}'"):
        LandmarkVectorStore(path=tmp_path / "s", **{name: None})
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_arguments_without_a_meaning_here_are_refused_with_the_reason(name: str) -> None:
    with pytest.raises(NotImplementedError, match=f"{name}=: .+"):
        LandmarkVectorStore("docs", client=QdrantClient(":memory:"), **{name: None})


def test_collection_name_is_the_only_positional_argument(embed_model: LandmarkEmbedding) -> None:
    client = QdrantClient(":memory:")
    with LandmarkVectorStore("docs", client=client, embed_model=embed_model) as vector_store:
        assert vector_store.collection_name == "docs" and vector_store.client is client
        assert isinstance(vector_store.store, LandmarkStore) and vector_store.store.collection_name == "docs"
        assert client.collection_exists("docs")
    with pytest.raises(TypeError):
        LandmarkVectorStore("docs", client)  # type: ignore[misc]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"aplha": 0.5}, "'aplha' \\(did you mean 'alpha'\\?\\)"),
    ({"collection": "docs"}, "'collection' \\(did you mean 'collection_name'\\?\\)"),
    ({"bm25": True}, "enable_hybrid="),
])
def test_unknown_arguments_are_a_type_error_naming_the_valid_ones(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message) as raised:
        LandmarkVectorStore("docs", client=QdrantClient(":memory:"), **kwargs)
    assert "Backend" not in str(raised.value)  # never an internal class


def test_an_edge_store_has_no_client_and_refuses_server_options(tmp_path: Path, embed_model) -> None:
    with LandmarkVectorStore(path=tmp_path / "edge", embed_model=embed_model) as vector_store:
        assert vector_store.client is None and vector_store.aclient is None and vector_store.collection_name is None
    for option in ({"collection_name": "docs"}, {"shard_number": 2}, {"parallel": 4}, {"max_retries": 1},
                   {"client_kwargs": {"https": True}}):
        with pytest.raises(InvalidInputError, match=f"{next(iter(option))}: only for qdrant-client backends"):
            LandmarkVectorStore(path=tmp_path / "other", embed_model=embed_model, **option)
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"shard_number": 2}, "qdrant-client local mode has no shards"),
    ({"prefer_grpc": True}, "local mode has no server"),
    ({"timeout": 5}, "local mode has no server"),
    ({"parallel": 0}, "parallel must be an integer"),
    ({"max_retries": -1}, "max_retries must be an integer from 0"),
    ({"client_kwargs": {"url": "http://x"}}, "client_kwargs may not set \\['url'\\]"),
])
def test_server_options_that_cannot_apply_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        LandmarkStore(location=":memory:", server=ServerOptions(**kwargs))


def test_client_options_beside_a_ready_client_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="configured already"):
        LandmarkStore(client=QdrantClient(":memory:"), server=ServerOptions(client_kwargs={"https": True}))


@pytest.mark.parametrize("kwargs", [{"enable_hybrid": "yes"}, {"index_doc_id": 0}, {"text_key": 5}],
                         ids=lambda kwargs: next(iter(kwargs)))
def test_flags_of_the_wrong_type_are_refused_before_anything_is_made(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match=next(iter(kwargs))):
        LandmarkVectorStore(path=tmp_path / "s", **kwargs)
    assert not (tmp_path / "s").exists()


def test_enable_hybrid_is_bm25_on_or_off(embed_model: LandmarkEmbedding, tmp_path: Path) -> None:
    with LandmarkVectorStore(path=tmp_path / "dense", enable_hybrid=False, embed_model=embed_model) as dense:
        assert dense.store.bm25 is False
    with pytest.raises(SettingsMismatchError, match="bm25"):
        LandmarkVectorStore(path=tmp_path / "dense", enable_hybrid=True, embed_model=embed_model)
    with pytest.warns(UserWarning, match="Qdrant's own BM25"):
        hybrid = LandmarkVectorStore(path=tmp_path / "fast", fastembed_sparse_model="Qdrant/bm25",
                                     embed_model=embed_model)
    with hybrid:
        assert hybrid.store.bm25 is True


def test_batch_size_is_points_per_upsert_request(embed_model: LandmarkEmbedding) -> None:
    class CountingClient(QdrantClient):  # the real local-mode client, counting what each upsert carries
        sizes: ClassVar[list[int]] = []

        def upsert(self, collection_name: str, points: Any, **kwargs: Any) -> Any:
            self.sizes.append(len(points))
            return super().upsert(collection_name, points, **kwargs)

    client = CountingClient(":memory:")
    with LandmarkVectorStore("docs", client=client, batch_size=2, embed_model=embed_model) as vector_store:
        CountingClient.sizes.clear()
        vector_store.add(_nodes(embed_model))
        assert max(CountingClient.sizes) == 2 and len(vector_store.get_nodes()) == 3


def test_failed_upserts_are_sent_again_max_retries_times(monkeypatch, caplog) -> None:
    monkeypatch.setattr(server, "RETRY_PAUSE", 0.0)
    unreachable = server.ServerBackend("http://127.0.0.1:9", None, None, None, None, "docs",
                                       ServerOptions(max_retries=2, timeout=1,
                                                     client_kwargs={"check_compatibility": False}), 64)
    point = server.PointData("6f1d3c52-7f4e-4a55-9a38-5b1f0c2d9e10", {}, {})
    with caplog.at_level(logging.WARNING, logger="lmk_rag.store.server"), \
            pytest.raises(StoreUnavailableError, match="upsert failed"):
        unreachable.upsert([point])
    tries = [record.getMessage().split(";")[0] for record in caplog.records]
    assert tries == ["upsert failed, try 1 of 3", "upsert failed, try 2 of 3"]
    unreachable.close()


def test_hybrid_fusion_fn_gets_both_results_and_its_fusion_is_the_answer(embed_model: LandmarkEmbedding) -> None:
    calls: list[tuple[VectorStoreQueryResult, VectorStoreQueryResult, float, int]] = []

    def fuse(dense_result, sparse_result, alpha=0.5, top_k=2):
        calls.append((dense_result, sparse_result, alpha, top_k))
        return relative_score_fusion(dense_result, sparse_result, alpha=alpha, top_k=top_k)

    with LandmarkVectorStore("docs", client=QdrantClient(":memory:"), hybrid_fusion_fn=fuse,
                             embed_model=embed_model) as vector_store:
        vector_store.add(_nodes(embed_model))
        query = VectorStoreQuery(query_str="copy files to a remote host", similarity_top_k=2, sparse_top_k=1,
                                 hybrid_top_k=3, alpha=0.8, mode=VectorStoreQueryMode.HYBRID)
        result = vector_store.query(query)
        ((dense, sparse, alpha, top_k),) = calls
        assert (len(dense.nodes), len(sparse.nodes), alpha, top_k) == (2, 1, 0.8, 3)
        assert result.ids[0] == "n2" and set(result.ids) == set(dense.ids) | set(sparse.ids)
        vector_store.query(VectorStoreQuery(query_str="archive", similarity_top_k=2))  # default mode: the store's
        assert len(calls) == 1


# ------------------------------------------------------------------ payload indexes


def test_payload_indexes_are_added_to_an_existing_store_and_recorded(tmp_path: Path, embed_model) -> None:
    path = tmp_path / "indexed"
    tenant = [{"field_name": "tenant", "field_schema": models.PayloadSchemaType.KEYWORD}]
    with LandmarkVectorStore(path=path, payload_indexes=tenant, embed_model=embed_model) as vector_store:
        vector_store.add(_nodes(embed_model, [{"tenant": "a", "year": 2020}] * 3))
    year = [{"field_name": "year", "field_schema": "integer"}]
    with pytest.raises(StoreReadOnlyError, match="year"):
        LandmarkStore(path, read_only=True, payload_indexes=year)
    with LandmarkStore(path, payload_indexes=year) as store:
        assert store.settings["payload_indexes"] == {"tenant": "keyword", "year": "integer"}
        assert {"meta.tenant", "meta.year"} <= set(store.backend.shard.info().payload_schema)
    with LandmarkStore(path, read_only=True, payload_indexes=year) as reader:  # nothing to add: fine
        assert len(reader.get_nodes()) == 3
    with pytest.raises(SettingsMismatchError, match="'year' as 'integer'"):
        LandmarkStore(path, payload_indexes=[{"field_name": "year", "field_schema": "keyword"}])


def test_a_text_payload_index_is_a_text_key_of_a_new_store(tmp_path: Path, embed_model) -> None:
    text = [{"field_name": "title", "field_schema": models.PayloadSchemaType.TEXT}]
    with LandmarkVectorStore(path=tmp_path / "t", payload_indexes=text, embed_model=embed_model) as vector_store:
        assert vector_store.store.text_keys == ["title"]
    with pytest.raises(SettingsMismatchError, match="text indexes are declared when a store is created"):
        LandmarkStore(tmp_path / "t", payload_indexes=[{"field_name": "body", "field_schema": "text"}])


@pytest.mark.parametrize("indexes", [
    "tenant", [{"field_name": "tenant"}], [{"field_name": "", "field_schema": "keyword"}],
    [{"field_name": "doc_id", "field_schema": "keyword"}], [{"field_name": "at", "field_schema": "geo"}],
])
def test_bad_payload_indexes_are_refused_before_anything_is_created(tmp_path: Path, indexes: Any) -> None:
    with pytest.raises(InvalidInputError, match="payload_indexes"):
        LandmarkStore(tmp_path / "bad", payload_indexes=indexes)
    assert not (tmp_path / "bad").exists()


# ------------------------------------------------------------------ the async client


class RecordingAsyncClient(AsyncQdrantClient):
    """The real local-mode async client, noting the event loop each search ran on."""

    loops: ClassVar[list[asyncio.AbstractEventLoop]] = []

    async def query_batch_points(self, *args: Any, **kwargs: Any) -> Any:
        self.loops.append(asyncio.get_running_loop())
        return await super().query_batch_points(*args, **kwargs)


def test_async_methods_await_the_async_client_on_the_running_loop(embed_model: LandmarkEmbedding) -> None:
    aclient = RecordingAsyncClient(":memory:")
    vector_store = LandmarkVectorStore("docs", aclient=aclient, embed_model=embed_model)
    assert vector_store.aclient is aclient and vector_store.client is None

    async def run() -> tuple[asyncio.AbstractEventLoop, list[VectorStoreQueryResult]]:
        await vector_store.async_add(_nodes(embed_model))
        queries = [VectorStoreQuery(query_str=q, similarity_top_k=1) for q in ("compress", "archive", "remote copy")]
        return asyncio.get_running_loop(), list(await asyncio.gather(*map(vector_store.aquery, queries)))

    RecordingAsyncClient.loops.clear()
    loop, results = asyncio.run(run())
    assert [r.ids for r in results] == [["n0"], ["n1"], ["n2"]]
    assert RecordingAsyncClient.loops == [loop] * 3
    # the sync methods of an async-only store run the same client on a private loop
    assert vector_store.query(VectorStoreQuery(query_str="archive", similarity_top_k=1)).ids == ["n1"]
    assert len(RecordingAsyncClient.loops) == 4 and RecordingAsyncClient.loops[-1] is not loop
    vector_store.close()


def test_a_routed_thread_calls_the_async_client_with_the_same_request() -> None:
    client, aclient = QdrantClient(":memory:"), AsyncQdrantClient(":memory:")
    transport = server.Transport(client, aclient)

    async def run() -> tuple[bool, bool]:
        await aclient.create_collection("only_async", vectors_config=models.VectorParams(
            size=2, distance=models.Distance.COSINE))
        loop = asyncio.get_running_loop()

        def routed() -> bool:
            with transport.routed(loop):
                return transport.collection_exists("only_async")

        return await asyncio.to_thread(routed), await asyncio.to_thread(transport.collection_exists, "only_async")

    assert asyncio.run(run()) == (True, False)


def test_a_local_client_pair_warns_that_the_async_client_is_not_used(embed_model: LandmarkEmbedding) -> None:
    with pytest.warns(UserWarning, match="never share their data"):
        vector_store = LandmarkVectorStore("docs", client=QdrantClient(":memory:"),
                                           aclient=AsyncQdrantClient(":memory:"), embed_model=embed_model)
    with vector_store:
        assert vector_store.aclient is None
        asyncio.run(vector_store.async_add(_nodes(embed_model)))
        assert len(vector_store.get_nodes()) == 3  # one store, whichever method wrote


def test_a_server_async_client_alone_is_refused() -> None:
    aclient = AsyncQdrantClient(url="http://127.0.0.1:9", check_compatibility=False)
    with pytest.raises(InvalidInputError, match=r"give url= .* or client= beside it"):
        LandmarkStore(aclient=aclient)


def test_a_folder_given_where_the_collection_name_goes_says_to_use_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="give a store folder as path="):
        LandmarkVectorStore(tmp_path / "store")
    assert not (tmp_path / "store").exists()
