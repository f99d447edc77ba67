"""Build ``unixfaq-answers`` (BEIR format), natural questions of domains no dev set or training pair comes from:
the FAQs Debian 12 installs with sed, lsof, valgrind, xz-utils and zlib1g-dev.

Each FAQ entry's answer is one document and its question, as the FAQ's author wrote it, the query. The set is
held out: report it, never tune on it (docs/decisions.md, "quality: natural questions of other domains").
Deterministic: the same installed packages give the same bytes.

    python benchmarks/build_unixfaq.py [--out benchmarks/data]
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
from collections.abc import Callable
from pathlib import Path

from build_perldoc import (
    OUT,
    BeirSet,
    approx_tokens,
    faq_queries,
    normalise_layout,
    opaque_id,
    package_version,
    write_beir,
)

SALT = "unixfaq-answers"
#: Each FAQ: its Debian package and installed file.
SOURCES = {
    "sed": ("sed", "/usr/share/doc/sed/sedfaq.txt.gz"),
    "lsof": ("lsof", "/usr/share/doc/lsof/00FAQ.gz"),
    "valgrind": ("valgrind", "/usr/share/doc/valgrind/FAQ.txt.gz"),
    "xz": ("xz-utils", "/usr/share/doc/xz-utils/faq.txt.gz"),
    "zlib": ("zlib1g-dev", "/usr/share/doc/zlib1g-dev/FAQ.gz"),
}
#: A numbered heading: its number, then its text.
NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?[ \t]+(\S.*)$")
#: An answer shorter than this (words) is no document: a chapter or topic heading without text of its own.
MIN_ANSWER_WORDS = 5

Entry = tuple[str, str]
"""A FAQ entry: ``(question, answer)``."""


def read(path: str) -> str:
    """An installed FAQ's text (gzip or plain), tabs expanded."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        return handle.read().expandtabs()


def joined(lines: list[str]) -> str:
    """Lines as one line of single spaces."""
    return " ".join(" ".join(lines).split())


def contents_entries(text: str) -> list[Entry]:
    """A FAQ with a numbered table of contents (sed, lsof): each heading of the contents, found again in the body in
    order (its number, then its first three words), answered by the body up to the next heading."""
    lines = text.splitlines()
    contents: list[tuple[str, str]] = []
    start = next(i for i, line in enumerate(lines) if NUMBERED.match(line))
    index = start
    while index < len(lines):
        match = NUMBERED.match(lines[index])
        if match and contents and match.group(1) == contents[0][0]:
            break  # the body starts with the first heading again
        if match:
            contents.append((match.group(1), match.group(2)))
        elif lines[index].startswith(" ") and lines[index].strip() and contents:
            number, heading = contents[-1]
            contents[-1] = (number, f"{heading} {lines[index].strip()}")
        index += 1
    found: list[tuple[int, str]] = []
    for number, heading in contents:
        words = re.escape(" ".join(heading.split()[:3])).replace(r"\ ", r"\s+")
        pattern = re.compile(rf"^{re.escape(number)}\.?\s+{words}")
        at = next((i for i in range(index, len(lines)) if pattern.match(lines[i])), None)
        if at is not None:
            found.append((at, joined([heading])))
            index = at + 1
    entries = []
    for (at, heading), (end, _) in zip(found, [*found[1:], (len(lines), "")]):
        body = lines[at + 1 : end]
        while body and body[0].startswith(" ") and body[0].strip() and joined(body[:1]) in heading:
            body = body[1:]  # the heading's continuation lines
        entries.append((heading, "\n".join(body)))
    return entries


def valgrind_entries(text: str) -> list[Entry]:
    """Valgrind's FAQ: blocks between dashed lines, each ``N.M. question`` and its answer. The question ends with
    its line ending in ``?`` or ``:``, or before a blank or indented (code) line: an answer may start on the next
    line."""
    entries = []
    for block in re.split(r"^-{20,}$", text, flags=re.MULTILINE):
        lines = block.strip("\n").splitlines()
        if not lines or not re.match(r"^\d+\.\d+\.\s", lines[0]):
            continue
        end = 1
        while end < len(lines) and not lines[end - 1].rstrip().endswith(("?", ":")) and lines[end].strip() \
                and not lines[end][0].isspace():
            end += 1
        entries.append((joined(lines[:end]).split(None, 1)[1], "\n".join(lines[end:])))
    return entries


def xz_entries(text: str) -> list[Entry]:
    """The XZ Utils FAQ: ``Q:`` paragraphs, each answered by the ``A:`` text up to the next ``Q:``."""
    entries = []
    for block in re.split(r"^Q:", text, flags=re.MULTILINE)[1:]:
        question, _, answer = block.partition("\nA:")
        entries.append((joined(question.splitlines()), answer))
    return entries


def zlib_entries(text: str) -> list[Entry]:
    """The zlib FAQ: `` N. question`` headings (up to the first blank line), answered by the indented text after."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"^ {0,2}\d+\.\s+\S", line)]
    entries = []
    for at, end in zip(starts, [*starts[1:], len(lines)]):
        blank = next((i for i in range(at, end) if not lines[i].strip()), end)
        question = joined(lines[at:blank]).split(None, 1)[1]
        entries.append((question, "\n".join(lines[blank:end])))
    return entries


PARSERS: dict[str, Callable[[str], list[Entry]]] = {
    "sed": contents_entries, "lsof": contents_entries, "valgrind": valgrind_entries, "xz": xz_entries,
    "zlib": zlib_entries,
}


def is_question(heading: str) -> bool:
    """A heading asked as a question (not a topic, nor a ``... on Unix?`` continuation of its parent's)."""
    return "?" in heading and not heading.startswith("...")


def build() -> tuple[BeirSet, dict[str, tuple[int, int]]]:
    """The set, and per FAQ the documents and questions it gave."""
    docs: list[tuple[str, str]] = []
    asked: list[tuple[str, str]] = []
    counts: dict[str, tuple[int, int]] = {}
    for name, (package, path) in SOURCES.items():
        if not Path(path).is_file():
            raise SystemExit(f"error: {path} is missing: apt-get install {package}")
        entries = PARSERS[name](read(path))
        before = len(asked), len(docs)
        for number, (question, answer) in enumerate(entries):
            answer = normalise_layout(answer)
            if len(answer.split()) < MIN_ANSWER_WORDS:
                continue
            doc_id = opaque_id("d", SALT, f"{name}:{number}")
            docs.append((doc_id, answer))
            if is_question(question):
                asked.append((question, doc_id))
        counts[name] = (len(docs) - before[1], len(asked) - before[0])
    return faq_queries(SALT, docs, asked), counts


def readme(beir: BeirSet, counts: dict[str, tuple[int, int]]) -> str:
    """The set's README: sources, rules and sizes."""
    sources = ", ".join(f"`{package}` {package_version(package)} (`{path}`)" for package, path in SOURCES.values())
    doc_tokens = [approx_tokens(text) for _, text in beir.docs]
    query_tokens = [approx_tokens(text) for _, text in beir.queries]
    asked = ", ".join(f"{name} {questions} / {documents}" for name, (documents, questions) in counts.items())

    def spread(values: list[int]) -> str:
        return f"{min(values):,} / {int(statistics.median(values)):,} / {max(values):,}"

    return f"""# unixfaq-answers: natural questions of other domains (held out)

Generated by `python benchmarks/build_unixfaq.py` (do not edit by hand; rerunning gives the same bytes), in the
format of the other sets (benchmarks/data/README.md). **Held out**: no dev set, training pair or tuned setting
comes from these domains; report it, never tune on it.

Sources, Debian 12: {sources}.

Each FAQ entry's answer (the text under its heading up to the next heading, layout normalised as in the other
sets) is one document; an answer of fewer than {MIN_ANSWER_WORDS} words (a chapter or topic heading) is none.
A heading asked as a question (it holds `?` and does not start with `...`) is a query, in the FAQ author's words,
relevant to its answer alone. A question asked twice and one whose word sequence occurs in another document are
dropped ({beir.notes["asked_twice_dropped"]} and {beir.notes["found_verbatim_in_another_document_dropped"]}).
Questions / documents per FAQ: {asked}.

| docs | queries | doc tokens min / median / max | query tokens min / median / max |
|---|---|---|---|
| {len(beir.docs)} | {len(beir.queries)} | {spread(doc_tokens)} | {spread(query_tokens)} |
"""


def main() -> None:
    """Write the set and its README under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the data folder (default: benchmarks/data)")
    args = parser.parse_args()
    beir, counts = build()
    folder = args.out / SALT
    write_beir(folder, beir)
    (folder / "README.md").write_text(readme(beir, counts), encoding="utf-8")
    print(f"{folder}: {len(beir.docs)} documents, {len(beir.queries)} queries")


if __name__ == "__main__":
    main()
