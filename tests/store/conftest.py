"""Store fixtures: real manual-page texts, their real MiniLM nodes (encoded once), and a store
factory parametrised over the backends: Qdrant Edge on disk, qdrant-client local mode, and a real
Qdrant server when ``QDRANT_URL`` is set."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmk_rag.store import LandmarkStore, NodeRecord

#: The helper modules of the multi-process tests (processes.py, store_process.py), importable by name (pytest
#: imports the tests themselves with importlib, which puts no folder on sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parent))
N_DOCS = 8
BACKENDS = ["edge", "local", "server"]


@pytest.fixture(scope="session")
def docs(fixture_data: Path) -> dict[str, str]:
    """Eight real manual-page DESCRIPTION texts (manpages-short), keyed by a readable doc id."""
    out: dict[str, str] = {}
    with gzip.open(fixture_data / "manpages-short" / "corpus.jsonl.gz", "rt") as handle:
        for line in handle:
            text = json.loads(line)["text"]
            if len(text) > 1200:
                out[f"page{len(out)}.txt"] = text
            if len(out) == N_DOCS:
                return out
    return out


@pytest.fixture(scope="session")
def doc_records(minilm_encoder: Any, docs: dict[str, str]) -> dict[str, list[NodeRecord]]:
    """The docs cut into nodes as the store cuts them (encoded once per session)."""
    from lmk_rag.store.documents import records_from_encoding

    encoded = minilm_encoder.encode_documents(list(docs.values()))
    out: dict[str, list[NodeRecord]] = {}
    for i, ((doc_id, text), enc) in enumerate(zip(docs.items(), encoded)):
        metadata = {"rank": i, "group": "even" if i % 2 == 0 else "odd"}
        out[doc_id] = records_from_encoding(doc_id, text, enc, 128, metadata)
    return out


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test; ``server`` needs a real Qdrant at ``QDRANT_URL``."""
    if request.param == "server" and not os.environ.get("QDRANT_URL"):
        pytest.skip("QDRANT_URL is not set: no Qdrant server to test against")
    return request.param


@pytest.fixture
def open_store(backend: str, tmp_path: Path, minilm_encoder: Any) -> Iterator[Callable[..., LandmarkStore]]:
    """Open (or reopen) a store on the backend under test; every store opened is closed at the end."""
    opened: list[LandmarkStore] = []
    collection = f"lmk_test_{uuid.uuid4().hex[:10]}"

    def _open(name: str = "store", **kwargs: Any) -> LandmarkStore:
        """``name`` tells stores apart: another name is another, fresh store."""
        kwargs.setdefault("encoder", minilm_encoder)
        if backend == "edge":
            store = LandmarkStore(tmp_path / name, **kwargs)
        elif backend == "local":
            store = LandmarkStore(location=str(tmp_path / f"local-{name}"), collection_name=collection, **kwargs)
        else:
            store = LandmarkStore(url=os.environ["QDRANT_URL"], api_key=os.environ.get("QDRANT_API_KEY"),
                                  collection_name=f"{collection}_{name}", **kwargs)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
    if backend == "server":
        from qdrant_client import QdrantClient

        client = QdrantClient(url=os.environ["QDRANT_URL"], api_key=os.environ.get("QDRANT_API_KEY"))
        for store in opened:
            client.delete_collection(store.where.split("'")[1])


class HashedStaticEncoder:
    """A tiny random static token model (a word -> seeded random vector table), for the static slot's mechanics."""

    dim = 16
    fingerprint = "hashed-static-16"

    def _vectors(self, text: str) -> np.ndarray:
        words = re.findall(r"\w+", text.lower()) or ["empty"]
        rows = []
        for word in dict.fromkeys(words):
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
            row = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)

    def encode_document_tokens(self, text: str) -> np.ndarray:
        """(m, 16) vectors of the distinct words."""
        return self._vectors(text)

    def encode_query_tokens(self, text: str) -> np.ndarray:
        """(q, 16) vectors of the distinct words."""
        return self._vectors(text)

    def document_token_spans(self, text: str) -> np.ndarray:
        """(m, 2) char spans of the distinct words' first occurrences."""
        first: dict[str, tuple[int, int]] = {}
        for match in re.finditer(r"\w+", text):
            first.setdefault(match.group().lower(), match.span())
        return np.asarray(list(first.values()) or [(0, 0)], dtype=np.int64).reshape(-1, 2)


@pytest.fixture
def static_encoder() -> HashedStaticEncoder:
    """A tiny random static token encoder."""
    return HashedStaticEncoder()
