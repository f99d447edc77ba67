"""Build the perldoc retrieval sets (BEIR format) from Debian 12's Perl 5.36 documentation.

Sources are the pod pages of ``perl-doc`` and the documented ``.pm``/``.pod`` modules of
``perl-modules-5.36`` and ``libperl5.36`` (the core modules perl-doc documents), rendered with Pod::Text
(``pod2text -w 100 --utf8 --errors=none``). It writes, under ``benchmarks/data/``:

* ``perldoc-longdoc/``: long pages; query = the first sentence describing a function, method or variable,
  deleted from its page.
* ``perldoc-ref/``: query = the purpose in a page's NAME line; corpus = pages with the NAME section removed.
* ``perldoc-train/pairs.jsonl``: ``{"query", "positive", "source"}`` pairs (NAME purpose -> DESCRIPTION) from
  pages no dev set uses.
* ``perldoc-train/symbols.jsonl``: pairs of the same pages as perldoc-longdoc's queries are made (a symbol's first
  description sentence -> its item, the sentence deleted).
* ``README.md``: how each set is built and its sizes.

Everything is deterministic: the same installed packages give the same bytes.

    python benchmarks/build_perldoc.py [--out benchmarks/data]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import json
import re
import statistics
import subprocess
import textwrap
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("perl-doc", "perl-modules-5.36", "libperl5.36")
OUT = Path(__file__).parent / "data"
WIDTH = 100
POD2TEXT = ("pod2text", "-w", str(WIDTH), "--utf8", "--errors=none")

#: A page whose hashed name falls in the first TRAIN_PERCENT of 100 buckets is a training page.
SPLIT_SALT = "perldoc-split-v1"
TRAIN_PERCENT = 25

LONG_MIN_TOKENS = 1500
LONG_MAX_TOKENS = 30000
MAX_QUERIES_PER_PAGE = 15
MIN_QUERY_WORDS = 6
MAX_QUERY_WORDS = 40
#: Pages never used as longdoc documents: one page, hundreds of answers.
LONGDOC_EXCLUDED = ("perlfunc", "perlvar")
#: The perlfaq pages of the natural-question sets, and how many long dev pages join perlfaq-longdoc as distractors.
FAQ_PAGES = tuple(f"perlfaq{number}" for number in range(1, 10))
FAQ_DISTRACTORS = 100
#: A page holding the NAME purposes of this many other pages is an index (perltoc, perlmodlib, ...).
INDEX_MIN_PURPOSES = 10
#: Release notes: kept as documents, never a source of longdoc queries (items name upgraded modules).
DELTA_PAGE = re.compile(r"^perl\d*delta$")
#: A query sentence starts like prose or code (not "-- see 3.4 ..." cross-references).
QUERY_START = re.compile(r"[A-Za-z0-9$@%\"'(]")
#: perldoc-ref documents need this many words once NAME is removed (stubs such as "See Memoize." are left out).
REF_MIN_WORDS = 50
TRAIN_MAX_CHARS = 1500
TRAIN_MIN_CHARS = 150

ABBREVIATIONS = frozenset(
    ["e.g", "i.e", "eg", "ie", "etc", "vs", "cf", "viz", "al", "approx", "mr", "mrs", "dr", "st", "no", "resp",
     "esp", "incl"]
)


# ---------------------------------------------------------------------------------------------------------------
# Pod source: paragraphs and formatting codes
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Paragraph:
    """One pod paragraph.

    :param text: the raw paragraph text (no trailing newline).
    :param command: the command name (``head1``, ``item``, ...) or ``""`` for ordinary/verbatim text.
    :param verbatim: an indented (verbatim) paragraph.
    :param region: inside a ``=begin``/``=end`` region or a ``=for`` paragraph (not rendered as text).
    """

    text: str
    command: str = ""
    verbatim: bool = False
    region: bool = False

    @property
    def body(self) -> str:
        """The text after the command name (the whole text for non-commands)."""
        if not self.command:
            return self.text
        return self.text[len(self.command) + 1 :].strip()

    @property
    def ordinary(self) -> bool:
        """A plain text paragraph outside any region."""
        return not self.command and not self.verbatim and not self.region


def pod_paragraphs(source: str) -> list[Paragraph]:
    """Split a file into its pod paragraphs, dropping code, ``=cut``, ``=pod`` and ``=encoding``.

    Pod starts at any line beginning with ``=`` and a letter and runs to ``=cut``; within pod a line
    starting with ``=`` and a letter also starts a new paragraph (as Pod::Simple reads it).
    """
    paragraphs: list[Paragraph] = []
    lines: list[str] = []
    in_pod = False
    for line in source.splitlines():
        starts_command = re.match(r"=[a-zA-Z]", line) is not None
        if not in_pod and not starts_command:
            continue
        if starts_command or not line.strip():
            _flush(lines, paragraphs)
            lines = []
        if starts_command and re.match(r"=cut\b", line):
            in_pod = False
            continue
        in_pod = True
        if line.strip():
            lines.append(line.rstrip())
    _flush(lines, paragraphs)
    return _mark_regions(paragraphs)


def _flush(lines: list[str], paragraphs: list[Paragraph]) -> None:
    """Append the paragraph made of ``lines`` (if any and if it is not ``=pod``/``=encoding``)."""
    if not lines:
        return
    text = "\n".join(lines)
    match = re.match(r"=([a-zA-Z]\w*)", text)
    command = match.group(1) if match else ""
    if command in ("pod", "encoding"):
        return
    paragraphs.append(Paragraph(text=text, command=command, verbatim=not command and text[0] in " \t"))


def _mark_regions(paragraphs: list[Paragraph]) -> list[Paragraph]:
    """Flag paragraphs inside ``=begin``/``=end`` and ``=for`` paragraphs as regions."""
    depth = 0
    for paragraph in paragraphs:
        if paragraph.command == "begin":
            depth += 1
        paragraph.region = depth > 0 or paragraph.command == "for"
        if paragraph.command == "end":
            depth = max(0, depth - 1)
    return paragraphs


def pod_document(paragraphs: Iterable[Paragraph]) -> str:
    """A pure pod document (UTF-8 declared) made of ``paragraphs``."""
    return "=encoding utf8\n\n" + "".join(paragraph.text + "\n\n" for paragraph in paragraphs)


def _code_end(text: str, start: int) -> tuple[str, int, int]:
    """For a formatting code starting at ``start`` (``X<``), return its letter, content span end and code end.

    Handles ``X<...>`` (nesting inner codes) and ``X<< ... >>`` (ends at whitespace and as many ``>``).
    """
    letter = text[start]
    index = start + 1
    while index < len(text) and text[index] == "<":
        index += 1
    brackets = index - start - 1
    if brackets > 1 and index < len(text) and text[index].isspace():
        closer = re.compile(r"\s+" + ">" * brackets)
        match = closer.search(text, index)
        if match is None:
            return letter, len(text), len(text)
        return letter, match.start(), match.end()
    position = index
    while position < len(text):
        if text[position] == ">":
            return letter, position, position + 1
        if re.match(r"[A-Z]<", text[position : position + 2]):
            _, _, position = _code_end(text, position)
            continue
        position += 1
    return letter, len(text), len(text)


def _content_start(text: str, start: int) -> int:
    """Index of the first content character of the formatting code at ``start``."""
    index = start + 1
    while index < len(text) and text[index] == "<":
        index += 1
    return index


def code_spans(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of the top-level formatting codes in ``text``."""
    spans: list[tuple[int, int]] = []
    position = 0
    while True:
        match = re.compile(r"[A-Z]<").search(text, position)
        if match is None:
            return spans
        _, _, end = _code_end(text, match.start())
        spans.append((match.start(), end))
        position = end


def plain_text(text: str) -> str:
    """Pod text with its formatting codes resolved to plain text, whitespace collapsed."""
    return " ".join(_plain(text).split())


def _plain(text: str) -> str:
    """Resolve formatting codes (recursively) to plain text."""
    out: list[str] = []
    position = 0
    for start, end in code_spans(text):
        out.append(text[position:start])
        letter, content_end, _ = _code_end(text, start)
        content = text[_content_start(text, start) : content_end].strip(" ") if end > start else ""
        out.append(_resolve(letter, content))
        position = end
    out.append(text[position:])
    return "".join(out)


def _resolve(letter: str, content: str) -> str:
    """Plain text of one formatting code."""
    if letter in "XZ":
        return ""
    if letter == "E":
        return _entity(content)
    if letter == "L":
        return _link_text(content)
    return _plain(content)


def _entity(name: str) -> str:
    """``E<...>``: named, decimal or hex character."""
    named = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}
    if name in named:
        return named[name]
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", name):
        return chr(int(name, 16))
    if re.fullmatch(r"0[0-7]*", name) and len(name) > 1:
        return chr(int(name, 8))
    if name.isdigit():
        return chr(int(name))
    resolved = html.unescape(f"&{name};")
    return resolved if not resolved.startswith("&") else name


def _link_text(content: str) -> str:
    """``L<...>``: the link text, or ``section in page`` as Pod::Text shows it (without quotes)."""
    depth_free = _plain_outside_codes(content)
    if "|" in depth_free:
        return _plain(content[: depth_free.index("|")])
    if re.match(r"\w+:[^:\s]\S*$", content):
        return content
    page, _, section = content.partition("/")
    page, section = _plain(page).strip(), _plain(section).strip().strip('"')
    if section and page:
        return f"{section} in {page}"
    return section or page


def _plain_outside_codes(text: str) -> str:
    """``text`` with every formatting code's characters replaced by NULs (positions kept)."""
    chars = list(text)
    for start, end in code_spans(text):
        chars[start:end] = "\0" * (end - start)
    return "".join(chars)


# ---------------------------------------------------------------------------------------------------------------
# Sentences and headings
# ---------------------------------------------------------------------------------------------------------------


def first_sentence_end(text: str) -> int | None:
    """End offset of the first sentence of a pod paragraph, or None when it does not end a sentence.

    A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes or brackets) outside formatting codes,
    followed by whitespace and an upper-case letter, a digit, a quote or a bracket, and not after an
    abbreviation or a single initial. A paragraph that is one sentence must end with such punctuation.
    """
    masked = _plain_outside_codes(text)
    for match in re.finditer(r"[.!?][\"')\]]*(?=\s+[A-Z0-9\"'(\[\0]|\s*$)", masked):
        before = masked[: match.start()].rsplit(None, 1)
        word = before[-1].lower() if before else ""
        word = word.lstrip("(\"'")
        if match.group(0)[0] == "." and (word in ABBREVIATIONS or re.fullmatch(r"[a-z]", word)):
            continue
        return match.end()
    return None


_INVOCANT = r"(?:[$@%]?[A-Za-z_][\w:]*\s*->\s*)?"
_NAME = r"(?P<name>[$@%&]?[A-Za-z_][\w]*(?:::\w+)*|[$@%][^\s\w]|\$\d+|\$\^\w)"
_HEADING = re.compile(rf"^{_INVOCANT}{_NAME}(?P<rest>.*)$")
_ARGS = re.compile(r"^\s+[A-Z0-9_$@%&\\\[\](){},;=>|.\-'\"*\s]+$")
_MODULE = re.compile(r"^[A-Z]\w*(?:::[A-Z]\w*)+$")


def symbol_heading(heading: str) -> bool:
    """Whether a plain-text ``=item``/``=head2..4`` names a function, method or variable.

    Accepted: ``name``, ``$var``, ``$obj->name``, ``Class->name``, each optionally followed by ``(...)`` or by
    an argument list of upper-case words and sigils (``open FILEHANDLE,EXPR``). A bare name must look like
    code (a sigil, ``::``, ``_`` or a lower-case first letter), so prose headings and module names are not.
    """
    match = _HEADING.match(heading.strip())
    if match is None:
        return False
    name, rest = match.group("name"), match.group("rest")
    code_like = name[0] in "$@%&" or "_" in name or name[0].islower() or "->" in heading or "::" in name
    if _MODULE.match(name) and not rest:
        return False
    if not code_like:
        return False
    return not rest.strip() or rest.lstrip().startswith("(") or _ARGS.match(rest) is not None


# ---------------------------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Page:
    """One documentation page.

    :param name: ``perlre`` for a pod page, ``IO::Handle`` for a module.
    :param path: the file it comes from.
    :param package: the Debian package owning the file.
    :param paragraphs: its pod paragraphs.
    :param text: the rendered page (whitespace-normalised), filled by :func:`render_pages`.
    """

    name: str
    path: str
    package: str
    paragraphs: list[Paragraph]
    text: str = ""
    purpose: str = ""
    description: str = ""
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Approximate token count: words x 1.3."""
        return approx_tokens(self.text)


@dataclass
class Candidate:
    """A longdoc query candidate: the first sentence after a symbol heading.

    :param index: the paragraph it starts.
    :param end: the sentence's end offset in that paragraph's raw text.
    :param text: the sentence as plain text.
    """

    index: int
    end: int
    text: str


def approx_tokens(text: str) -> int:
    """Words x 1.3, rounded."""
    return round(len(text.split()) * 1.3)


def package_files(package: str) -> list[str]:
    """The ``.pm``/``.pod`` files a Debian package installs, sorted."""
    listing = subprocess.run(["dpkg-query", "-L", package], check=True, capture_output=True, text=True).stdout
    return sorted({line for line in listing.splitlines() if re.search(r"\.(pm|pod)$", line) and Path(line).is_file()})


def package_version(package: str) -> str:
    """The installed version of a Debian package."""
    command = ["dpkg-query", "-W", "-f=${Version}", package]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def page_name(path: str) -> str:
    """``perlre`` for ``.../pod/perlre.pod``, ``IO::Handle`` for ``.../perl/5.36.0/IO/Handle.pm``."""
    match = re.search(r"/perl/5\.36(?:\.\d+)?/(.+)\.(?:pm|pod)$", path)
    relative = match.group(1) if match else Path(path).stem
    if relative.startswith("pod/"):
        return relative[len("pod/") :]
    return relative.replace("/", "::")


def read_source(path: str) -> str:
    """Decode a file: its ``=encoding`` if declared, else UTF-8, else Latin-1."""
    data = Path(path).read_bytes()
    declared = re.search(rb"^=encoding\s+(\S+)", data, re.MULTILINE)
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"))
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def load_pages() -> list[Page]:
    """Every documented page of :data:`PACKAGES`, one per name (``.pod`` preferred over ``.pm``), sorted."""
    by_name: dict[str, Page] = {}
    for package in PACKAGES:
        for path in package_files(package):
            paragraphs = pod_paragraphs(read_source(path))
            if not any(paragraph.command == "head1" for paragraph in paragraphs):
                continue
            page = Page(name=page_name(path), path=path, package=package, paragraphs=paragraphs)
            known = by_name.get(page.name)
            if known is None or (known.path.endswith(".pm") and path.endswith(".pod")):
                by_name[page.name] = page
    return [by_name[name] for name in sorted(by_name)]


def section(paragraphs: list[Paragraph], title: str) -> tuple[int, int] | None:
    """``(start, end)`` paragraph indexes of the ``=head1 title`` section (heading included)."""
    for index, paragraph in enumerate(paragraphs):
        if paragraph.command == "head1" and plain_text(paragraph.body).upper() == title:
            end = next((j for j in range(index + 1, len(paragraphs)) if paragraphs[j].command == "head1"),
                       len(paragraphs))
            return index, end
    return None


def name_purpose(page: Page) -> str:
    """The purpose after `` - `` in the NAME paragraph, or ``""`` when there is no usable NAME line."""
    span = section(page.paragraphs, "NAME")
    if span is None:
        return ""
    body = next((p for p in page.paragraphs[span[0] + 1 : span[1]] if p.ordinary), None)
    if body is None:
        return ""
    line = plain_text(body.text)
    match = re.match(r"^\S.*?\s+-+\s+(.+)$", line)
    if match is None:
        return ""
    purpose = match.group(1).strip()
    return purpose if len(purpose.split()) >= 2 else ""


def without_name(page: Page) -> list[Paragraph]:
    """The page's paragraphs without its NAME section."""
    span = section(page.paragraphs, "NAME")
    if span is None:
        return list(page.paragraphs)
    return page.paragraphs[: span[0]] + page.paragraphs[span[1] :]


def find_candidates(page: Page) -> list[Candidate]:
    """First sentences of the first paragraph after each symbol heading (run of headings), in page order."""
    found: list[Candidate] = []
    paragraphs = page.paragraphs
    for index, paragraph in enumerate(paragraphs):
        if not paragraph.ordinary or index == 0:
            continue
        heads = _preceding_headings(paragraphs, index)
        if not heads or not all(symbol_heading(plain_text(head.body)) for head in heads):
            continue
        end = first_sentence_end(paragraph.text)
        if end is None:
            continue
        sentence = plain_text(paragraph.text[:end])
        if MIN_QUERY_WORDS <= len(sentence.split()) <= MAX_QUERY_WORDS and QUERY_START.match(sentence):
            found.append(Candidate(index=index, end=end, text=sentence))
    return found


def _preceding_headings(paragraphs: list[Paragraph], index: int) -> list[Paragraph]:
    """The run of ``=item``/``=head2..4`` paragraphs right before paragraph ``index`` (index-only text skipped)."""
    heads: list[Paragraph] = []
    position = index - 1
    while position >= 0:
        paragraph = paragraphs[position]
        if paragraph.command in ("item", "head2", "head3", "head4"):
            heads.append(paragraph)
        elif not (paragraph.ordinary and not plain_text(paragraph.text)) and paragraph.command != "for":
            break
        position -= 1
    return heads


def render(paragraphs: list[Paragraph]) -> str:
    """Render pod paragraphs with pod2text; runs of spaces collapsed, trailing space and extra blank lines cut."""
    result = subprocess.run(POD2TEXT, input=pod_document(paragraphs).encode("utf-8"), capture_output=True,
                            check=True)
    return normalise_layout(result.stdout.decode("utf-8"))


def normalise_layout(text: str) -> str:
    """Collapse runs of blanks within lines (as the manpages sets do) and of blank lines; strip the ends."""
    lines = [re.sub(r"[ \t]+", " ", line).rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def rendered_section(text: str, title: str) -> str:
    """The body of a rendered ``=head1`` section (flush-left heading line), whitespace collapsed."""
    match = re.search(rf"^{re.escape(title)}\n(.*?)(?=^\S|\Z)", text, re.MULTILINE | re.DOTALL)
    return " ".join(match.group(1).split()) if match else ""


def word_key(text: str) -> str:
    """Lower-case alphanumeric words joined by spaces: the form used to test for verbatim occurrence."""
    return " ".join(re.findall(r"[0-9a-z]+", text.lower()))


def opaque_id(prefix: str, salt: str, name: str) -> str:
    """``prefix`` plus the first 12 hex digits of sha1(salt:name)."""
    return prefix + hashlib.sha1(f"{salt}:{name}".encode()).hexdigest()[:12]


def is_train_page(name: str) -> bool:
    """The page split: a page is for training when sha1 of its name falls in the first TRAIN_PERCENT buckets."""
    bucket = int(hashlib.sha1(f"{SPLIT_SALT}:{name}".encode()).hexdigest(), 16) % 100
    return bucket < TRAIN_PERCENT


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters: at the last sentence end past 2/3 of it, else a space."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    stops = [match.end() for match in re.finditer(r"[.!?](?=\s)", head) if match.end() >= limit * 2 // 3]
    if stops:
        return head[: stops[-1]]
    return head[: head.rfind(" ")] if " " in head else head


# ---------------------------------------------------------------------------------------------------------------
# Sets
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class BeirSet:
    """A BEIR set: documents ``(id, text)``, queries ``(id, text)`` and qrels ``(query id, doc id)``."""

    docs: list[tuple[str, str]]
    queries: list[tuple[str, str]]
    qrels: list[tuple[str, str]]
    notes: dict[str, int] = field(default_factory=dict)


def index_pages(pages: list[Page]) -> set[str]:
    """Pages whose rendered text holds the NAME purposes (3+ words) of INDEX_MIN_PURPOSES other pages."""
    keys = [(page.name, word_key(page.purpose)) for page in pages if len(page.purpose.split()) >= 3]
    found: set[str] = set()
    for page in pages:
        text = f" {word_key(page.text)} "
        hits = sum(1 for name, key in keys if name != page.name and f" {key} " in text)
        if hits >= INDEX_MIN_PURPOSES:
            found.add(page.name)
    return found


def long_pages_of(pages: list[Page]) -> list[Page]:
    """The pages of perldoc-longdoc's length, less :data:`LONGDOC_EXCLUDED`."""
    return [page for page in pages if LONG_MIN_TOKENS <= page.tokens <= LONG_MAX_TOKENS
            and page.name not in LONGDOC_EXCLUDED]


def build_longdoc(pages: list[Page]) -> BeirSet:
    """perldoc-longdoc: long pages, each symbol's first description sentence deleted and used as a query."""
    salt = "perldoc-longdoc"
    long_pages = long_pages_of(pages)
    counts = Counter(word_key(c.text) for page in long_pages for c in find_candidates(page)
                     if not DELTA_PAGE.match(page.name))
    chosen: dict[str, list[Candidate]] = {}
    for page in long_pages:
        if DELTA_PAGE.match(page.name):
            continue
        unique = [c for c in find_candidates(page) if counts[word_key(c.text)] == 1]
        unique.sort(key=lambda c: hashlib.sha1(f"{salt}:{page.name}:{c.text}".encode()).hexdigest())
        chosen[page.name] = sorted(unique[:MAX_QUERIES_PER_PAGE], key=lambda c: c.index)
    docs = [(opaque_id("d", salt, page.name), render(delete_sentences(page, chosen.get(page.name, []))))
            for page in long_pages]
    haystack = " \n ".join(f" {word_key(text)} " for _, text in docs)
    queries: list[tuple[str, str]] = []
    qrels: list[tuple[str, str]] = []
    leaked = 0
    for page in long_pages:
        for candidate in chosen.get(page.name, []):
            if f" {word_key(candidate.text)} " in haystack:
                leaked += 1
                continue
            query_id = opaque_id("q", salt, f"{page.name}:{candidate.index}")
            queries.append((query_id, candidate.text))
            qrels.append((query_id, opaque_id("d", salt, page.name)))
    duplicated = sum(count for count in counts.values() if count > 1)
    per_page = Counter(doc_id for _, doc_id in qrels)
    notes = {"candidates_duplicated_dropped": duplicated, "selected_but_found_verbatim_dropped": leaked,
             "pages_with_queries": len(per_page),
             "pages_at_cap": sum(1 for count in per_page.values() if count == MAX_QUERIES_PER_PAGE)}
    return BeirSet(docs=docs, queries=queries, qrels=qrels, notes=notes)


def delete_sentences(page: Page, candidates: list[Candidate]) -> list[Paragraph]:
    """The page's paragraphs with each candidate's sentence removed (an emptied paragraph is dropped)."""
    by_index = {candidate.index: candidate for candidate in candidates}
    kept: list[Paragraph] = []
    for index, paragraph in enumerate(page.paragraphs):
        candidate = by_index.get(index)
        if candidate is None:
            kept.append(paragraph)
            continue
        rest = paragraph.text[candidate.end :].strip()
        if rest:
            kept.append(Paragraph(text=rest))
    return kept


def build_ref(pages: list[Page]) -> BeirSet:
    """perldoc-ref: NAME purpose -> the pages (NAME section removed) that carry it."""
    salt = "perldoc-ref"
    rendered = [(page, render(without_name(page))) for page in pages if page.purpose]
    named = [page for page, text in rendered if len(text.split()) >= REF_MIN_WORDS]
    docs = [(opaque_id("d", salt, page.name), text) for page, text in rendered if len(text.split()) >= REF_MIN_WORDS]
    texts = {doc_id: f" {word_key(text)} " for doc_id, text in docs}
    groups: dict[str, list[Page]] = defaultdict(list)
    for page in named:
        groups[word_key(page.purpose)].append(page)
    queries: list[tuple[str, str]] = []
    qrels: list[tuple[str, str]] = []
    leaked = self_matches = 0
    for key in sorted(groups, key=lambda k: (groups[k][0].purpose, k)):
        members = groups[key]
        relevant = {opaque_id("d", salt, page.name) for page in members}
        if any(f" {key} " in text for doc_id, text in texts.items() if doc_id not in relevant):
            leaked += 1
            continue
        self_matches += any(f" {key} " in texts[doc_id] for doc_id in relevant)
        query_id = opaque_id("q", salt, key)
        queries.append((query_id, members[0].purpose))
        qrels.extend((query_id, doc_id) for doc_id in sorted(relevant))
    notes = {"stub_pages_left_out": len(rendered) - len(named),
             "found_verbatim_in_another_page_dropped": leaked,
             "kept_found_verbatim_in_own_page": self_matches,
             "multi_relevant_queries": sum(1 for count in Counter(q for q, _ in qrels).values() if count > 1)}
    return BeirSet(docs=docs, queries=queries, qrels=qrels, notes=notes)


def build_train(pages: list[Page], dev_queries: set[str]) -> list[dict[str, str]]:
    """Training pairs (NAME purpose -> start of DESCRIPTION) from training pages.

    A pair is skipped when its query is a dev query or its positive holds one (by word sequence).
    """
    pairs: list[dict[str, str]] = []
    for page in pages:
        positive = truncate(page.description, TRAIN_MAX_CHARS)
        if not page.purpose or len(positive) < TRAIN_MIN_CHARS or word_key(page.purpose) in dev_queries:
            continue
        words = f" {word_key(positive)} "
        if any(f" {key} " in words for key in dev_queries):
            continue
        pairs.append({"query": page.purpose, "positive": positive, "source": page.name})
    return pairs


def faq_entries(page: Page) -> list[tuple[int, int, str]]:
    """A perlfaq page's questions: ``(heading index, answer end index, question)`` for each ``=head2``, the answer
    being the paragraphs after it up to the next ``=head1``/``=head2``."""
    paragraphs = page.paragraphs
    entries = []
    for index, paragraph in enumerate(paragraphs):
        if paragraph.command != "head2":
            continue
        end = next((j for j in range(index + 1, len(paragraphs)) if paragraphs[j].command in ("head1", "head2")),
                   len(paragraphs))
        entries.append((index, end, " ".join(plain_text(paragraph.body).split())))
    return entries


def build_faq_answers(faqs: list[Page]) -> BeirSet:
    """perlfaq-answers: each perlfaq question -> its answer, rendered alone as one document."""
    salt = "perlfaq-answers"
    entries = [(page, index, end, question) for page in faqs for index, end, question in faq_entries(page)]
    docs = [(opaque_id("d", salt, f"{page.name}:{index}"), render(page.paragraphs[index + 1 : end]))
            for page, index, end, _ in entries]
    return faq_queries(salt, docs, [(question, opaque_id("d", salt, f"{page.name}:{index}"))
                                     for page, index, _, question in entries])


def build_faq_longdoc(faqs: list[Page], long_pages: list[Page]) -> BeirSet:
    """perlfaq-longdoc: each ``=head1`` section of a perlfaq page that holds questions, the question headings cut
    out, as one document; the questions as queries; long dev pages as distractors."""
    salt = "perlfaq-longdoc"
    docs: list[tuple[str, str]] = []
    asked: list[tuple[str, str]] = []
    for page in faqs:
        paragraphs = page.paragraphs
        starts = [i for i, paragraph in enumerate(paragraphs) if paragraph.command == "head1"]
        for start, end in zip(starts, [*starts[1:], len(paragraphs)]):
            questions = [p for p in paragraphs[start:end] if p.command == "head2"]
            if not questions:
                continue
            doc_id = opaque_id("d", salt, f"{page.name}:{start}")
            docs.append((doc_id, render([p for p in paragraphs[start:end] if p.command != "head2"])))
            asked += [(" ".join(plain_text(p.body).split()), doc_id) for p in questions]
    distractors = sorted(long_pages, key=lambda page: hashlib.sha1(f"{salt}:{page.name}".encode()).hexdigest())
    docs += [(opaque_id("d", salt, page.name), page.text) for page in distractors[:FAQ_DISTRACTORS]]
    return faq_queries(salt, docs, asked)


def faq_queries(salt: str, docs: list[tuple[str, str]], asked: list[tuple[str, str]]) -> BeirSet:
    """The queries of a perlfaq set: each ``(question, relevant doc id)`` of ``asked``, but a question asked twice
    (same word sequence) and one whose word sequence occurs in a document it is not relevant to are dropped."""
    counts = Counter(word_key(question) for question, _ in asked)
    texts = {doc_id: f" {word_key(text)} " for doc_id, text in docs}
    queries: list[tuple[str, str]] = []
    qrels: list[tuple[str, str]] = []
    leaked = 0
    for question, relevant in asked:
        key = word_key(question)
        if counts[key] > 1:
            continue
        if any(f" {key} " in text for doc_id, text in texts.items() if doc_id != relevant):
            leaked += 1
            continue
        query_id = opaque_id("q", salt, key)
        queries.append((query_id, question))
        qrels.append((query_id, relevant))
    notes = {"asked_twice_dropped": sum(count for count in counts.values() if count > 1),
             "found_verbatim_in_another_document_dropped": leaked}
    return BeirSet(docs=docs, queries=queries, qrels=qrels, notes=notes)


# ---------------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------------


def build_train_symbols(pages: list[Page], dev_queries: set[str]) -> list[dict[str, str]]:
    """Training pairs from training pages, made as perldoc-longdoc's queries are: a symbol's first description
    sentence -> the symbol's item (its heading run and the paragraphs after it, up to the next heading, with the
    sentence deleted), rendered alone and cut like the other pairs' positives.

    Candidates whose word sequence occurs twice among all training pages' candidates are dropped, at most
    :data:`MAX_QUERIES_PER_PAGE` per page are kept (first by sha1), and a pair is skipped when its query is a dev
    query or its positive holds one (by word sequence) or the query itself.
    """
    salt = "perldoc-train-symbols"
    counts = Counter(word_key(c.text) for page in pages for c in find_candidates(page))
    pairs: list[dict[str, str]] = []
    for page in pages:
        unique = [c for c in find_candidates(page) if counts[word_key(c.text)] == 1]
        unique.sort(key=lambda c: hashlib.sha1(f"{salt}:{page.name}:{c.text}".encode()).hexdigest())
        for candidate in sorted(unique[:MAX_QUERIES_PER_PAGE], key=lambda c: c.index):
            key = word_key(candidate.text)
            if key in dev_queries:
                continue
            positive = truncate(" ".join(render(symbol_item(page, candidate)).split()), TRAIN_MAX_CHARS)
            words = f" {word_key(positive)} "
            if len(positive) < TRAIN_MIN_CHARS or f" {key} " in words or any(f" {q} " in words for q in dev_queries):
                continue
            pairs.append({"query": candidate.text, "positive": positive, "source": page.name})
    return pairs


def symbol_item(page: Page, candidate: Candidate) -> list[Paragraph]:
    """A candidate's item: its heading run, the rest of its paragraph and the paragraphs up to the next command
    (inside ``=over``/``=back`` when the headings are items)."""
    paragraphs = page.paragraphs
    heads = _preceding_headings(paragraphs, candidate.index)
    first = paragraphs.index(heads[-1])
    body: list[Paragraph] = list(paragraphs[first : candidate.index])
    rest = paragraphs[candidate.index].text[candidate.end :].strip()
    if rest:
        body.append(Paragraph(text=rest))
    for paragraph in paragraphs[candidate.index + 1 :]:
        if paragraph.command:
            break
        if not paragraph.region:
            body.append(paragraph)
    if any(head.command == "item" for head in heads):
        body = [Paragraph(text="=over 4", command="over"), *body, Paragraph(text="=back", command="back")]
    return body


def write_jsonl(path: Path, records: Iterable[dict[str, str]], compress: bool = False) -> None:
    """Write JSON lines (UTF-8, not ASCII-escaped); gzip without a name or time stamp when ``compress``."""
    data = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
            packed.write(data)
    else:
        path.write_bytes(data)


def write_beir(folder: Path, beir: BeirSet) -> None:
    """Write ``corpus.jsonl.gz``, ``queries.jsonl`` and ``qrels/test.tsv`` (queries sorted by text)."""
    write_jsonl(folder / "corpus.jsonl.gz", ({"_id": i, "title": "", "text": t} for i, t in beir.docs), compress=True)
    write_jsonl(folder / "queries.jsonl", ({"_id": i, "text": t} for i, t in sorted(beir.queries, key=_by_text)))
    order = {query_id: rank for rank, (query_id, _) in enumerate(sorted(beir.queries, key=_by_text))}
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{d}\t1" for q, d in sorted(beir.qrels, key=lambda pair: (order[pair[0]], pair[1]))]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _by_text(query: tuple[str, str]) -> tuple[str, str]:
    """Sort key: query text, then id."""
    return query[1], query[0]


def reflow(markdown: str, width: int = 110) -> str:
    """Rewrap the prose paragraphs of a Markdown text to ``width`` columns (headings and tables kept)."""
    blocks = []
    for block in markdown.strip("\n").split("\n\n"):
        if block.startswith(("#", "|")):
            blocks.append(block)
        else:
            blocks.append(textwrap.fill(" ".join(block.split()), width, break_long_words=False, break_on_hyphens=False))
    return "\n\n".join(blocks) + "\n"


def pod_text_version() -> str:
    """The installed Pod::Text version."""
    command = ["perl", "-MPod::Text", "-e", "print $Pod::Text::VERSION"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def table_row(folder: str, beir: BeirSet) -> str:
    """One README table row: sizes and token distributions of a BEIR set."""
    stats = set_stats(beir)
    cells = [f"`{folder}`", stats["docs"], stats["queries"], stats["qrels"], stats["doc tokens"], stats["query tokens"]]
    return "| " + " | ".join(cells) + " |"


def distribution(values: list[int]) -> str:
    """``min / median / max`` of token counts."""
    return f"{min(values):,} / {round(statistics.median(values)):,} / {max(values):,}"


def set_stats(beir: BeirSet) -> dict[str, str]:
    """Sizes of a set for the README table."""
    return {"docs": f"{len(beir.docs):,}", "queries": f"{len(beir.queries):,}", "qrels": f"{len(beir.qrels):,}",
            "doc tokens": distribution([approx_tokens(text) for _, text in beir.docs]),
            "query tokens": distribution([approx_tokens(text) for _, text in beir.queries])}


def file_sizes(out: Path, folders: list[str]) -> str:
    """Bytes on disk of each written folder."""
    parts = []
    for folder in folders:
        total = sum(path.stat().st_size for path in (out / folder).rglob("*") if path.is_file())
        parts.append(f"`{folder}/` {total / 1e6:.2f} MB")
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------


def prepare(pages: list[Page]) -> None:
    """Render every page whole and fill its NAME purpose and DESCRIPTION text."""
    for page in pages:
        page.text = render(page.paragraphs)
        page.purpose = name_purpose(page)
        page.description = rendered_section(page.text, "DESCRIPTION")


def main() -> None:
    """Build every set under ``--out`` and its README."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (default: benchmarks/data)")
    args = parser.parse_args()
    pages = load_pages()
    prepare(pages)
    indexes = index_pages(pages)
    usable = [page for page in pages if page.name not in indexes]
    dev = [page for page in usable if not is_train_page(page.name)]
    train = [page for page in usable if is_train_page(page.name)]
    longdoc = build_longdoc(dev)
    ref = build_ref(dev)
    dev_queries = {word_key(text) for beir in (longdoc, ref) for _, text in beir.queries}
    pairs = build_train(train, dev_queries)
    symbols = build_train_symbols(train, dev_queries)
    faqs = [page for page in pages if page.name in FAQ_PAGES]
    faq_answers = build_faq_answers(faqs)
    faq_longdoc = build_faq_longdoc(faqs, [page for page in long_pages_of(dev) if page.name not in FAQ_PAGES])
    write_beir(args.out / "perldoc-longdoc", longdoc)
    write_beir(args.out / "perldoc-ref", ref)
    write_jsonl(args.out / "perldoc-train" / "pairs.jsonl", pairs)
    write_jsonl(args.out / "perldoc-train" / "symbols.jsonl", symbols)
    write_beir(args.out / "perlfaq-answers", faq_answers)
    write_beir(args.out / "perlfaq-longdoc", faq_longdoc)
    facts = {"pages": len(pages), "index_pages": sorted(indexes), "dev_pages": len(dev), "train_pages": len(train),
             "train_skipped": sum(1 for page in train if page.purpose) - len(pairs)}
    readme = reflow(readme_text(args.out, longdoc, ref, pairs, symbols, facts)
                    + faq_readme_text(args.out, faq_answers, faq_longdoc, [page.name for page in train]))
    (args.out / "README.md").write_text(readme, encoding="utf-8")
    print(readme)


def readme_text(out: Path, longdoc: BeirSet, ref: BeirSet, pairs: list[dict[str, str]],
                symbols: list[dict[str, str]], facts: dict) -> str:
    """The README of the written sets: sources, method, sizes and rules."""
    versions = ", ".join(f"`{package}` {package_version(package)}" for package in PACKAGES)
    positive = distribution([len(pair["positive"]) for pair in pairs])
    pair_tokens = distribution([approx_tokens(pair["positive"]) for pair in pairs])
    symbol_tokens = distribution([approx_tokens(pair["positive"]) for pair in symbols])
    symbol_chars = distribution([len(pair["positive"]) for pair in symbols])
    symbol_pages = len({pair["source"] for pair in symbols})
    notes_long, notes_ref = longdoc.notes, ref.notes
    return f"""# perldoc retrieval sets (BEIR format)

Generated by `python benchmarks/build_perldoc.py` (do not edit by hand; rerunning gives the same bytes). The
format is that of `../shared/data` (the manpages sets): each folder holds `corpus.jsonl.gz` (`_id`,
`title` (empty), `text`), `queries.jsonl` (`_id`, `text`) and `qrels/test.tsv` (header
`query-id corpus-id score`, score 1); they load with `lmk_rag.eval.beir.load_beir`. Ids are `d`/`q` plus the
first 12 hex digits of sha1 of a set-specific salt and the page name (or query key): opaque, and salted per
set, so the same page has different ids in different sets. No pipeline may read ids, qrels, the `source` of
training pairs or anything but the document and query texts. These are dev sets: tune and report on them.

`unixfaq-answers/` and `unixfaq-longdoc/` are not among them: `python benchmarks/build_unixfaq.py` builds them
from the FAQs of other projects (each folder's README.md says how). They are held out: report them, never tune
on them.

## Source

Debian 12 packages {versions} (Perl 5.36): the pod pages of perl-doc (`/usr/share/perl/5.36.0/pod/*.pod`) and
the `.pm`/`.pod` files of the core modules (`/usr/share/perl/5.36.0`, `/usr/lib/x86_64-linux-gnu/perl/5.36.0`)
that have a `=head1` section; a `.pod` beats a `.pm` of the same module. That is {facts["pages"]:,} pages (`perlre`,
`IO::Handle`, ...). perl-base's modules carry no pod and are not used. Each page's pod (code dropped) is
rendered by Pod::Text {pod_text_version()} as `pod2text -w {WIDTH} --utf8 --errors=none`; runs of spaces are
then collapsed to one (as in the manpages sets) and runs of blank lines to one.

Lengths are approximate tokens: words x 1.3 (whitespace-separated words). Count with your tokenizer when it
matters.

Pages left out of every set: index pages, whose text holds the NAME purposes (3+ words) of {INDEX_MIN_PURPOSES}
or more other pages and would answer the perldoc-ref queries: {", ".join(f"`{name}`" for name in facts["index_pages"])}.

**Page split.** A page is a training page when `int(sha1("{SPLIT_SALT}:" + page name), 16) % 100 <
{TRAIN_PERCENT}`, else a dev page: {facts["dev_pages"]:,} dev pages, {facts["train_pages"]:,} training pages.
Both dev sets (documents and queries) use dev pages only; `perldoc-train` uses training pages only, so no page
is in both.

## Sets

| folder | docs | queries | qrels | doc tokens min / median / max | query tokens min / median / max |
|---|---|---|---|---|---|
{table_row("perldoc-longdoc/", longdoc)}
{table_row("perldoc-ref/", ref)}
| `perldoc-train/pairs.jsonl` | | {len(pairs):,} pairs | | positive tokens {pair_tokens} | |
| `perldoc-train/symbols.jsonl` | | {len(symbols):,} pairs, {symbol_pages} pages | | positive tokens {symbol_tokens} | |

On disk: {file_sizes(out, ["perldoc-longdoc", "perldoc-ref", "perldoc-train"])}.

### `perldoc-longdoc/`: a symbol's description sentence -> its long page

Documents: every dev page whose full rendering is {LONG_MIN_TOKENS:,}-{LONG_MAX_TOKENS:,} tokens, except
{" and ".join(f"`{name}`" for name in LONGDOC_EXCLUDED)} (one page with hundreds of answers). Release notes
(`perl*delta`) stay as documents but give no queries (their items name upgraded modules). The documents carry
no title; the NAME section is kept.

Queries: in pod, a run of `=item` / `=head2`..`=head4` headings that name a function, method or variable
(`name`, `$var`, `$obj->name`, `Class->name`, optionally followed by `(...)` or by upper-case/sigil arguments
such as `open FILEHANDLE,EXPR`; a bare name must look like code: a sigil, `::`, `_` or a lower-case first
letter; prose headings and bare module names are not symbols), directly followed by an ordinary paragraph.
The query is that paragraph's first sentence (ends at `.`/`!`/`?` outside formatting codes, followed by a
capital, digit, quote, bracket or formatting code; not after e.g./i.e./etc. or an initial), formatting codes
resolved to plain text (`C<x>` -> `x`, `L<text|page>` -> `text`, `L<page/sec>` -> `sec in page`),
{MIN_QUERY_WORDS}-{MAX_QUERY_WORDS} words, starting with a letter, digit, sigil, quote or bracket. Sentences
whose word sequence (lower-cased alphanumeric words) occurs twice among the candidates of all long pages are
dropped (all copies; {notes_long["candidates_duplicated_dropped"]} candidates). Per page at most
{MAX_QUERIES_PER_PAGE} are kept: the first by sha1("perldoc-longdoc:" + page + ":" + sentence). Each kept
sentence is deleted from its pod paragraph (an emptied paragraph is dropped) before the page is rendered; the
heading and the rest of the paragraph stay. A kept query whose word sequence still occurs in any document (its
own page elsewhere, or another page) is dropped ({notes_long["selected_but_found_verbatim_dropped"]}). The
relevant document is the query's page, one per query. Document lengths are after the deletions, so a few fall
below {LONG_MIN_TOKENS:,}.

Caveats: only {notes_long["pages_with_queries"]} of the {len(longdoc.docs)} pages are queried (tutorials,
release notes and pages without symbol items give none), {notes_long["pages_at_cap"]} of them at the cap of
{MAX_QUERIES_PER_PAGE}; many queries are terse API phrasing ("Returns true if ...", "This method ...") whose
subject is only named by the heading, so some are ambiguous across similar modules (IO::*, ExtUtils::MM_*,
TAP::*, Test2::*) even though no query occurs verbatim in any document.

### `perldoc-ref/`: a NAME purpose -> the page(s)

Documents: every dev page, of any length, whose NAME paragraph reads `Name - purpose` (purpose of 2+ words),
rendered without its NAME section, and with at least {REF_MIN_WORDS} words left
({notes_ref["stub_pages_left_out"]} stub pages such as "See Memoize." are left out). Query: the purpose text (the
name before ` - ` is not part of it). Pages whose purposes have the same word sequence share one query, all of them
relevant ({notes_ref["multi_relevant_queries"]} such queries). A purpose whose word sequence occurs in a page it is not
relevant to is dropped ({notes_ref["found_verbatim_in_another_page_dropped"]}; such a page cites it, usually in SEE
ALSO); {notes_ref["kept_found_verbatim_in_own_page"]} kept queries occur verbatim in their own page (a DESCRIPTION
repeating the NAME line). Pages whose query is dropped stay in the corpus.

### `perldoc-train/pairs.jsonl`: training pairs

`{{"query", "positive", "source"}}` per training page with a NAME purpose: query = the purpose, positive = the
rendered `DESCRIPTION` section, whitespace collapsed to single spaces, cut to at most {TRAIN_MAX_CHARS:,} characters (at
the last sentence end in its final third, else at a space), kept when at least {TRAIN_MIN_CHARS} characters; source =
the page name. Pairs whose query has the word sequence of a dev query, or whose positive contains one, are
skipped; {facts["train_skipped"]} training
pages with a purpose give no pair (no or a short DESCRIPTION, or a dev query). Positive length in characters
(min / median / max): {positive}. Train and mine negatives only from here, never from the dev corpora.

### `perldoc-train/symbols.jsonl`: training pairs of perldoc-longdoc's kind

Same fields, from the same training pages (any length), made as perldoc-longdoc's queries are: the query is a
symbol's first description sentence (same rules; a candidate whose word sequence occurs twice among the
training pages' candidates is dropped; at most {MAX_QUERIES_PER_PAGE} per page, the first by
sha1("perldoc-train-symbols:" + page + ":" + sentence)); the positive is the symbol's item (its heading run, the
rest of the sentence's paragraph and the following paragraphs up to the next pod command) rendered alone, the
sentence deleted, whitespace collapsed, cut as above and kept when at least {TRAIN_MIN_CHARS} characters. Pairs
whose query is a dev query, or whose positive contains a dev query or the query itself, are skipped. Positive
length in characters (min / median / max): {symbol_chars}. Added after the dev sets were measured (they are
unchanged); training data only.
"""


def faq_readme_text(out: Path, answers: BeirSet, longdoc: BeirSet, train_pages: list[str]) -> str:
    """The README's part on the natural-question sets."""
    faq_train = [name for name in FAQ_PAGES if name in train_pages]
    return f"""
## Natural questions: the perlfaq sets

Built after the sets above were measured, by the same script from the same packages, before any pipeline ran on
them: the questions are the `=head2` headings of {FAQ_PAGES[0]}..{FAQ_PAGES[-1]}, questions people asked, as
written by the FAQ's authors (formatting codes resolved to plain text). A question asked twice (same word
sequence) is dropped ({answers.notes["asked_twice_dropped"]}), and so is a question whose word sequence occurs in a
document it is not relevant to (an answer that cites it: {answers.notes["found_verbatim_in_another_document_dropped"]}
in perlfaq-answers, {longdoc.notes["found_verbatim_in_another_document_dropped"]} in perlfaq-longdoc). One relevant
document per query.

| folder | docs | queries | qrels | doc tokens min / median / max | query tokens min / median / max |
|---|---|---|---|---|---|
{table_row("perlfaq-answers/", answers)}
{table_row("perlfaq-longdoc/", longdoc)}

On disk: {file_sizes(out, ["perlfaq-answers", "perlfaq-longdoc"])}.

### `perlfaq-answers/`: a question -> its answer

Documents: each question's answer (the paragraphs after its heading up to the next `=head1`/`=head2`), rendered
alone, without the question: short documents, some of a single line ("See perlfaq5").

### `perlfaq-longdoc/`: a question -> the long FAQ section that answers it

Documents: each `=head1` section of a perlfaq page that holds questions (perlfaq4's six `Data: ...` sections, the
`DESCRIPTION` of the others), rendered with its question headings cut out (the answers stay, in order), plus
{FAQ_DISTRACTORS} distractors: the first dev pages of perldoc-longdoc's length by sha1("perlfaq-longdoc:" + page
name), rendered whole. So a query must find the section whose answer it asks for, among sections that all read
like FAQ answers.

Caveat: {", ".join(f"`{name}`" for name in faq_train)} are training pages of the split above (an index page such as
`perlfaq3` is in neither part of the split). perldoc-train/pairs.jsonl holds their NAME purpose -> the first
{TRAIN_MAX_CHARS:,} characters of their DESCRIPTION, so the shipped projection saw the opening of those sections
(never a question); no other training data comes from perlfaq.
"""


if __name__ == "__main__":
    main()
