"""Queries without torch: a read-only store encodes its queries on ONNX Runtime (a torch float32 store with its ONNX
float32 twin, an int8 store with its own encoder), `lmk-rag query`, ``LandmarkStore(read_only=True).search`` and
``LandmarkVectorStore(read_only=True)`` import neither torch nor transformers, the twin's query vectors are within
cosine 0.9999 of torch's with the same hits, the settings record names the twin and the fingerprint check accepts it,
and without an export and without torch the one error names the command that makes the export.

"No torch" is a real interpreter whose imports of torch and transformers fail (a ``sys.meta_path`` finder), in a
subprocess; the exports come from the session's cache (``onnx_cache``), made once by ``onnx_encoders``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmk_rag.errors import CorruptStoreError
from lmk_rag.paths import CACHE_ENV
from lmk_rag.store import LandmarkStore

BLOCK_TORCH = """
import sys
from importlib.abc import MetaPathFinder

class NoTorch(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoTorch())
"""

HEAVY = """
def heavy():
    return sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "transformers"))
"""

SEARCH = """
import json, sys
from lmk_rag.store import LandmarkStore
store = LandmarkStore(sys.argv[1], read_only=True)
hits = store.search(sys.argv[2], k=5)
print(json.dumps({"hits": [[hit.doc_id, hit.node_id] for hit in hits], "heavy": heavy(),
                  "settings": store.encoder.settings}))
"""

CLI = """
import sys
from lmk_rag.cli import app
try:
    app(["query", sys.argv[2], "--store", sys.argv[1], "-k", "5", "--json"])
except SystemExit as exit:
    print(json.dumps({"status": exit.code, "heavy": heavy()}), file=sys.stderr)
"""

VECTOR_STORE = """
import json, sys
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.landmark import LandmarkVectorStore
store = LandmarkVectorStore(path=sys.argv[1], read_only=True)
result = store.query(VectorStoreQuery(query_str=sys.argv[2], similarity_top_k=5))
print(json.dumps({"ids": result.ids, "heavy": heavy()}))
"""


def run(script: str, store: Path, query: str, cache: Path, block_torch: bool = False) -> subprocess.CompletedProcess:
    """Run a script in a new interpreter (torch and transformers unimportable with ``block_torch``)."""
    code = (BLOCK_TORCH if block_torch else "") + "import json, sys\n" + HEAVY + script
    env = {**os.environ, CACHE_ENV: str(cache), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-c", code, str(store), query], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def output(result: subprocess.CompletedProcess) -> dict[str, Any]:
    """The JSON a script printed last on stdout."""
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _queries(fixture_data: Path) -> list[str]:
    with open(fixture_data / "manpages-short" / "queries.jsonl") as lines:
        return [json.loads(line)["text"] for line in lines][:12]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, minilm_encoder, onnx_encoders, onnx_cache,
           docs) -> dict[str, Path]:
    """Two stores of the docs: ``"torch"`` (minilm_encoder: torch float32) and ``"int8"`` (ONNX int8)."""
    root = tmp_path_factory.mktemp("torch_free")
    folders = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(onnx_cache))
        for name, encoder in (("torch", minilm_encoder), ("int8", onnx_encoders["int8"])):
            with LandmarkStore(root / name, encoder=encoder) as store:
                store.upsert_documents(list(docs.items()))
            folders[name] = root / name
    return folders


@pytest.mark.parametrize("kind", ["torch", "int8"])
def test_a_read_only_query_imports_neither_torch_nor_transformers(stores, onnx_cache, docs, kind) -> None:
    query = next(iter(docs.values())).split(". ")[0][:200]
    with LandmarkStore(stores[kind]) as store:  # a writable handle: the store's own encoder (torch or int8)
        expected = [[hit.doc_id, hit.node_id] for hit in store.search(query, k=5)]
        nodes = [hit.node_id for hit in store.search(query, k=5, one_per_document=False)]  # as LlamaIndex queries
    searched = output(run(SEARCH, stores[kind], query, onnx_cache))
    assert searched["heavy"] == [] and searched["hits"] == expected
    assert searched["settings"]["backend"] == "onnx"
    cli = run(CLI, stores[kind], query, onnx_cache)
    status = json.loads(cli.stderr.strip().splitlines()[-1])
    assert status == {"status": 0, "heavy": []}, cli.stderr[-2000:]
    assert [[hit["doc_id"], hit["node_id"]] for hit in json.loads(cli.stdout)["hits"]] == expected
    index = output(run(VECTOR_STORE, stores[kind], query, onnx_cache))
    assert index["heavy"] == [] and index["ids"] == nodes


def test_the_onnx_twin_encodes_queries_within_cosine_0_9999_of_torch_with_the_same_hits(
    stores, minilm_encoder, onnx_encoders, fixture_data, onnx_cache, monkeypatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    queries = _queries(fixture_data)
    with LandmarkStore(stores["torch"]) as writer:  # a writable handle encodes with torch
        assert writer.encoder.settings == minilm_encoder.settings
        expected = [[hit.node_id for hit in writer.search(query, k=10)] for query in queries]
    with LandmarkStore(stores["torch"], read_only=True) as reader:
        twin = reader.encoder
        assert twin.settings == {**minilm_encoder.settings, "backend": "onnx"}
        assert [[hit.node_id for hit in reader.search(query, k=10)] for query in queries] == expected
    for query in queries:
        ours, theirs = minilm_encoder.encode_queries(query), twin.encode_queries(query)
        assert ours.spans == theirs.spans
        assert float(ours.vector @ theirs.vector) >= 0.9999
        assert np.min(np.sum(ours.chunk_vectors * theirs.chunk_vectors, axis=1)) >= 0.9999


def test_the_settings_record_names_the_query_encoder_and_the_fingerprint_check_accepts_it(
    stores, minilm_encoder, onnx_encoders, onnx_cache, monkeypatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    record = json.loads((stores["torch"] / "lmk_rag.json").read_text())["encoder"]
    twin = onnx_encoders["float32"]
    assert record["fingerprint"] == minilm_encoder.fingerprint != twin.fingerprint
    assert record["queries"] == {"backend": "onnx", "dtype": "float32", "fingerprint": twin.fingerprint}
    assert twin.fingerprint_with("torch", "float32") == minilm_encoder.fingerprint
    int8 = json.loads((stores["int8"] / "lmk_rag.json").read_text())["encoder"]
    assert int8["queries"] == {"backend": "onnx", "dtype": "int8", "fingerprint": int8["fingerprint"]}
    with LandmarkStore(stores["torch"], read_only=True) as store:
        assert store.encoder.fingerprint == twin.fingerprint


def _edited(source: Path, target: Path, edit) -> Path:
    """A copy of a store whose settings record ``edit`` changed."""
    import shutil

    shutil.copytree(source, target, ignore=shutil.ignore_patterns("lmk_rag.lock", ".lmk_rag.*"))
    record = json.loads((target / "lmk_rag.json").read_text())
    edit(record["encoder"])
    (target / "lmk_rag.json").write_text(json.dumps(record))
    return target


def test_a_store_without_the_record_queries_with_the_twin_and_an_edited_one_is_refused(
    stores, onnx_encoders, onnx_cache, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    older = _edited(stores["torch"], tmp_path / "older", lambda encoder: encoder.pop("queries"))
    with LandmarkStore(older, read_only=True) as store:
        assert store.encoder.fingerprint == onnx_encoders["float32"].fingerprint
    wrong = _edited(stores["torch"], tmp_path / "wrong",
                    lambda encoder: encoder["queries"].update(fingerprint="0" * 16))
    with LandmarkStore(wrong, read_only=True) as store, pytest.raises(CorruptStoreError, match="fingerprint"):
        store.search("list files", k=1)


def test_without_an_export_and_without_torch_the_error_names_the_command(stores, docs, tmp_path) -> None:
    query = next(iter(docs.values())).split(". ")[0][:200]
    empty = tmp_path / "cache"
    for kind, dtype in (("torch", "float32"), ("int8", "int8")):
        result = run(SEARCH, stores[kind], query, empty, block_torch=True)
        assert result.returncode == 1
        assert "ModelExportError" in result.stderr and "lmk-rag export-onnx --model" in result.stderr
        assert f"--dtype {dtype}" in result.stderr
        cli = run(CLI, stores[kind], query, empty, block_torch=True)
        errors = [line for line in cli.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "lmk-rag export-onnx --model" in errors[0] and f"--dtype {dtype}" in errors[0]
        assert json.loads(cli.stderr.strip().splitlines()[-1]) == {"status": 1, "heavy": []}


def test_with_an_export_and_without_torch_a_query_runs(stores, docs, onnx_cache) -> None:
    query = next(iter(docs.values())).split(". ")[0][:200]
    for kind in ("torch", "int8"):
        searched = output(run(SEARCH, stores[kind], query, onnx_cache, block_torch=True))
        assert searched["heavy"] == [] and searched["hits"][0][0] == next(iter(docs))


def test_export_onnx_writes_the_export_a_query_needs(onnx_cache, minilm_path) -> None:
    from typer.testing import CliRunner

    from lmk_rag.cli import app
    from lmk_rag.encoder.onnx_export import onnx_cache_dir

    result = CliRunner().invoke(app, ["export-onnx", "--dtype", "float32"], env={CACHE_ENV: str(onnx_cache)})
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())
    assert path.is_file() and path.parent.name == onnx_cache_dir(minilm_path).name
    files = {file.name for file in path.parent.iterdir()}
    assert {"model-float32.onnx", "tokenizer.json", "tokenizer_meta.json"} <= files
    result = CliRunner().invoke(app, ["export-onnx", "--dtype", "bfloat16"], env={CACHE_ENV: str(onnx_cache)})
    assert result.exit_code == 1 and "error: an exported model runs in 'float32' or 'int8'" in result.output
