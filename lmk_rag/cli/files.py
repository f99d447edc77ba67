"""The files ``lmk-rag ingest`` reads: which ones, under which doc ids, and their text (decoded, never garbled).

A file inside a folder given gets its path relative to that folder as doc id (``--folder-prefix`` puts the
folder's name in front); a file given directly gets its name. Symbolic links inside a folder are followed when
they lead to a file inside that folder (the document is the link: its path is recorded, not the target's); links
leading out of the folder, dangling links and links to folders are skipped and reported, and so are the files in a
folder that match no glob (counted, a few named). Binary files are skipped.
A file that is not UTF-8 is decoded with the encoding the user names (``--encoding``), else skipped with a warning
that names charset-normalizer's guess: guesses are not trusted for single-byte encodings (it read a latin-1 French
paragraph as cp1250 and a latin-1 line as cp1257), and a text is never decoded with replacement characters. A file
that cannot be read is skipped and reported.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from lmk_rag.errors import InvalidInputError

DEFAULT_GLOBS = ("*.txt", "*.md")
#: Why a link to a folder is skipped (folders are walked without following links, so no file is reached twice).
FOLDER_LINK = "a link to a folder (not followed)"
#: Bytes read to tell binary from text.
SNIFF_BYTES = 8192


@dataclass(frozen=True)
class SourceFile:
    """One file to ingest.

    :param doc_id: its document id in the store.
    :param path: the file.
    :param root: the folder given on the command line it was found in (None for a file given directly).
    """

    doc_id: str
    path: Path
    root: Path | None


@dataclass(frozen=True)
class Decoded:
    """A file's text, or why it was skipped.

    :param text: the decoded text (None when skipped).
    :param encoding: the encoding used.
    :param skipped: the reason it was skipped (None when decoded).
    """

    text: str | None
    encoding: str | None = None
    skipped: str | None = None


def collect_files(
    paths: list[Path], globs: tuple[str, ...] = DEFAULT_GLOBS, folder_prefix: bool = False
) -> tuple[list[SourceFile], list[str], list[Path]]:
    """The files under the given paths whose names match a glob, with their doc ids, in a stable order; the
    symbolic links left out; and the files in the folders that match no glob.

    :param paths: files or folders.
    :param globs: file name patterns (``*.txt``); a file given directly is taken whatever its name.
    :param folder_prefix: prefix each doc id with the name of the folder it was found in.
    :return: the files, one ``"<link>: <why>"`` line per link skipped (see the module docstring), and the files of
        the folders whose names match no glob.
    :raises InvalidInputError: for a missing path, or two files that would get the same doc id (naming both and
        the fix).
    """
    found: list[SourceFile] = []
    skipped: list[str] = []
    unmatched: list[Path] = []
    for path in paths:
        if path.is_dir():
            root = path.resolve()
            files = []
            for candidate in sorted(path.rglob("*")):
                why = _link_problem(candidate, root) if candidate.is_symlink() else None
                if why is None:
                    if candidate.is_file():
                        (files if _matches(candidate.name, globs) else unmatched).append(candidate)
                elif why == FOLDER_LINK or _matches(candidate.name, globs):
                    skipped.append(f"{candidate}: {why}")
            prefix = f"{root.name}/" if folder_prefix else ""
            found.extend(SourceFile(prefix + p.relative_to(path).as_posix(), p, path) for p in files)
        elif path.is_file():
            found.append(SourceFile(path.name, path, None))
        else:
            raise InvalidInputError(f"{path}: no such file or folder")
    owners: dict[str, Path] = {}
    for source in found:
        other = owners.setdefault(source.doc_id, source.path)
        if other != source.path:
            raise InvalidInputError(
                f"{other} and {source.path} would both be stored as doc id {source.doc_id!r}; "
                "use --folder-prefix (doc ids start with the folder's name) or ingest the folders separately"
            )
    # a file reached twice is read once
    return list({source.doc_id: source for source in found}.values()), skipped, unmatched


def _link_problem(link: Path, root: Path) -> str | None:
    """Why a symbolic link found in the folder ``root`` is not ingested (None: it is, as a file inside ``root``)."""
    target = link.resolve()
    if not target.exists():
        return "a dangling link"
    if target.is_dir():
        return FOLDER_LINK
    if not target.is_relative_to(root):
        return f"a link to {target}, outside the folder"
    return None


def read_text(path: Path, encoding: str | None = None) -> Decoded:
    """Decode a file: UTF-8, else ``encoding`` when given (strictly); binary files and undecodable ones are skipped.

    :raises InvalidInputError: for an unknown encoding name.
    """
    data = path.read_bytes()
    if b"\x00" in data[:SNIFF_BYTES]:
        return Decoded(None, skipped="binary (NUL bytes)")
    try:
        return Decoded(data.decode("utf-8-sig"), "utf-8")
    except UnicodeDecodeError:
        pass
    if encoding is not None:
        try:
            return Decoded(data.decode(encoding), encoding)
        except LookupError:
            raise InvalidInputError(f"unknown encoding {encoding!r} (e.g. cp1252, latin-1, shift_jis)") from None
        except UnicodeDecodeError:
            return Decoded(None, skipped=f"not UTF-8 and not valid {encoding}")
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    guess = f" (charset-normalizer guesses {best.encoding})" if best is not None else ""
    return Decoded(None, skipped=f"not UTF-8{guess}; give its encoding with --encoding NAME")


def _matches(name: str, globs: tuple[str, ...]) -> bool:
    """Whether a file name matches one of the patterns (case-insensitively)."""
    return any(fnmatch.fnmatch(name.lower(), pattern.lower()) for pattern in globs)
