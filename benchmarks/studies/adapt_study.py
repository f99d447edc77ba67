"""Corpus adaptation study (issue 42 item 4): a projection fitted on pairs mined from a set's own documents, never
its queries, against the shipped projection and none.

Pairs are mined from the documents alone, deterministically (inverse cloze, the probe of issue 42): in every
paragraph (a block between blank lines) of at least ``MIN_SENTENCES`` sentences, one sentence of 6-40 words, chosen by
hash, is the query and the rest of the paragraph (that sentence cut out) its positive; at most ``MAX_PAIRS`` pairs,
again chosen by hash. The pairs are encoded without a projection, as ``lmk-rag train-projection`` encodes them, and
fitted with the product's trainer (:func:`lmk_rag.train.projection.train_projection`, the shipped projection's
settings, 10% of the pairs held out to choose the epoch). Every variant ranks with the store's candidates and fusion
(``common.store_ranking``) over the same cached encoder states, re-pooled through its projection:

- ``base``: the shipped projection (the product's default, trained on the training pairs of both domains);
- ``none``: no projection;
- ``mined``: fitted from the identity on the mined pairs;
- ``mined+train``: fitted from the identity on the mined pairs and the shipped projection's training pairs;
- ``shipped then mined``: the shipped projection, then a fit on the mined pairs as the shipped projection maps them
  (the two matrices multiplied: one projection, applicable to stored vectors in place).

Prints nDCG@10 per variant with the paired difference to ``base`` and writes the per-query values::

    python benchmarks/studies/adapt_study.py perlfaq-longdoc manpages-needle/L2048 --out adapt_study.json
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path
from typing import ClassVar

import common
import numpy as np

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.research import (
    SHIPPED_PROJECTION_DIR,
    EncodedPairs,
    LinearProjection,
    ProjectionConfig,
    split_heldout,
    train_projection,
)
from lmk_rag.train import load_training_data

MIN_SENTENCES = 3
MAX_PAIRS = 3000
#: The shipped projection's training pairs (its ``projection_config.json``).
TRAINING_PAIRS = (common.DATA / "manpages-train" / "pairs.jsonl",
                  common.BENCHMARKS / "data" / "perldoc-train" / "pairs.jsonl",
                  common.BENCHMARKS / "data" / "perldoc-train" / "symbols.jsonl")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def _rank(text: str) -> str:
    return hashlib.sha1(f"adapt-study:{text}".encode()).hexdigest()


def mine_pairs(documents: list[str]) -> list[tuple[str, str]]:
    """Inverse-cloze pairs of the documents: (a sentence, the rest of its paragraph)."""
    pairs = []
    for document in documents:
        for paragraph in re.split(r"\n\s*\n", document):
            sentences = [s.strip() for s in _SENTENCE_END.split(" ".join(paragraph.split())) if s.strip()]
            if len(sentences) < MIN_SENTENCES:
                continue
            candidates = [i for i, s in enumerate(sentences) if 6 <= len(s.split()) <= 40]
            if not candidates:
                continue
            chosen = min(candidates, key=lambda i: _rank(sentences[i]))
            pairs.append((sentences[chosen], " ".join(sentences[:chosen] + sentences[chosen + 1:])))
    return sorted(pairs, key=lambda pair: _rank(pair[0]))[:MAX_PAIRS]


def fitted_folder(folder: Path, name: str) -> Path:
    """Where :meth:`Fitter.fit` saves the projection of the variant ``name``."""
    return folder / name.replace(" ", "_").replace("+", "_")


class Fitter:
    """Fits projections on encoded pairs and saves them where an encoder loads them."""

    #: each text's chunk vectors without a projection, encoded once in a run (the training pairs serve every set)
    vectors: ClassVar[dict[str, np.ndarray]] = {}

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.encoder = LandmarkEncoder(projection=None)
        self.shipped = LinearProjection.load(SHIPPED_PROJECTION_DIR)

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        """The texts' chunk vectors without a projection (``lmk-rag train-projection``'s encoding)."""
        new = [text for text in dict.fromkeys(texts) if text not in self.vectors]
        for text, encoded in zip(new, self.encoder.encode_documents(new) if new else []):
            self.vectors[text] = encoded.chunk_vectors
        return [self.vectors[text] for text in texts]

    def fit(self, name: str, pairs: list[tuple[str, str]], after: LinearProjection | None = None) -> str:
        """A projection fitted on ``pairs`` (from the identity, or on top of ``after``), saved; its folder."""

        def encode(texts: list[str]) -> list[np.ndarray]:
            vectors = self.encode(texts)
            return [after.apply(rows) for rows in vectors] if after is not None else vectors

        encoded = EncodedPairs(pairs, encode)
        train_rows, heldout_rows = split_heldout(list(range(len(pairs))), 0.1, 0)
        record = {**self.shipped.config, "pairs": name}
        result = train_projection(encoded, train_rows, heldout_rows, ProjectionConfig(), record,
                                  log=lambda line: print(f"    {name}: {line}", flush=True))
        weight = result.projection.weight if after is None else result.projection.weight @ after.weight
        path = fitted_folder(self.folder, name)
        LinearProjection(weight.astype(np.float32), result.projection.config).save(path)
        return str(path)


def rankings(corpus: common.Corpus) -> list[list[int]]:
    """The store's document rankings of every query (its candidates and fusion)."""
    bm25 = common.Bm25Index.of_store(corpus.node_texts)
    terms = common.query_terms(corpus.data.query_texts)
    return [common.query_ranking(corpus, query, bm25.scores(terms[query])) for query in range(len(terms))]


def study(corpus: common.Corpus) -> dict[str, dict[str, float]]:
    """Every variant's per-query nDCG@10, by query id."""
    data = corpus.data
    mined = mine_pairs(list(data.doc_texts))
    training = [(pair.query, pair.positive) for source in TRAINING_PAIRS for pair in load_training_data(source)]
    print(f"  {len(mined)} mined pairs, e.g. {mined[0][0][:80]!r}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        fitter = Fitter(Path(folder))
        projections = {
            "none": None,
            "mined": fitter.fit("mined", mined),
            "mined+train": fitter.fit("mined+train", mined + training),
            "shipped then mined": fitter.fit("shipped then mined", mined, after=fitter.shipped),
        }
        ranked = {"base": rankings(corpus)}
        for name, projection in projections.items():
            ranked[name] = rankings(common.corpus_of(data, projection=projection))
    return common.ndcg_per_query(corpus, ranked)


if __name__ == "__main__":
    common.run_study(__doc__.split("\n")[0], study)
