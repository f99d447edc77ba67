"""A store's storage settings (quantized copies, vectors and HNSW graph on disk): recorded at creation, honoured by
the engine, checked on reopen, and refused with a typed error where a backend cannot honour them. Compression
never moves a hit: Qdrant rescores the candidates with the original vectors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lmk_rag.errors import InvalidInputError, SettingsMismatchError
from lmk_rag.store import LandmarkStore, SearchOptions, ServerOptions, StorageOptions
from lmk_rag.store.settings import DEFAULT_OVERSAMPLING, DEFAULT_STORAGE, check_cluster

QUERIES = ["copy files between hosts", "print the lines that match a pattern", "show disk usage of a folder"]
COMPRESSED = {"quantization": "turbo4", "node_quantization": "int8"}
PLACED = {"on_disk": True, "hnsw_on_disk": True}
FLOAT32 = {"quantization": "none", "node_quantization": "none", "on_disk": False, "hnsw_on_disk": False}


def _fill(store: LandmarkStore, doc_records: dict) -> None:
    for doc_id, records in doc_records.items():
        store.upsert_encoded_document(doc_id, records)


def _hits(store: LandmarkStore, encoder, alpha: float) -> tuple[list[str], list[float]]:
    """The node ids and the scores of the top 10 of every query, in order."""
    hits = [hit for query in encoder.encode_queries(QUERIES)
            for hit in store.search_encoded(query, k=10, one_per_document=False, alpha=alpha)]
    return [hit.node_id for hit in hits], [hit.score for hit in hits]


def _same_hits(got: tuple[list[str], list[float]], want: tuple[list[str], list[float]]) -> None:
    assert got[0] == want[0]
    assert got[1] == pytest.approx(want[1], abs=2e-6)


def test_compressed_store_records_its_storage_and_gives_the_float32_hits(open_store, doc_records, minilm_encoder,
                                                                         backend: str) -> None:
    exact = open_store("float32", storage=StorageOptions(**FLOAT32))
    compressed = open_store("compressed", search=SearchOptions(oversampling=3.0), storage=StorageOptions(**COMPRESSED))
    assert {key: exact.settings[key] for key in FLOAT32} == FLOAT32
    assert {key: compressed.settings[key] for key in COMPRESSED} == COMPRESSED
    assert compressed.settings["hnsw_on_disk"] is False and compressed.search_options.oversampling == 3.0
    for store in (exact, compressed):
        _fill(store, doc_records)
    for alpha in (1.0, 0.7):  # the rerank alone, and fused with BM25
        _same_hits(_hits(compressed, minilm_encoder, alpha), _hits(exact, minilm_encoder, alpha))


def test_storage_is_fixed_at_creation(open_store, backend: str) -> None:
    open_store("s", storage=StorageOptions(quantization="int8", node_quantization="none")).close()
    again = open_store("s")  # None: as recorded
    assert again.settings["quantization"] == "int8" and again.settings["node_quantization"] == "none"
    again.close()
    open_store("s", storage=StorageOptions(quantization="int8")).close()  # the recorded value: accepted
    with pytest.raises(SettingsMismatchError, match=r"quantization: store='int8' given='binary'.*re-ingest"):
        open_store("s", storage=StorageOptions(quantization="binary"))
    with pytest.raises(SettingsMismatchError, match="node_quantization: store='none' given='int8'"):
        open_store("s", storage=StorageOptions(node_quantization="int8"))


def test_a_new_store_takes_the_default_storage(open_store, backend: str) -> None:
    store = open_store("d")
    want = {key: getattr(DEFAULT_STORAGE, key) for key in FLOAT32}
    assert {key: store.settings[key] for key in FLOAT32} == want
    assert store.search_options.oversampling == (DEFAULT_OVERSAMPLING if DEFAULT_STORAGE.node_quantized else None)


def test_oversampling_needs_quantized_node_vectors(open_store, backend: str) -> None:
    with pytest.raises(InvalidInputError, match="oversampling applies to quantized node vectors"):
        open_store("plain", storage=StorageOptions(node_quantization="none"), search=SearchOptions(oversampling=2.0))
    quantized = open_store("quantized", storage=StorageOptions(node_quantization="binary"),
                           search=SearchOptions(oversampling=4))
    assert quantized.search_options.oversampling == 4.0
    quantized.close()
    assert open_store("quantized").search_options.oversampling == DEFAULT_OVERSAMPLING


@pytest.mark.parametrize("options, given, message", [
    (StorageOptions, {"quantization": "int4"},
     r"quantization must be one of \['int8', 'binary', 'turbo4', 'none'\] or None \(as recorded\), got 'int4'"),
    (StorageOptions, {"node_quantization": "pq"}, "node_quantization must be one of"),
    (StorageOptions, {"on_disk": "yes"}, r"on_disk must be True, False or None \(as recorded\), got 'yes'"),
    (StorageOptions, {"hnsw_on_disk": 1}, "hnsw_on_disk must be True, False or None"),
    (StorageOptions, {"hnsw_m": -1}, "hnsw_m must be an integer from 0"),
    (StorageOptions, {"ef_construct": 2}, "ef_construct must be an integer from 4"),
    (SearchOptions, {"oversampling": 0.5}, "oversampling must be a number from 1 to 100, got 0.5"),
    (SearchOptions, {"exact": "no"}, "exact must be True or False"),
    (SearchOptions, {"prefetch_limit": 0}, "prefetch_limit must be an integer from 1"),
])
def test_bad_options_are_refused_when_made(options: type, given: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        options(**given)


@pytest.mark.parametrize("given", [{"storage": {"quantization": "int8"}}, {"search": SearchOptions},
                                   {"server": StorageOptions()}])
def test_options_of_the_wrong_kind_are_refused_before_anything_is_made(tmp_path: Path, given: dict) -> None:
    name = next(iter(given))
    with pytest.raises(InvalidInputError, match=f"{name} must be a .*Options, got .*: e.g. {name}="):
        LandmarkStore(tmp_path / "s", **given)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("given, home", [({"quantization": "int8"}, "storage=StorageOptions"),
                                         ({"prefetch_limit": 50, "exact": True}, "search=SearchOptions"),
                                         ({"timeout": 5}, "server=ServerOptions")])
def test_a_grouped_option_given_flat_names_its_option_object(tmp_path: Path, given: dict, home: str) -> None:
    with pytest.raises(TypeError, match=re.escape(home)):
        LandmarkStore(tmp_path / "s", **given)
    assert not (tmp_path / "s").exists()


def test_hnsw_settings_are_recorded_and_reach_the_engine(open_store, tmp_path: Path, backend: str) -> None:
    store = open_store("h", storage=StorageOptions(hnsw_m=8, ef_construct=64))
    assert (store.settings["hnsw_m"], store.settings["ef_construct"]) == (8, 64)
    store.close()
    with pytest.raises(SettingsMismatchError, match="hnsw_m: store=8 given=32"):
        open_store("h", storage=StorageOptions(hnsw_m=32))
    if backend == "edge":
        config = json.loads(next(tmp_path.rglob("edge_config.json")).read_text())
        assert config["vectors"]["node"]["hnsw_config"]["m"] == 8
        assert config["vectors"]["node"]["hnsw_config"]["ef_construct"] == 64


def test_edge_places_vectors_and_graph_on_disk(doc_records, minilm_encoder, tmp_path: Path) -> None:
    placed = StorageOptions(**PLACED, **COMPRESSED)
    with LandmarkStore(tmp_path / "memory", encoder=minilm_encoder, storage=StorageOptions(**FLOAT32)) as in_memory, \
            LandmarkStore(tmp_path / "disk", encoder=minilm_encoder, storage=placed) as on_disk:
        assert {key: on_disk.settings[key] for key in PLACED} == PLACED
        shard = json.loads((tmp_path / "disk" / "shard" / "edge_config.json").read_text())
        warmed = json.loads((tmp_path / "memory" / "shard" / "edge_config.json").read_text())
        assert (shard["payload_memory"], warmed["payload_memory"]) == ("cold", "cached")  # payloads follow vectors
        engine = shard["vectors"]
        assert {name: vector["memory"] for name, vector in engine.items()} == dict.fromkeys(
            ("node", "chunks", "document"), "cold")
        assert engine["node"]["hnsw_config"]["memory"] == "cold" and engine["document"]["hnsw_config"]["m"] == 0
        assert engine["node"]["quantization_config"] == {"scalar": {"type": "int8", "quantile": 0.99,
                                                                    "memory": "pinned"}}
        assert engine["chunks"]["quantization_config"]["turbo"]["memory"] == "pinned"
        for store in (in_memory, on_disk):
            _fill(store, doc_records)
        _same_hits(_hits(on_disk, minilm_encoder, 0.7), _hits(in_memory, minilm_encoder, 0.7))
    with pytest.raises(SettingsMismatchError, match="on_disk: store=True given=False"):
        LandmarkStore(tmp_path / "disk", encoder=minilm_encoder, storage=StorageOptions(on_disk=False))
    with LandmarkStore(tmp_path / "disk", encoder=minilm_encoder) as reopened:
        assert reopened.count() == sum(len(records) for records in doc_records.values())


def test_local_mode_refuses_vectors_on_disk_and_makes_no_collection(tmp_path: Path) -> None:
    for placement in ({"on_disk": True}, {"hnsw_on_disk": True}):
        with pytest.raises(InvalidInputError, match="local mode holds every vector in memory"):
            LandmarkStore(location=str(tmp_path / "local"), collection_name="c", storage=StorageOptions(**placement))
    with LandmarkStore(location=str(tmp_path / "local"), collection_name="c") as store:
        assert store.count() == 0 and store.settings["on_disk"] is False  # its default, whatever Edge's is


def test_exact_search_is_the_brute_force_reference(open_store, doc_records, minilm_encoder, backend: str) -> None:
    exact = open_store("exact", storage=StorageOptions(node_quantization="binary"), search=SearchOptions(exact=True))
    plain = open_store("plain", storage=StorageOptions(**FLOAT32))
    for store in (exact, plain):
        _fill(store, doc_records)
    assert exact.search_options.exact is True
    _same_hits(_hits(exact, minilm_encoder, 0.7), _hits(plain, minilm_encoder, 0.7))


def test_cluster_settings_are_recorded_and_checked_against_the_record(tmp_path: Path) -> None:
    with LandmarkStore(tmp_path / "edge") as edge:
        assert edge.settings["cluster"] == {}  # no shards on Edge (the arguments are refused there)
    recorded = {"cluster": {"shard_number": 6, "replication_factor": 2}}
    check_cluster(recorded, {"shard_number": 6, "replication_factor": 2}, "s")
    check_cluster(recorded, {}, "s")  # not given: as the collection is
    with pytest.raises(SettingsMismatchError, match=r"shard_number: store=6 given=3.*update_collection"):
        check_cluster(recorded, {"shard_number": 3}, "s")
    with pytest.raises(SettingsMismatchError, match="write_consistency_factor: store='the server default' given=2"):
        check_cluster(recorded, {"write_consistency_factor": 2}, "s")


def test_a_server_collection_records_its_cluster_settings(open_store, backend: str) -> None:
    if backend != "server":
        pytest.skip("shards exist on a Qdrant server only (Edge and local mode refuse the arguments)")
    open_store("c", server=ServerOptions(shard_number=2, replication_factor=1)).close()
    assert open_store("c").settings["cluster"] == {"shard_number": 2, "replication_factor": 1}
    with pytest.raises(SettingsMismatchError, match="shard_number: store=2 given=3"):
        open_store("c", server=ServerOptions(shard_number=3))
