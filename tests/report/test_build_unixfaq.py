"""benchmarks/build_unixfaq.py: each FAQ layout read into (chapter, question, answer) entries, the long documents
made of them, and the committed sets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from lmk_rag.eval.beir import load_beir

SETS = Path(__file__).resolve().parents[2] / "benchmarks" / "data"

# Excerpts of the installed FAQs (Debian 12), shortened, in their own layouts.
CONTENTS_FAQ = """\
Table of Contents:

1.0\tGeneral Concepts
1.1\tLsof -- what is it?
1.2\tWhere do I get lsof?
1.2.1\tAre there mirror sites?
2.0\tGeneral Questions
2.1\tWhy doesn't lsof report on open files in
\tsome directory?

1.0\tGeneral Concepts

1.1\tLsof -- what is it?

\tLsof lists open files.

1.2\tWhere do I get lsof?

\tFrom the ftp site; see 1.2.1 for mirrors.

1.2.1\tAre there mirror sites?

\tYes, several.

2.0\tGeneral Questions

2.1\tWhy doesn't lsof report on open files in
\tsome directory?

\tIt reports what the kernel tells it.
"""

VALGRIND_FAQ = """\
Table of Contents
1. Background
------------------------------------------------------------------------
1. Background
------------------------------------------------------------------------

1.1. How do you pronounce "Valgrind"?
The "Val" as in the word "value".
------------------------------------------------------------------------

2.1. When building Valgrind, 'make' dies partway with an assertion
failure, something like this:

    % make: expand.c:489: Assertion failed.

It's probably a bug in 'make'.
------------------------------------------------------------------------
"""

XZ_FAQ = """\
XZ Utils FAQ
============

Q:  What do the letters XZ mean?

A:  Nothing. They are just two letters.


Q:  Why is liblzma named liblzma if its primary file format is .xz?
    Shouldn't it be e.g. libxz?

A:  The format was renamed to .xz but the name of liblzma wasn't changed.
"""

ZLIB_FAQ = """\
                Frequently Asked Questions about zlib

 1. Is zlib Y2K-compliant?

    Yes. zlib doesn't handle dates.

 2. Where can I get a Windows DLL version?

    The zlib sources can be compiled without change to produce a DLL.  See the
    file win32/DLL_FAQ.txt.
"""


@pytest.fixture(scope="module")
def build(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("build_unixfaq")


def test_a_faq_with_contents_finds_each_heading_again_in_its_body(build: ModuleType) -> None:
    entries = build.contents_entries(CONTENTS_FAQ.expandtabs())
    assert [chapter for chapter, _, _ in entries] == ["1", "1", "1", "1", "2", "2"]
    questions = [question for _, question, _ in entries]
    assert questions == ["General Concepts", "Lsof -- what is it?", "Where do I get lsof?", "Are there mirror sites?",
                         "General Questions", "Why doesn't lsof report on open files in some directory?"]
    answers = {question: " ".join(answer.split()) for _, question, answer in entries}
    assert answers["Where do I get lsof?"] == "From the ftp site; see 1.2.1 for mirrors."  # not the child's text
    assert answers["Why doesn't lsof report on open files in some directory?"] == (
        "It reports what the kernel tells it.")  # the heading's second line is not the answer's
    assert answers["General Concepts"] == ""


def test_the_other_layouts_give_each_question_its_answer(build: ModuleType) -> None:
    valgrind = build.valgrind_entries(VALGRIND_FAQ)
    assert [(chapter, question) for chapter, question, _ in valgrind] == [
        ("1", 'How do you pronounce "Valgrind"?'),
        ("2", "When building Valgrind, 'make' dies partway with an assertion failure, something like this:")]
    assert "probably a bug" in valgrind[1][2] and "Assertion failed" in valgrind[1][2]
    xz = build.xz_entries(XZ_FAQ)
    assert xz[1][1] == ("Why is liblzma named liblzma if its primary file format is .xz? Shouldn't it be e.g. "
                        "libxz?")
    assert " ".join(xz[0][2].split()) == "Nothing. They are just two letters."
    zlib = build.zlib_entries(ZLIB_FAQ)
    assert [(chapter, question) for chapter, question, _ in zlib] == [
        ("", "Is zlib Y2K-compliant?"), ("", "Where can I get a Windows DLL version?")]
    assert "win32/DLL_FAQ.txt" in zlib[1][2] and "Y2K" not in zlib[1][2]


def test_only_headings_asked_as_questions_are_queries(build: ModuleType) -> None:
    assert build.is_question("Are there mirror sites?")
    assert not build.is_question("General Questions")
    assert not build.is_question("... on Unix platforms?")


def test_a_longdoc_chapter_holds_its_answers_and_topic_headings_but_not_its_questions(build: ModuleType) -> None:
    entries = {"lsof": build.contents_entries(CONTENTS_FAQ.expandtabs())}
    beir = build.build_longdoc(entries, [("manual:Chapter", "A long chapter of a manual about open files.")])
    texts = dict(beir.docs)
    assert len(texts) == 3  # chapters 1 and 2, the distractor
    first = next(text for text in texts.values() if "Lsof lists open files." in text)
    assert "General Concepts" in first and "Yes, several." in first and "mirror sites" not in first
    assert {text for _, text in beir.queries} == {"Lsof -- what is it?", "Where do I get lsof?",
                                                  "Are there mirror sites?",
                                                  "Why doesn't lsof report on open files in some directory?"}
    assert all(texts[doc] != "A long chapter of a manual about open files." for _, doc in beir.qrels)


@pytest.mark.parametrize("name", ["unixfaq-answers", "unixfaq-longdoc"])
def test_the_committed_sets_load_with_one_relevant_document_per_question(name: str) -> None:
    data = load_beir(SETS / name)
    assert len(data.query_ids) >= 300 and len(data.doc_ids) >= 100
    assert all(len(data.qrels[query_id]) == 1 for query_id in data.query_ids)
    assert {doc for docs in data.qrels.values() for doc in docs} <= set(data.doc_ids)
