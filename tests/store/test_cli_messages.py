"""What the command line says when there is nothing to show or something is wrong: a line naming why and the fix,
in the user's words (real MiniLM, real Edge shards, real LlamaIndex)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.errors import SettingsMismatchError, StoreUnavailableError
from lmk_rag.store import LandmarkStore, server

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory, minilm_encoder, docs) -> Path:
    """A store of three pages written as ``lmk-rag ingest`` writes them (metadata: ``path``)."""
    folder = tmp_path_factory.mktemp("cli") / "store"
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.upsert_documents([(doc_id, text, {"path": f"/pages/{doc_id}"})
                                for doc_id, text in list(docs.items())[:3]], show_progress_bar=False)
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


def test_a_command_prints_no_model_loading_bar(cli_store) -> None:
    """transformers draws a "Loading weights" bar each time a torch model opens; a command's stderr keeps to its own
    lines, unless the user's environment asks for the bar (``HF_HUB_DISABLE_PROGRESS_BARS=0``). A query opens no
    torch model (docs/store.md, "Queries without torch"); ``lmk-rag encode`` does."""
    env = {key: value for key, value in os.environ.items() if key != "HF_HUB_DISABLE_PROGRESS_BARS"}
    lmk_rag = str(Path(sys.executable).parent / "lmk-rag")
    query = [lmk_rag, "query", "archive files", "--store", str(cli_store)]
    done = subprocess.run(query, capture_output=True, text=True, cwd=REPO, env={**env, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0 and done.stdout.startswith(" 1. "), done.stdout + done.stderr
    assert "Loading weights" not in done.stderr, done.stderr
    encode = [lmk_rag, "encode", "archive files"]
    done = subprocess.run(encode, capture_output=True, text=True, cwd=REPO, env={**env, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0 and "Loading weights" not in done.stderr, done.stderr
    asked = subprocess.run(encode, capture_output=True, text=True, cwd=REPO,
                           env={**env, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "0"})
    assert asked.returncode == 0 and "Loading weights" in asked.stderr, asked.stderr


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

#: Runs the command line given as arguments, then prints which of the modules that loading a model imports it
#: imported (torch for the encoder, the BERT modeling code for a transformer's weights, model2vec for the static
#: model): a command whose input is bad fails before any of them.
CLI_LOADS = textwrap.dedent(
    """
    import json, sys
    from lmk_rag.cli import app
    sys.argv = ["lmk-rag", *sys.argv[1:]]
    try:
        app()
    finally:
        loads = ("torch", "transformers.models.bert.modeling_bert", "model2vec")
        print("loaded " + json.dumps([name for name in loads if name in sys.modules]))
    """
)


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI_LOADS, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.parametrize(("args", "model"), [
    (["encode", "  "], "torch"),
    (["finetune", "--train", "{bad}", "--output", "{tmp}/out"], "transformers.models.bert.modeling_bert"),
    (["train-mixer", "--train", "{bad}", "--output", "{tmp}/mixer"], "model2vec"),
])
def test_commands_check_their_input_before_loading_a_model(tmp_path, args, model) -> None:
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"query": "how do I list files"}\n')
    done = _run_cli(*[arg.format(bad=bad, tmp=tmp_path) for arg in args])
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(errors) == 1 and errors[0].startswith("error: "), done.stderr
    assert model not in json.loads(done.stdout.rsplit("loaded ", 1)[1]), done.stdout


def test_an_unreachable_url_is_one_error_line_without_qdrant_client_warnings() -> None:
    done = _run_cli("info", "--url", "http://127.0.0.1:9")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: http://127.0.0.1:9") and "is the server up" in done.stderr


def test_opening_an_unreachable_server_leaves_no_version_check_running() -> None:
    """qdrant-client's own version check runs in a daemon thread whose request, cut off when the interpreter exits,
    crashed the command above now and then (exit -11); the store checks the version on opening instead."""
    with pytest.raises(StoreUnavailableError, match="is the server up"):
        LandmarkStore(url="http://127.0.0.1:9", create=False)
    assert not [thread for thread in threading.enumerate() if "check_compatibility" in thread.name]


def test_a_server_too_far_from_the_client_is_warned_of() -> None:
    client = importlib.metadata.version("qdrant-client")
    major, minor = map(int, client.split(".")[:2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        server._warn_if_incompatible(f"{major}.{minor + 1}.0")
    with pytest.warns(UserWarning, match=f"server version {major + 1}.0.0"):
        server._warn_if_incompatible(f"{major + 1}.0.0")


def test_a_sparse_search_on_a_store_without_bm25_names_the_fix(tmp_path, minilm_encoder, docs) -> None:
    with LandmarkStore(tmp_path / "dense", encoder=minilm_encoder, bm25=False) as store:
        store.upsert_documents(list(docs.items())[:1], show_progress_bar=False)
        with pytest.raises(SettingsMismatchError) as raised:
            store.search("archive", alpha=0.0)
    said = str(raised.value)
    assert "without BM25" in said and "alpha=1" in said and "bm25=True" in said and "must be 1" not in said


def test_ingest_with_another_backend_names_the_options(tmp_path, cli_store) -> None:
    (tmp_path / "page.txt").write_text("tar creates and extracts archive files.")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "page.txt"), "--store", str(cli_store),
                                      "--backend", "onnx"])
    said = result.stderr.splitlines()[-1]
    assert result.exit_code == 1 and said.startswith("error: "), result.output
    assert "backend is not set in the store but 'onnx' here" in said and "without --backend" in said, said
    assert "store=None" not in said


def _edited_copy(store: Path, folder: Path, edit) -> Path:
    """A copy of a store whose ``lmk_rag.json`` was edited by ``edit(record)``."""
    shutil.copytree(store, folder)
    record = json.loads((folder / "lmk_rag.json").read_text())
    edit(record)
    (folder / "lmk_rag.json").write_text(json.dumps(record))
    return folder


@pytest.mark.parametrize(("edit", "words"), [
    (lambda record: record["encoder"].update(dim=256),
     ["encoder.dim=256, but its vectors hold 384 numbers", "restore encoder.dim=384"]),
    (lambda record: record["encoder"]["settings"].update(granularity=16),
     ["the record (lmk_rag.json in a store folder) was edited", "restore the original values"]),
    (lambda record: record["encoder"]["settings"].update(model_name="sentence-transformers/all-mpnet-base-v2"),
     ["the model its settings record names is not here", "restore its encoder.settings.model_name"]),
    (lambda record: record.update(bm25_tokenizer="word"),
     ["bm25_tokenizer='word'", "edited or damaged", "restore the original value"]),
    (lambda record: record.update(quantization=None),
     ["quantization=None", "edited or damaged", "restore the original value"]),
    (lambda record: record.update(format_version=1),
     ["written by an earlier lmk-rag (store format 1", "lmk-rag ingest DOCS --store NEW_FOLDER", "CHANGELOG.md"]),
    (lambda record: record.pop("text_keys"),
     ["lacks text_keys", "written by an earlier lmk-rag, or edited", "lmk-rag ingest DOCS --store NEW_FOLDER"]),
], ids=["dim", "granularity", "model-name", "bm25-tokenizer", "null-storage", "format-1", "missing-field"])
def test_an_edited_settings_record_is_named_by_query_and_check(cli_store, tmp_path, edit, words) -> None:
    folder = _edited_copy(cli_store, tmp_path / "edited", edit)
    runner = CliRunner()
    for args in (["query", "archive files", "--store", str(folder)], ["check", "--store", str(folder)]):
        result = runner.invoke(app, args)
        said = result.stderr.splitlines()[-1]
        assert result.exit_code == 1 and said.startswith("error: "), (args, result.output)
        assert all(word in said for word in words), (args, said)
        assert "ok:" not in result.stdout


def test_check_of_a_sound_store_says_ok(cli_store) -> None:
    result = CliRunner().invoke(app, ["check", "--store", str(cli_store)])
    assert result.exit_code == 0 and result.stdout.startswith("ok: 3 documents"), result.output
