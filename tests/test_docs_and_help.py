"""What a user reads first is complete and runs as written: the eval pipelines listed whole at 80 columns, every
command's help in filled paragraphs without reStructuredText quotes and its flags shown as flags, the help piped into
``head`` without an error, every ``lmk-rag eval`` example with its pipeline, the README examples' output folders
ignored by git, and the notebooks runnable from ``.venv`` (``jupyter nbconvert --execute``)."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
LMK_RAG = Path(sys.executable).parent / "lmk-rag"


def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([str(LMK_RAG), *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": str(columns), "HF_HUB_OFFLINE": "1"})


def pipeline_names() -> list[str]:
    """The pipelines the package registers (in a fresh process: tests register pipelines of their own)."""
    code = "from lmk_rag.eval.pipelines import pipeline_names; print(*pipeline_names())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_eval_help_lists_every_pipeline_whole_at_80_columns() -> None:
    done = _cli("eval", "--help")
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stdout.splitlines() if "…" in line and "pipeline" in line], done.stdout
    words = set(re.findall(r"[\w-]+", done.stdout))
    assert not set(pipeline_names()) - words, sorted(set(pipeline_names()) - words)


def command_names() -> list[str]:
    """Every ``lmk-rag`` command, from the top-level help's command panels."""
    return re.findall(r"^│ ([a-z][a-z-]+) ", _cli("--help", columns=120).stdout, flags=re.MULTILINE)


def test_every_command_help_reads_as_filled_paragraphs() -> None:
    """A command's description is re-flowed to the terminal (no line cut where the docstring's source line ended,
    left short beside the next) and shows ``--backend`` as the option the user types, not as ````--backend````."""
    commands = command_names()
    assert {"ingest", "query", "eval", "check"} <= set(commands), commands
    for command in commands:
        done = _cli(command, "--help")
        assert done.returncode == 0, done.stderr
        assert "``" not in done.stdout, (command, done.stdout)
        description = done.stdout.split("Usage:", 1)[1].split("╭", 1)[0].splitlines()[1:]
        paragraphs = "\n".join(line.strip() for line in description).strip().split("\n\n")
        for paragraph in paragraphs:
            lines = paragraph.splitlines()
            short = [line for line in lines[:-1] if len(line) < 55]
            assert not short, (command, short, done.stdout)


def test_every_help_shows_flags_as_flags() -> None:
    """An on/off option reads as a flag (``--sync``, ``--bm25 --no-bm25``), not as an option taking a ``<bool>``
    value, in every command's help and the top-level one; options that take a value keep their type."""
    for args in (["--help"], *([command, "--help"] for command in command_names())):
        done = _cli(*args, columns=120)
        assert done.returncode == 0 and "<bool>" not in done.stdout, (args, done.stdout)
    ingest = _cli("ingest", "--help", columns=120).stdout
    assert re.search(r"--sync +Also delete", ingest) and re.search(r"--bm25 +--no-bm25 +BM25 vectors", ingest)
    assert re.search(r"--store +<path> ", ingest), ingest


def test_help_piped_into_a_reader_that_stops_ends_quietly() -> None:
    """``lmk-rag ingest --help | head -1``: the reader leaves after its first bytes, while the help (10 KB) still
    waits for room in a pipe of 4 KB; the command stops without an ``error: BrokenPipeError`` line or a
    traceback."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    process = subprocess.Popen([str(LMK_RAG), "ingest", "--help"], stdout=write_end, stderr=subprocess.PIPE,
                               cwd=ROOT, env={**os.environ, "COLUMNS": "80"})
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.read(100)
        time.sleep(1)  # the command is blocked writing the rest when the reader leaves
    stderr = process.stderr.read().decode()  # type: ignore[union-attr]
    assert process.wait(timeout=60) == 1
    assert stderr == "", stderr


def test_eval_list_pipelines_prints_one_name_a_line() -> None:
    done = _cli("eval", "--list-pipelines")
    assert done.returncode == 0 and done.stdout.split() == pipeline_names(), done.stdout + done.stderr


def test_every_eval_example_names_its_pipeline() -> None:
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for example in re.findall(r"lmk-rag eval (?![-`])[^`\n]*", page.read_text(encoding="utf-8")):
            if not re.search(r"(--pipeline|-p) ", example):
                missing.append(f"{page.name}: {example}")
    assert not missing, missing


def test_the_readme_examples_write_only_folders_git_ignores() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    written = set(re.findall(r"--(?:store|output) \./([\w.-]+)", readme))
    ignored = {line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}
    assert {"int8_store", "static_store", "minilm-lmk", "my-projection"} <= written
    assert not written - ignored, sorted(written - ignored)


def test_the_dev_extra_runs_the_notebooks_with_nbconvert() -> None:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(requirement.startswith("nbconvert") for requirement in dev)
    assert version("nbconvert")
    assert (Path(sys.executable).parent / "jupyter-nbconvert").exists()


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_readme_and_the_docs_resolves() -> None:
    """A link to a file in the repository names one that exists; one with ``#anchor`` names a heading of it."""
    broken = []
    for page in _pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), flags=re.MULTILINE)
                if anchor not in {_anchor(heading) for heading in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_the_readme_is_the_users_page_and_every_doc_says_whom_it_is_for() -> None:
    """The README stays a page a user adopts from (issue 62: about 180 lines), and each page of docs/ opens, under
    its title, with one italic line saying whom it is for."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 185
    for page in sorted((ROOT / "docs").glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# ") and lines[1] == "" and lines[2].startswith("*For "), page.name


def test_the_docs_name_no_folder_of_a_development_machine() -> None:
    """A reader's machine has neither the data folder nor the home of the machine a page was written on: the pages
    say ``../shared/data`` and "the user cache"."""
    pages = [*_pages(), *sorted((ROOT / "benchmarks").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}: {hit}" for page in pages
             for hit in re.findall(r"(?:/work/|/root/|/home/|~/\.cache)\S*", page.read_text(encoding="utf-8"))]
    assert not found, found
