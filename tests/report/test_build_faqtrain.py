"""benchmarks/build_faqtrain.py: the CVS FAQ's and the info FAQs' layouts read into (question, answer) entries, and
the committed training pairs."""

from __future__ import annotations

import json
import re
from pathlib import Path

PAIRS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "faq-train" / "pairs.jsonl"

# Excerpts of the installed FAQs (Debian 12), shortened, in their own layouts.
CVS_FAQ = """\
  Category: /Advanced_Topics_/Branching_and_Mergin/

          " + Branching and Merging"

    1. What is a branch?

          Unfortunately, the word "branch" is an overloaded technical
          term.

          Last modified: _6/13/1997_

    7. How do I merge changes from the trunk into my branch or between
    branches?

   The idea is similar to the above.

          Last modified: _9/8/1997_
"""

INFO_FAQ = """\
This is R-FAQ.info, produced by makeinfo.

\x1f
File: R-FAQ.info,  Node: R Basics,  Next: R and S,  Prev: Introduction,  Up: Top

2 R Basics
**********

* Menu:

* What is R?::
\x1f
File: R-FAQ.info,  Node: What is R?,  Next: Citing R,  Up: R Basics

2.1 What is R?
==============

R is a system for statistical computation and graphics.
\x1f
File: R-FAQ.info,  Node: Citing R,  Up: R Basics

2.8 Citing R
============

To cite R in publications, use citation().
"""


def test_cvs_entries_join_wrapped_questions_and_stop_at_the_date(benchmark_script) -> None:
    build = benchmark_script("build_faqtrain")
    entries = build.cvs_entries(CVS_FAQ)
    assert [question for _, question, _ in entries] == [
        "What is a branch?", "How do I merge changes from the trunk into my branch or between branches?"]
    assert " ".join(entries[0][2].split()) == 'Unfortunately, the word "branch" is an overloaded technical term.'
    assert "Last modified" not in entries[1][2] and "similar to the above" in entries[1][2]


def test_info_entries_are_numbered_nodes_with_their_text(benchmark_script) -> None:
    build = benchmark_script("build_faqtrain")
    entries = build.info_entries(INFO_FAQ)
    assert [(chapter, question) for chapter, question, _ in entries] == [("2", "What is R?"), ("2", "Citing R")]
    assert entries[0][2].strip() == "R is a system for statistical computation and graphics."


def test_the_committed_pairs_are_questions_with_answers_of_three_faqs() -> None:
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    assert {row["source"] for row in rows} == {"cvs", "emacs", "r"} and len(rows) > 400
    assert all("?" in row["query"] and len(row["positive"].split()) >= 5 for row in rows)
    assert len({" ".join(re.findall(r"[0-9a-z]+", row["query"].lower())) for row in rows}) == len(rows)
