"""benchmarks/build_tclref.py: a rendered Tcl page split into its NAME purpose and its document, and the committed
set."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from lmk_rag.eval.beir import load_beir

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"

# The head and foot of Tcl_DString(3tcl) as `man -l -P cat` renders it at 100 columns (Debian 12, tcl8.6-doc).
RENDERED = """\
Tcl_DString(3tcl)                     Tcl Library Procedures                    Tcl_DString(3tcl)

_________________________________________________________________________________________________

NAME
       Tcl_DStringInit, Tcl_DStringAppend, Tcl_DStringAppendElement, Tcl_DStringStartSublist,
       Tcl_DStringEndSublist, Tcl_DStringLength, Tcl_DStringValue, Tcl_DStringSetLength,
       Tcl_DStringTrunc, Tcl_DStringFree, Tcl_DStringResult, Tcl_DStringGetResult - manipulate
       dynamic strings

SYNOPSIS
       #include <tcl.h>

       Tcl_DStringInit(dsPtr)
_________________________________________________________________________________________________

DESCRIPTION
       Dynamic strings provide a mechanism for building up arbitrarily long strings by gradually
       appending information.

Tcl                                            7.4                              Tcl_DString(3tcl)
"""


@pytest.fixture(scope="module")
def build(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("build_tclref")


def test_a_page_gives_its_purpose_and_its_text_without_title_and_name(build: ModuleType) -> None:
    purpose, text = build.split_page(RENDERED)
    assert purpose == "manipulate dynamic strings"  # the wrapped NAME line joined, the names before " - " cut
    assert text.startswith("SYNOPSIS\n #include <tcl.h>")  # blanks collapsed as in the shared sets
    assert "Tcl Library Procedures" not in text and "NAME" not in text and "Tcl_DStringAppend," not in text
    assert "____" not in text
    assert text.endswith("Tcl 7.4 Tcl_DString(3tcl)")  # the footer stays, as in manpages-longdoc


def test_a_page_without_a_name_purpose_gives_nothing(build: ModuleType) -> None:
    assert build.split_page(RENDERED.replace(" - manipulate", " manipulate")) is None
    assert build.split_page(RENDERED.replace("NAME\n", "TITLE\n")) is None


def test_the_committed_set_loads_with_every_purpose_relevant_to_its_pages() -> None:
    data = load_beir(DATA / "tcl-ref")
    assert len(data.query_ids) >= 200 and len(data.doc_ids) >= 200
    assert all(len(data.query_texts[i].split()) >= 3 for i in range(len(data.query_ids)))
    assert all(data.qrels[query_id] for query_id in data.query_ids)
    assert {doc for docs in data.qrels.values() for doc in docs} <= set(data.doc_ids)


def test_a_needle_is_the_start_of_the_description_cut_at_a_word(build: ModuleType) -> None:
    _, text = build.split_page(RENDERED)
    assert build.needle_of(text) == ("Dynamic strings provide a mechanism for building up arbitrarily long strings by "
                                     "gradually appending information.")
    long = text.replace("appending information.", "appending information. " + "word " * 200)
    needle = build.needle_of(long)
    assert len(needle) <= build.NEEDLE_CHARS and needle.endswith(" word") and needle.startswith("Dynamic strings")
    assert build.needle_of(text.replace("DESCRIPTION", "EXAMPLES")) == ""


def test_the_committed_needle_set_hides_each_needle_in_its_own_haystack() -> None:
    data = load_beir(DATA / "tcl-needle-L2048")
    assert len(data.query_ids) == 200 and len(data.doc_ids) == 200
    assert all(len(data.qrels[query_id]) == 1 for query_id in data.query_ids)
    assert len({doc for docs in data.qrels.values() for doc in docs}) == 200
    assert all(1500 <= len(text.split()) <= 1600 for text in data.doc_texts)  # about 2,048 tokens
