"""Build ``tcl-ref`` and ``tcl-needle-L2048`` (BEIR format), held-out sets of a domain no dev set or training pair
comes from: the Tcl 8.6 manual pages Debian 12 installs with ``tcl8.6-doc`` (section 3tcl: the commands and the C
library).

* ``tcl-ref/``: query = the purpose in a page's NAME line (``after - Execute a command after a time delay`` ->
  ``Execute a command after a time delay``); corpus = every page with its title line and NAME section removed, as
  the shared ``manpages-longdoc`` set is built from sections 2, 3, 5 and 7. Pages sharing one purpose are all
  relevant to it.
* ``tcl-needle-L2048/``: as the shared ``manpages-needle`` sets are built: a page's purpose -> the first ~700
  characters of its DESCRIPTION, hidden in a haystack of other manual pages (sections 1 and 8 of this machine) of
  about 2,048 tokens, at relative position 0, 0.25, 0.5, 0.75 or 1; ``needles.jsonl`` records each needle's char
  span in its document (``corpus-id``, ``start``, ``end``, as the shared sets' ``needles.jsonl``), for measures of
  where the answer is (benchmarks/evidence_bench.py), never for ranking.

Held out: report them, never tune on them. Deterministic: the same installed packages give the same bytes.
``--needles-only`` records the needles of the set already written (its haystacks come from the machine that built
it): each needle is found in its document by its text.

    python benchmarks/build_tclref.py [--out benchmarks/data] [--needles-only]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from build_perldoc import OUT, BeirSet, normalise_layout, opaque_id, package_version, reflow, set_stats, write_beir

PACKAGE = "tcl8.6-doc"
PAGES = Path("/usr/share/man/man3")
SUFFIX = ".3tcl.gz"
REF = "tcl-ref"
NEEDLE = "tcl-needle-L2048"
#: Rendered as the shared manual-page sets are: ``man -P cat`` at 100 columns.
WIDTH = "100"
#: A purpose of fewer words gives no query (a bare name or a one-word label says nothing to search for).
MIN_PURPOSE_WORDS = 3
#: A page of fewer words once NAME is removed is no document (a stub pointing elsewhere).
MIN_PAGE_WORDS = 30
#: The needle sets' haystack pages, the sections the shared needle sets take theirs from.
HAYSTACK_PAGES = (Path("/usr/share/man/man1"), Path("/usr/share/man/man8"))
#: A haystack's length in approximate tokens (words x 1.3, as every builder counts), its needle's characters, the
#: number of needles and their relative positions (the i-th needle at ``POSITIONS[i % 5]``).
HAYSTACK_TOKENS = 2048
NEEDLE_CHARS = 700
NEEDLES = 200
POSITIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


class Page(NamedTuple):
    """A rendered Tcl page: its file name, NAME purpose and text without the title line and NAME section."""

    name: str
    purpose: str
    text: str


def rendered(path: Path) -> str:
    """A page as ``man -l -P cat`` renders it at :data:`WIDTH` columns (no hyphenation, no justification)."""
    env = {**os.environ, "MANWIDTH": WIDTH, "MAN_KEEP_FORMATTING": "", "LC_ALL": "C.UTF-8"}
    command = ["man", "--nh", "--nj", "-l", "-P", "cat", str(path)]
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout


def split_page(text: str) -> tuple[str, str] | None:
    """A rendered page's NAME purpose and its text without the title line and NAME section; None when it has no
    NAME line with a purpose."""
    lines = [line for line in text.splitlines() if not set(line.strip()) <= {"_"}]  # rules under the headers
    lines = lines[1:]  # the title line (the footer stays, as in the shared sets)
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "NAME")
    except StopIteration:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
    name_line = " ".join(" ".join(lines[start + 1 : end]).split())
    purpose = re.split(r"\s[-\u2010\u2212]\s", name_line, maxsplit=1)
    if len(purpose) < 2:
        return None
    return purpose[1].strip(), normalise_layout("\n".join(lines[:start] + lines[end:]))


def needle_of(text: str) -> str:
    """The first :data:`NEEDLE_CHARS` characters of a page's DESCRIPTION (cut at a word, blanks collapsed); empty
    when it has none."""
    lines = text.splitlines()
    if "DESCRIPTION" not in lines:
        return ""
    start = lines.index("DESCRIPTION") + 1
    end = next((i for i in range(start, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
    description = " ".join(" ".join(lines[start:end]).split())
    return description if len(description) <= NEEDLE_CHARS else description[:NEEDLE_CHARS].rsplit(" ", 1)[0]


def tcl_pages() -> tuple[list[Page], dict[str, int]]:
    """Every real page (symbolic links are other names of one page), sorted, and how many were left out."""
    pages: list[Page] = []
    notes = {"no_purpose": 0, "stubs": 0}
    for path in sorted(PAGES.glob(f"*{SUFFIX}")):
        if path.is_symlink():
            continue
        split = split_page(rendered(path))
        if split is None:
            notes["no_purpose"] += 1
        elif len(split[1].split()) < MIN_PAGE_WORDS:
            notes["stubs"] += 1
        else:
            pages.append(Page(path.name.removesuffix(SUFFIX), *split))
    return pages, notes


def build_ref(pages: list[Page], notes: dict[str, int]) -> BeirSet:
    """``tcl-ref``: each purpose of :data:`MIN_PURPOSE_WORDS` or more words -> every page that has it."""
    docs = [(opaque_id("d", REF, page.name), page.text) for page in pages]
    by_purpose: dict[str, list[str]] = defaultdict(list)
    for page, (doc_id, _) in zip(pages, docs):
        if len(page.purpose.split()) >= MIN_PURPOSE_WORDS:
            by_purpose[page.purpose].append(doc_id)
    queries = [(opaque_id("q", REF, purpose), purpose) for purpose in sorted(by_purpose)]
    qrels = [(query_id, doc_id) for query_id, purpose in queries for doc_id in by_purpose[purpose]]
    return BeirSet(docs, queries, qrels, notes)


def haystack_words() -> Iterator[list[str]]:
    """The words of each haystack page in a fixed shuffled order (sha1 of its file name): every page of
    :data:`HAYSTACK_PAGES` that is no symbolic link and renders."""
    paths = [path for folder in HAYSTACK_PAGES for path in folder.glob("*.gz") if not path.is_symlink()]
    for path in sorted(paths, key=lambda path: hashlib.sha1(f"{NEEDLE}:{path.name}".encode()).hexdigest()):
        try:
            words = rendered(path).split()
        except subprocess.CalledProcessError:
            continue
        if words:
            yield words


def chosen_needles(pages: list[Page]) -> list[Page]:
    """The pages whose needles the set hides: :data:`NEEDLES` purposes held by one page each (the first by sha1 of
    the purpose), in the set's order."""
    holders: dict[str, list[Page]] = defaultdict(list)
    for page in pages:
        holders[page.purpose].append(page)
    chosen = [holder[0] for purpose, holder in holders.items() if len(holder) == 1
              and len(purpose.split()) >= MIN_PURPOSE_WORDS and needle_of(holder[0].text)]
    return sorted(chosen, key=lambda page: hashlib.sha1(f"{NEEDLE}:{page.purpose}".encode()).hexdigest())[:NEEDLES]


def needle_spans(pages: list[Page], docs: dict[str, str]) -> list[dict[str, object]]:
    """Each chosen page's needle span in its document (found by its text, which occurs there once), as the rows of
    ``needles.jsonl``.

    :raises ValueError: when a needle does not occur exactly once in its document (the set was built from other
        pages).
    """
    rows = []
    for page in chosen_needles(pages):
        doc_id, needle = opaque_id("d", NEEDLE, page.name), " ".join(needle_of(page.text).split())
        text = docs[doc_id]
        if text.count(needle) != 1:
            raise ValueError(f"{page.name}: its needle occurs {text.count(needle)} times in {doc_id}, not once: "
                             "rebuild the set on this machine (without --needles-only)")
        start = text.index(needle)
        rows.append({"corpus-id": doc_id, "start": start, "end": start + len(needle)})
    return rows


def write_needles(folder: Path, rows: list[dict[str, object]]) -> None:
    """Write ``needles.jsonl`` (one span a line, in the set's order)."""
    (folder / "needles.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def build_needles(pages: list[Page]) -> BeirSet:
    """``tcl-needle-L2048``: :data:`NEEDLES` purposes held by one page each (the first by sha1 of the purpose),
    each -> its own haystack with the page's needle in it; haystack pages are used once, the last one cut."""
    chosen = chosen_needles(pages)
    fill = haystack_words()
    length = round(HAYSTACK_TOKENS / 1.3)
    docs, queries, qrels = [], [], []
    for index, page in enumerate(chosen):
        needle = needle_of(page.text).split()
        hay: list[str] = []
        while len(hay) < length - len(needle):
            hay += next(fill)
        hay = hay[: length - len(needle)]
        at = round(POSITIONS[index % len(POSITIONS)] * len(hay))
        doc_id, query_id = opaque_id("d", NEEDLE, page.name), opaque_id("q", NEEDLE, page.purpose)
        docs.append((doc_id, " ".join(hay[:at] + needle + hay[at:])))
        queries.append((query_id, page.purpose))
        qrels.append((query_id, doc_id))
    return BeirSet(docs, queries, qrels)


def readme(name: str, title: str, beir: BeirSet, how: str) -> str:
    """A set's README: source, rules and sizes."""
    stats = set_stats(beir)
    return f"""# {name}: {title} (held out)

Generated by `python benchmarks/build_tclref.py` (do not edit by hand; rerunning gives the same bytes), in the
format of the other sets (benchmarks/data/README.md). **Held out**: no dev set, training pair or tuned setting
comes from this domain; report it, never tune on it.

Source: Debian 12 `{PACKAGE}` {package_version(PACKAGE)}, the pages `{PAGES}/*{SUFFIX}` that are no symbolic
links, rendered as the shared manual-page sets are (`man -l -P cat`, 100 columns, no hyphenation or
justification; runs of blanks collapsed). A page's purpose is the text after ` - ` in its NAME line; a purpose of
fewer than {MIN_PURPOSE_WORDS} words gives no query.

{how}

| docs | queries | qrels | doc tokens min / median / max | query tokens min / median / max |
|---|---|---|---|---|
| {stats["docs"]} | {stats["queries"]} | {stats["qrels"]} | {stats["doc tokens"]} | {stats["query tokens"]} |
"""


def main() -> None:
    """Write both sets and their READMEs under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the data folder (default: benchmarks/data)")
    parser.add_argument("--needles-only", action="store_true",
                        help=f"only record the needle spans of the {NEEDLE} set already written")
    args = parser.parse_args()
    pages, notes = tcl_pages()
    if args.needles_only:
        with gzip.open(args.out / NEEDLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
            docs = {row["_id"]: row["text"] for row in map(json.loads, lines)}
        write_needles(args.out / NEEDLE, needle_spans(pages, docs))
        print(f"{args.out / NEEDLE}/needles.jsonl: {NEEDLES} needle spans")
        return
    haystacks = ", ".join(f"`{folder}`" for folder in HAYSTACK_PAGES)
    ref_how = f"""A page's document is its text without the title line and the NAME section, relevant to its purpose
and to every page sharing that purpose. A page of fewer than {MIN_PAGE_WORDS} words without NAME is no document
({notes["stubs"]} pages); pages without a NAME purpose: {notes["no_purpose"]}."""
    needle_how = f"""Built as the shared `manpages-needle` sets are: a purpose held by one page -> the first
{NEEDLE_CHARS} characters of that page's DESCRIPTION (cut at a word), hidden in a haystack of about
{HAYSTACK_TOKENS:,} tokens of other manual pages ({haystacks} of the machine that builds it, no symbolic links, in
the order of sha1("{NEEDLE}:" + file name), each page used once, the last of a haystack cut), the i-th needle at
relative position {" / ".join(map(str, POSITIONS))} (i mod 5) of the haystack's words. {NEEDLES} needles: the first
purposes by sha1("{NEEDLE}:" + purpose). The haystack pages vary with what the machine has installed: the bytes
are reproducible on the same installed packages only. `needles.jsonl` gives each needle's char span in its document
(`corpus-id`, `start`, `end`, as the shared sets' `needles.jsonl`): for measures of where the answer is, never for
ranking."""
    sets = {
        REF: ("another domain's reference pages", build_ref(pages, notes), ref_how),
        NEEDLE: ("another domain's needles in manual-page haystacks", build_needles(pages), needle_how),
    }
    for name, (title, beir, how) in sets.items():
        write_beir(args.out / name, beir)
        if name == NEEDLE:
            write_needles(args.out / name, needle_spans(pages, dict(beir.docs)))
        (args.out / name / "README.md").write_text(reflow(readme(name, title, beir, how)), encoding="utf-8")
        print(f"{args.out / name}: {len(beir.docs)} documents, {len(beir.queries)} queries, {len(beir.qrels)} qrels")


if __name__ == "__main__":
    main()
