"""Fingerprints are recorded by stores and caches: the one recipe (lmk_rag.hashing.short_hash) gives the values
pinned here for the shipped static model and mixer and the packaged MiniLM. A change of a pinned value makes every
store recorded with the old one unreadable: it comes with a new store format (lmk_rag.store.settings.FORMAT_VERSION)."""

from __future__ import annotations

import hashlib

from lmk_rag.hashing import short_hash


def test_short_hash_is_the_sha256_of_the_concatenation() -> None:
    assert short_hash([b"ab", b"", b"c"]) == hashlib.sha256(b"abc").hexdigest()[:16]
    assert short_hash(iter([b"x"] * 3)) == hashlib.sha256(b"xxx").hexdigest()[:16]


def test_the_static_fingerprints_are_unchanged() -> None:
    from lmk_rag.static import StaticTokenEncoder
    from lmk_rag.static.document_encoder import StaticDocumentEncoder
    from lmk_rag.static.mixer import SHIPPED_MIXER_DIR, MixerWeights

    assert StaticTokenEncoder().fingerprint == "afeb57eee04fda67"
    assert StaticTokenEncoder(mixer="shipped").fingerprint == "8b7e3eecc430b4c5"
    assert MixerWeights.load(SHIPPED_MIXER_DIR).fingerprint() == "5154df3892baf623"
    assert StaticDocumentEncoder().fingerprint == "0816f61cadaeba81"


def test_the_encoder_fingerprints_are_unchanged(minilm_path, minilm_encoder) -> None:
    from lmk_rag.encoder import LandmarkEncoder
    from lmk_rag.encoder.resolve import model_digest

    assert model_digest(minilm_path) == "2e8a342051c55cb0"
    # the hash of every setting that decides the vectors (issue 45: store format 3)
    assert LandmarkEncoder(granularity=32, context="document", projection=None).fingerprint == "7b290efe8a097d54"
    assert LandmarkEncoder(projection=None).fingerprint == "747ec896a59d7ca0"
    # with the shipped projection (the default for the packaged MiniLM): what the demo store records
    assert minilm_encoder.fingerprint == "da9a020007a14eea"  # granularity 32, document context
    assert LandmarkEncoder().fingerprint == "e1ec6a1d3ad4811b"
