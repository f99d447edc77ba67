"""What the command line says when there is nothing to show or something is wrong: a line naming why and the fix,
in the user's words (real MiniLM, real Edge shards, real LlamaIndex)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.store import LandmarkStore

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory, minilm_encoder, docs) -> Path:
    """A store of three pages written as ``lmk-rag ingest`` writes them (metadata: ``path``)."""
    folder = tmp_path_factory.mktemp("cli") / "store"
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.add_documents([(doc_id, text, {"path": f"/pages/{doc_id}"}) for doc_id, text in list(docs.items())[:3]],
                            show_progress_bar=False)
    return folder


def test_a_query_without_hits_says_so_on_stderr(cli_store) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["query", "archive files", "--store", str(cli_store), "--filter", "file_name=tar.txt"])
    assert result.exit_code == 0 and result.stdout == ""
    said = result.stderr.splitlines()[-1]  # after the model's loading bar
    assert said.startswith("no hits: no stored node matches --filter file_name=tar.txt") and "'path'" in said, said
    result = runner.invoke(app, ["query", "archive files", "--store", str(cli_store), "--filter", "file_name=tar.txt",
                                 "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == {"query": "archive files", "hits": []}
    assert result.stderr.splitlines()[-1].startswith("no hits")


def test_lmk_rag_alone_prints_the_help_and_no_error_line() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lmk-rag")], capture_output=True, text=True, cwd=REPO,
                          env={"COLUMNS": "80", "HF_HUB_OFFLINE": "1"})
    assert "Usage" in done.stdout and "ingest" in done.stdout
    assert "error" not in done.stderr and done.returncode == 0, done.stderr


def test_query_json_hides_llamaindex_internal_keys(tmp_path, minilm_encoder) -> None:
    from llama_index.core import Document, StorageContext, VectorStoreIndex

    from llama_index.embeddings.landmark import LandmarkEmbedding
    from llama_index.vector_stores.landmark import LandmarkVectorStore

    embed_model = LandmarkEmbedding(encoder=minilm_encoder)
    with LandmarkVectorStore(path=tmp_path / "li", embed_model=embed_model) as vector_store:
        VectorStoreIndex.from_documents(
            [Document(text="tar creates and extracts archive files.", metadata={"file_name": "tar.txt"})],
            storage_context=StorageContext.from_defaults(vector_store=vector_store), embed_model=embed_model)
    result = CliRunner().invoke(app, ["query", "archive", "--store", str(tmp_path / "li"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"][0]["metadata"] == {"file_name": "tar.txt"}
