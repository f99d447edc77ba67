"""Build ``unixfaq-answers`` and ``unixfaq-longdoc`` (BEIR format), natural questions of domains no dev set or
training pair comes from: the FAQs Debian 12 installs with sed, lsof, valgrind, xz-utils and zlib1g-dev.

* ``unixfaq-answers/``: each FAQ question (as its author wrote it) -> its answer, one document.
* ``unixfaq-longdoc/``: each question -> its FAQ chapter, the question headings cut out, among long chapters of
  GNU manuals (coreutils, grep, wget, ...).

Both are held out: report them, never tune on them (docs/decisions.md, "quality: natural questions").
Deterministic: the same installed packages give the same bytes.

    python benchmarks/build_unixfaq.py [--out benchmarks/data]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
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
    reflow,
    write_beir,
)

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
#: The GNU manuals whose chapters are unixfaq-longdoc's distractors: their Debian package and info files.
MANUALS = {
    "coreutils": ("coreutils", ["/usr/share/info/coreutils.info.gz"]),
    "diffutils": ("diffutils", ["/usr/share/info/diffutils.info.gz"]),
    "find": ("findutils", ["/usr/share/info/find.info-1.gz", "/usr/share/info/find.info-2.gz"]),
    "grep": ("grep", ["/usr/share/info/grep.info.gz"]),
    "gzip": ("gzip", ["/usr/share/info/gzip.info.gz"]),
    "sed": ("sed", ["/usr/share/info/sed.info.gz"]),
    "wget": ("wget", ["/usr/share/info/wget.info.gz"]),
    "gettext": ("gettext", ["/usr/share/info/gettext.info.gz"]),
    "gnupg": ("gnupg", ["/usr/share/info/gnupg.info-1.gz", "/usr/share/info/gnupg.info-2.gz"]),
}
#: Chapters of a manual that are no prose of their own: indexes, licences, copying notes.
SKIPPED_CHAPTERS = re.compile(r"index|licen[cs]e|copying", re.IGNORECASE)
#: A distractor chapter's length in approximate tokens (as perlfaq-longdoc's long pages), and how many are drawn.
LONG_TOKENS = (1500, 30000)
DISTRACTORS = 100

Entry = tuple[str, str, str]
"""A FAQ entry: ``(chapter, question, answer)``; the chapter is the first part of the entry's number (``""`` in a
FAQ without chapters)."""


def read(path: str, package: str) -> str:
    """An installed file's text (gzip or plain), tabs expanded.

    :param package: the Debian package that installs it, named when it is missing.
    :raises SystemExit: when the file is missing.
    """
    if not Path(path).is_file():
        raise SystemExit(f"error: {path} is missing: apt-get install {package}")
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
    found: list[tuple[int, str, str]] = []
    for number, heading in contents:
        words = re.escape(" ".join(heading.split()[:3])).replace(r"\ ", r"\s+")
        pattern = re.compile(rf"^{re.escape(number)}\.?\s+{words}")
        at = next((i for i in range(index, len(lines)) if pattern.match(lines[i])), None)
        if at is not None:
            found.append((at, number.split(".")[0], joined([heading])))
            index = at + 1
    entries = []
    for (at, chapter, heading), (end, _, _) in zip(found, [*found[1:], (len(lines), "", "")]):
        body = lines[at + 1 : end]
        while body and body[0].startswith(" ") and body[0].strip() and joined(body[:1]) in heading:
            body = body[1:]  # the heading's continuation lines
        entries.append((chapter, heading, "\n".join(body)))
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
        entries.append((lines[0].split(".")[0], joined(lines[:end]).split(None, 1)[1], "\n".join(lines[end:])))
    return entries


def xz_entries(text: str) -> list[Entry]:
    """The XZ Utils FAQ: ``Q:`` paragraphs, each answered by the ``A:`` text up to the next ``Q:``."""
    entries = []
    for block in re.split(r"^Q:", text, flags=re.MULTILINE)[1:]:
        question, _, answer = block.partition("\nA:")
        entries.append(("", joined(question.splitlines()), answer))
    return entries


def zlib_entries(text: str) -> list[Entry]:
    """The zlib FAQ: `` N. question`` headings (up to the first blank line), answered by the indented text after."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"^ {0,2}\d+\.\s+\S", line)]
    entries = []
    for at, end in zip(starts, [*starts[1:], len(lines)]):
        blank = next((i for i in range(at, end) if not lines[i].strip()), end)
        question = joined(lines[at:blank]).split(None, 1)[1]
        entries.append(("", question, "\n".join(lines[blank:end])))
    return entries


PARSERS: dict[str, Callable[[str], list[Entry]]] = {
    "sed": contents_entries, "lsof": contents_entries, "valgrind": valgrind_entries, "xz": xz_entries,
    "zlib": zlib_entries,
}


def is_question(heading: str) -> bool:
    """A heading asked as a question (not a topic, nor a ``... on Unix?`` continuation of its parent's)."""
    return "?" in heading and not heading.startswith("...")


def faqs() -> dict[str, list[Entry]]:
    """Each FAQ's entries, read from the installed file.

    :raises SystemExit: naming the package to install when a FAQ is missing.
    """
    return {name: PARSERS[name](read(path, package)) for name, (package, path) in SOURCES.items()}


def build_answers(entries: dict[str, list[Entry]]) -> tuple[BeirSet, dict[str, tuple[int, int]]]:
    """unixfaq-answers: each question -> its answer; per FAQ the documents and questions it gave."""
    salt = "unixfaq-answers"
    docs: list[tuple[str, str]] = []
    asked: list[tuple[str, str]] = []
    counts: dict[str, tuple[int, int]] = {}
    for name, faq in entries.items():
        before = len(asked), len(docs)
        for number, (_, question, answer) in enumerate(faq):
            answer = normalise_layout(answer)
            if len(answer.split()) < MIN_ANSWER_WORDS:
                continue
            doc_id = opaque_id("d", salt, f"{name}:{number}")
            docs.append((doc_id, answer))
            if is_question(question):
                asked.append((question, doc_id))
        counts[name] = (len(docs) - before[1], len(asked) - before[0])
    return faq_queries(salt, docs, asked), counts


def build_longdoc(entries: dict[str, list[Entry]], distractors: list[tuple[str, str]]) -> BeirSet:
    """unixfaq-longdoc: each FAQ chapter (a whole FAQ without chapters) as one document, its question headings cut
    out and its other headings kept; the questions as queries; chapters of GNU manuals as distractors."""
    salt = "unixfaq-longdoc"
    docs: list[tuple[str, str]] = []
    asked: list[tuple[str, str]] = []
    for name, faq in entries.items():
        chapters: dict[str, tuple[list[str], list[str]]] = {}  # chapter -> (its texts, its questions), in order
        for chapter, question, answer in faq:
            texts, questions = chapters.setdefault(chapter, ([], []))
            if is_question(question):
                texts.append(answer)
                questions.append(question)
            else:
                texts.append(f"{question}\n\n{answer}")
        for chapter, (texts, questions) in chapters.items():
            if questions:
                doc_id = opaque_id("d", salt, f"{name}:{chapter}")
                docs.append((doc_id, normalise_layout("\n\n".join(texts))))
                asked += [(question, doc_id) for question in questions]
    ranked = sorted(distractors, key=lambda item: hashlib.sha1(f"{salt}:{item[0]}".encode()).hexdigest())
    docs += [(opaque_id("d", salt, key), text) for key, text in ranked[:DISTRACTORS]]
    beir = faq_queries(salt, docs, asked)
    beir.notes["distractors"] = min(len(ranked), DISTRACTORS)
    return beir


def info_chapters() -> list[tuple[str, str]]:
    """The chapters of the GNU manuals of :data:`MANUALS` as ``(manual:chapter, text)``: each node under ``Top``
    with the nodes below it, in file order, of :data:`LONG_TOKENS` long; indexes and licences left out.

    :raises SystemExit: naming the package to install when a manual is missing.
    """
    chapters: list[tuple[str, str]] = []
    for manual, (package, files) in MANUALS.items():
        parts = [part for path in files for part in read(path, package).split("\x1f")]
        up: dict[str, str] = {}
        bodies: list[tuple[str, str]] = []
        for part in parts:
            head, _, body = part.strip("\n").partition("\n")
            node, parent = re.search(r"Node: ([^,]+)", head), re.search(r"Up: ([^,]+)", head)
            if node is None or parent is None:
                continue  # the preamble, tag tables
            up[node.group(1).strip()] = parent.group(1).strip()
            bodies.append((node.group(1).strip(), body))
        texts: dict[str, list[str]] = {}
        for node, body in bodies:
            chapter = node
            while up.get(chapter, "Top") not in ("Top", "(dir)"):
                chapter = up[chapter]
            if chapter != "Top" and not SKIPPED_CHAPTERS.search(chapter):
                texts.setdefault(chapter, []).append(body)
        for chapter, bodies_of in texts.items():
            text = normalise_layout("\n\n".join(bodies_of))
            if LONG_TOKENS[0] <= approx_tokens(text) <= LONG_TOKENS[1]:
                chapters.append((f"{manual}:{chapter}", text))
    return chapters


def readme(name: str, beir: BeirSet, how: str) -> str:
    """A set's README: sources, rules and sizes."""
    sources = ", ".join(f"`{package}` {package_version(package)} (`{path}`)" for package, path in SOURCES.values())
    doc_tokens = [approx_tokens(text) for _, text in beir.docs]
    query_tokens = [approx_tokens(text) for _, text in beir.queries]

    def spread(values: list[int]) -> str:
        return f"{min(values):,} / {int(statistics.median(values)):,} / {max(values):,}"

    return f"""# {name}: natural questions of other domains (held out)

Generated by `python benchmarks/build_unixfaq.py` (do not edit by hand; rerunning gives the same bytes), in the
format of the other sets (benchmarks/data/README.md). **Held out**: no dev set, training pair or tuned setting
comes from these domains; report it, never tune on it.

FAQs, Debian 12: {sources}. A heading asked as a question (it holds `?` and does not start with `...`) is a query,
in the FAQ author's words. A question asked twice and one whose word sequence occurs in a document it is not
relevant to are dropped ({beir.notes["asked_twice_dropped"]} and
{beir.notes["found_verbatim_in_another_document_dropped"]}).

{how}

| docs | queries | doc tokens min / median / max | query tokens min / median / max |
|---|---|---|---|
| {len(beir.docs)} | {len(beir.queries)} | {spread(doc_tokens)} | {spread(query_tokens)} |
"""


def main() -> None:
    """Write both sets and their READMEs under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the data folder (default: benchmarks/data)")
    args = parser.parse_args()
    entries = faqs()
    answers, counts = build_answers(entries)
    per_faq = ", ".join(f"{name} {questions} / {documents}" for name, (documents, questions) in counts.items())
    manuals = ", ".join(f"`{package}` {package_version(package)} ({manual})" for manual, (package, _) in
                        MANUALS.items())
    longdoc = build_longdoc(entries, info_chapters())
    sets = {
        "unixfaq-answers": (answers, f"""Each FAQ entry's answer (the text under its heading up to the next heading, \
layout normalised as in the other sets) is one document, relevant to its question alone; an answer of fewer than \
{MIN_ANSWER_WORDS} words (a chapter or topic heading) is none. Questions / documents per FAQ: {per_faq}."""),
        "unixfaq-longdoc": (longdoc, f"""Each FAQ chapter (the entries sharing the first part of their number; xz's \
and zlib's FAQs have none and are one document each) is one document: its answers in order, its question headings \
cut out, its other headings kept; relevant to each of its questions. Distractors: {longdoc.notes["distractors"]} \
chapters (at most {DISTRACTORS}, the first by sha1("unixfaq-longdoc:" + manual + ":" + chapter)) of \
{LONG_TOKENS[0]:,}-{LONG_TOKENS[1]:,} tokens of the GNU manuals in info format of {manuals}: a chapter is a node \
under `Top` with every node below it, in file order; indexes, licences and copying notes left out."""),
    }
    for name, (beir, how) in sets.items():
        write_beir(args.out / name, beir)
        (args.out / name / "README.md").write_text(reflow(readme(name, beir, how)), encoding="utf-8")
        print(f"{args.out / name}: {len(beir.docs)} documents, {len(beir.queries)} queries")


if __name__ == "__main__":
    main()
