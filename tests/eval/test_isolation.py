"""The product stands apart from the research around it: importing the eval harness (which loads no torch either), or
running the CLI's ``ingest`` and ``query``, loads no LlamaIndex package (the stock LlamaIndex pipelines live in
``benchmarks/``), each checked in a fresh process by what ``sys.modules`` holds afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Prints the modules of the LlamaIndex packages a process has imported, as a JSON list, at its end.
REPORT = "import json, sys; print(json.dumps(sorted({m for m in sys.modules if m.split('.')[0] == 'llama_index'})))"
#: The same for torch, which the eval harness's import does not need either.
REPORT_TORCH = "import json, sys; print(json.dumps(sorted({m for m in sys.modules if m.split('.')[0] == 'torch'})))"


def _loaded_after(code: str, cwd: Path, report: str = REPORT) -> list[str]:
    done = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, cwd=cwd,
                          env={"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_checker_sees_a_llamaindex_import(tmp_path: Path) -> None:
    assert "llama_index.core" in _loaded_after("import llama_index.core", tmp_path)


def test_importing_the_eval_harness_and_its_pipelines_loads_no_llamaindex_and_no_torch(tmp_path: Path) -> None:
    code = ("import lmk_rag.eval, lmk_rag.eval.run, lmk_rag.eval.pipelines, lmk_rag.cli.eval\n"
            "assert not [n for n in lmk_rag.eval.pipeline_names() if n.startswith('llamaindex')]")
    assert _loaded_after(code, tmp_path) == []
    assert _loaded_after(code, tmp_path, REPORT_TORCH) == []
    assert _loaded_after("import torch", tmp_path, REPORT_TORCH)  # the check sees torch when it is imported


@pytest.mark.slow
def test_the_cli_ingest_and_query_load_no_llamaindex(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tar.txt").write_text("tar saves many files together into a single archive.\n")
    (tmp_path / "docs" / "gzip.txt").write_text("gzip reduces the size of the named files.\n")
    run = "from lmk_rag.cli import app\ntry:\n    app({args}, prog_name='lmk-rag')\nexcept SystemExit as done:\n" \
          "    assert not done.code, done.code"
    ingest = run.format(args=["ingest", "docs", "--store", "store"])
    assert _loaded_after(ingest, tmp_path) == []
    query = run.format(args=["query", "bundle files into an archive", "--store", "store", "--json"])
    assert _loaded_after(query, tmp_path) == []
    assert (tmp_path / "store").is_dir()
