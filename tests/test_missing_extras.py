"""An optional part that is not installed fails with one MissingExtraError naming the pip extra to install, from
the LlamaIndex adapters, the core API and the CLI. Absence is simulated: ``sys.modules[name] = None`` makes every
import of ``name`` raise ``ModuleNotFoundError``, as if the package were uninstalled."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lmk_rag.errors import LmkRagError, MissingExtraError, needs_extra


def _uninstall(monkeypatch: pytest.MonkeyPatch, package: str, *importers: str) -> None:
    """Make ``package`` unimportable, and forget the lmk_rag modules that imported it so they import it again."""
    monkeypatch.setitem(sys.modules, package, None)
    for module in importers:
        monkeypatch.delitem(sys.modules, module, raising=False)


@pytest.mark.parametrize("where", [{"location": ":memory:"}, {"url": "http://localhost:6333"}])
def test_a_qdrant_client_store_without_qdrant_client_names_the_server_extra(
    monkeypatch: pytest.MonkeyPatch, where: dict[str, str]
) -> None:
    from llama_index.vector_stores.landmark import LandmarkVectorStore

    _uninstall(monkeypatch, "qdrant_client", "lmk_rag.store.server")
    with pytest.raises(MissingExtraError, match=r"needs qdrant-client .*pip install 'lmk-rag\[server\]'"):
        LandmarkVectorStore(**where)


def test_a_static_embedding_without_model2vec_names_the_static_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.embeddings.landmark import LandmarkEmbedding

    _uninstall(monkeypatch, "model2vec")
    with pytest.raises(MissingExtraError, match=r"needs model2vec .*pip install 'lmk-rag\[static\]'"):
        LandmarkEmbedding(static=True)


def test_eval_bm25_without_bm25s_prints_one_error_naming_the_eval_extra(
    monkeypatch: pytest.MonkeyPatch, fixture_data: Path, tmp_path: Path
) -> None:
    from lmk_rag.cli import app

    _uninstall(monkeypatch, "bm25s")
    result = CliRunner().invoke(app, ["eval", str(fixture_data / "manpages-short"), "-p", "bm25", "--max-queries",
                                      "2", "--max-docs", "5", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "ModuleNotFoundError" not in result.output
    assert "error: pipeline 'bm25' needs bm25s" in result.output and "pip install 'lmk-rag[eval]'" in result.output


def test_any_command_missing_an_optional_package_prints_one_error_naming_its_extra(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from lmk_rag.cli.root import CliGroup

    commands = typer.Typer(cls=CliGroup)

    @commands.command()
    def mix() -> None:
        import torch  # noqa: F401

    @commands.command()
    def other() -> None:
        """A second command, so that the group dispatches by name."""

    _uninstall(monkeypatch, "torch")
    result = CliRunner().invoke(commands, ["mix"])
    assert result.exit_code == 1
    assert result.output == ("error: this command needs torch (module 'torch'), which is not installed: "
                             "pip install 'lmk-rag[encoder]'\n")


def test_the_helper_names_the_given_extra_and_passes_other_import_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingExtraError, match=r"lmk-rag\[static\]") as caught, needs_extra("static", "static"):
        import tokenizers  # noqa: F401
    assert isinstance(caught.value, LmkRagError) and isinstance(caught.value, ImportError)
    with pytest.raises(ModuleNotFoundError, match="no_such_module"), needs_extra("anything"):
        import no_such_module  # noqa: F401
