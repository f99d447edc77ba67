"""Evidence on natural questions: is the passage a hit says carried its score the part a reader would quote?

Ingests the perlfaq sets (``benchmarks/data/perlfaq-longdoc``, ``perlfaq-answers``) into an embedded
:class:`~lmk_rag.store.LandmarkStore` with the product's defaults, as the ``lmk-rag`` pipeline of
``benchmarks/report.py`` does (encoder defaults, nodes cut from one encoding pass, a Qdrant Edge store in a temporary
folder, two-stage search at the product's prefetch depth), and searches every question for 10 documents. For each
question whose answer document is among the hits, that hit's :attr:`~lmk_rag.store.Hit.evidence` is kept.

It writes:

- a seeded sample of those questions for labelling by hand (``--sample``, JSONL: the question, the evidence
  passage(s), the document's text around them and, where it is known, the answer's own text); the labels and their
  rule live in ``benchmarks/results/evidence_questions_labels.jsonl`` and ``evidence_questions.md``;
- the mechanical measure over the whole of perlfaq-longdoc (``--stats``, JSON): a perlfaq-longdoc document is a FAQ
  section with its question headings cut out, and perlfaq-answers holds each question's answer alone, so the
  answer's span in the section is where the answer document's text occurs in it (when it occurs once); the measure
  is how often the best evidence passage lies inside that span, against the first chunk of the hit's node and what
  a passage drawn at random from the document or from the hit's node would give; on both sets, how often the
  evidence is the document's first chunk (the baseline of the hand labels on perlfaq-answers)::

    .venv/bin/python benchmarks/evidence_questions.py
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmk_rag import Evidence, Hit
from lmk_rag.eval import BeirDataset, PipelineOptions, load_beir
from lmk_rag.research import PRODUCT_K, LmkRagPipeline, user_cache_dir
from lmk_rag.store import EncodedQuery

DATA = Path(__file__).parent / "data"
RESULTS = Path(__file__).parent / "results"
#: Sampled questions per set (whose answer document is among the hits).
SAMPLE_SIZES = {"perlfaq-longdoc": 60, "perlfaq-answers": 40}
SEED = 64
#: Characters of the document shown on each side of the evidence in the labelling file.
CONTEXT_CHARS = 700

Span = tuple[int, int]


@dataclass(frozen=True)
class Found:
    """One question's search outcome for its answer document.

    :param query_id: the question's id.
    :param question: its text.
    :param doc_id: its answer document (the one relevant document of the set).
    :param rank: the answer document's 1-based rank among the hits, or None when it is not among them.
    :param hit: the answer document's hit (its best node), or None.
    """

    query_id: str
    question: str
    doc_id: str
    rank: int | None
    hit: Hit | None


class EvidencePipeline(LmkRagPipeline):
    """The ``lmk-rag`` pipeline, whose search returns the store's hits (with their evidence) instead of rankings."""

    def hits(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Each query's document-level hits, searched as :meth:`LmkRagPipeline.search` does."""
        assert self._store is not None and self._encoder is not None, "index() must be called before hits()"
        encoded = self._encoder.encode_queries(list(queries))
        prefetch_limit = max(self._prefetch_limit, 4 * PRODUCT_K)
        return [self._store.search_encoded(EncodedQuery.of(query, text), k=k, rerank=self.rerank,
                                           one_per_document=True, prefetch_limit=prefetch_limit)
                for text, query in zip(queries, encoded)]


def answer_document(dataset: BeirDataset, query_id: str) -> str:
    """The one document relevant to a query."""
    relevant = [doc_id for doc_id, score in dataset.qrels[query_id].items() if score > 0]
    assert len(relevant) == 1, f"{dataset.name}: query {query_id} has {len(relevant)} relevant documents, not one"
    return relevant[0]


def search_set(dataset: BeirDataset, cache_dir: Path, k: int = PRODUCT_K) -> list[Found]:
    """Index a set with the product's defaults and find each question's answer document among its ``k`` hits."""
    pipeline = EvidencePipeline(PipelineOptions(cache_dir=cache_dir))
    pipeline.index(dataset.doc_texts)
    found = []
    for query_id, question, hits in zip(dataset.query_ids, dataset.query_texts,
                                        pipeline.hits(dataset.query_texts, k)):
        doc_id = answer_document(dataset, query_id)
        ranks = [rank for rank, hit in enumerate(hits, 1) if dataset.doc_ids[int(hit.doc_id)] == doc_id]
        rank = ranks[0] if ranks else None
        found.append(Found(query_id, question, doc_id, rank, hits[rank - 1] if rank else None))
    return found


def draw_sample(found: Sequence[Found], size: int, seed: int = SEED) -> list[Found]:
    """A seeded sample of the questions whose answer document is among the hits, in the set's order (all of them
    when fewer than ``size``)."""
    answered = [item for item in found if item.hit is not None]
    if len(answered) <= size:
        return answered
    chosen = sorted(random.Random(seed).sample(range(len(answered)), size))
    return [answered[index] for index in chosen]


def occurrences(text: str, part: str) -> list[int]:
    """Where ``part`` starts in ``text``, each start (overlapping ones too)."""
    starts, at = [], text.find(part)
    while at >= 0:
        starts.append(at)
        at = text.find(part, at + 1)
    return starts


def answer_spans(longdoc: BeirDataset, answers: BeirDataset) -> dict[str, Span | None]:
    """Each perlfaq-longdoc question's answer span in its answer document, or None where it cannot be told.

    The answers set asks the same questions (same text) of each answer alone; the answer's text, stripped, occurs in
    the long section, which renders the answers in order with the question headings cut out. A question the answers
    set lacks, or whose answer text occurs in its section other than once, gets None.
    """
    texts = dict(zip(longdoc.doc_ids, longdoc.doc_texts))
    answer_texts = dict(zip(answers.doc_ids, answers.doc_texts))
    answer_of = {question: answer_texts[answer_document(answers, query_id)]
                 for query_id, question in zip(answers.query_ids, answers.query_texts)}
    spans: dict[str, Span | None] = {}
    for query_id, question in zip(longdoc.query_ids, longdoc.query_texts):
        answer = answer_of.get(question, "").strip()
        starts = occurrences(texts[answer_document(longdoc, query_id)], answer) if answer else []
        spans[query_id] = (starts[0], starts[0] + len(answer)) if len(starts) == 1 else None
    return spans


def overlap(span: Span, other: Span) -> int:
    """Characters two spans share."""
    return max(0, min(span[1], other[1]) - max(span[0], other[0]))


def inside_share(evidence: Evidence, answer: Span) -> float:
    """The share of an evidence passage's characters that lie inside the answer span (0 for an empty passage)."""
    length = evidence.end - evidence.start
    return overlap(evidence.span, answer) / length if length else 0.0


def wilson(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion."""
    if total == 0:
        return (0.0, 1.0)
    share = successes / total
    centre = share + z * z / (2 * total)
    margin = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total))
    scale = 1 + z * z / total
    return (max((centre - margin) / scale, 0.0), min((centre + margin) / scale, 1.0))


def proportion(successes: int, total: int) -> dict[str, Any]:
    """A share with its 95% Wilson interval, as JSON values."""
    low, high = wilson(successes, total)
    return {"count": successes, "of": total, "share": round(successes / total, 4) if total else None,
            "wilson95": [round(low, 4), round(high, 4)]}


def longdoc_stats(longdoc: BeirDataset, found: Sequence[Found], spans: dict[str, Span | None],
                  chunks: dict[str, list[Span]]) -> dict[str, Any]:
    """How often the best evidence passage lies inside the answer span, over every question whose answer document
    is among the hits and whose answer span is known (and over those ranked first, and those whose hit node holds
    some of the answer); against the first chunk of the hit's node (``chunks``: each document's chunk spans), and
    what a passage at a random place of the whole document, or of the hit's node, would give (the answer's share
    of their characters, averaged)."""
    texts = dict(zip(longdoc.doc_ids, longdoc.doc_texts))
    measured = [(item, item.hit, spans[item.query_id]) for item in found
                if item.hit is not None and item.hit.evidence and spans[item.query_id] is not None]
    first = [entry for entry in measured if entry[0].rank == 1]
    holding = [entry for entry in measured if overlap(entry[1].span, entry[2]) > 0]
    count = len(measured)

    def inside(entries: Sequence[tuple[Found, Hit, Span]], least: float) -> dict[str, Any]:
        """The share of ``entries`` whose best evidence has at least ``least`` of its characters in the answer."""
        return proportion(sum(inside_share(hit.evidence[0], answer) >= least for _, hit, answer in entries),
                          len(entries))

    return {
        "answer_span_known": sum(span is not None for span in spans.values()),
        "measured": count,
        "evidence_pieces": sorted({len(hit.evidence) for _, hit, _ in measured}),
        "evidence_kinds": sorted({piece.kind for _, hit, _ in measured for piece in hit.evidence}),
        "best_evidence_majority_inside_answer": inside(measured, 0.5),
        "best_evidence_wholly_inside_answer": inside(measured, 1.0),
        "ranked_first_majority_inside_answer": inside(first, 0.5),
        "hit_node_overlaps_answer": proportion(len(holding), count),
        "node_overlapping_majority_inside_answer": inside(holding, 0.5),
        "node_first_chunk_majority_inside_answer": proportion(
            sum(inside_share(Evidence(*first_chunk(chunks[item.doc_id], hit.span), None, "chunk"), answer) >= 0.5
                for item, hit, answer in measured), count),
        "chance_random_passage_of_document": round(
            sum((answer[1] - answer[0]) / len(texts[item.doc_id]) for item, _, answer in measured) / count, 4)
        if count else None,
        "chance_random_passage_of_hit_node": round(
            sum(overlap(hit.span, answer) / max(hit.span[1] - hit.span[0], 1) for _, hit, answer in measured)
            / count, 4) if count else None,
    }


def first_chunk(chunks: Sequence[Span], node: Span) -> Span:
    """The first of a document's chunks that starts inside a node."""
    return next(chunk for chunk in chunks if node[0] <= chunk[0] < node[1])


def chunk_spans(dataset: BeirDataset) -> dict[str, list[Span]]:
    """Each document's landmark chunk spans as the product's encoder cuts them (tokenising only)."""
    from lmk_rag.encoder import LandmarkEncoder

    encoder = LandmarkEncoder()
    return {doc_id: [(int(start), int(end)) for start, end in encoder.plan(text)[1].spans]
            for doc_id, text in zip(dataset.doc_ids, dataset.doc_texts)}


def sample_record(set_name: str, dataset: BeirDataset, item: Found, answer: Span | None) -> dict[str, Any]:
    """One labelling record: the question, its evidence passages and the document around them (the evidence marked
    with ``[[`` and ``]]``), and the answer's span and text where known."""
    assert item.hit is not None
    text = dict(zip(dataset.doc_ids, dataset.doc_texts))[item.doc_id]
    best = item.hit.evidence[0]
    start, end = max(best.start - CONTEXT_CHARS, 0), min(best.end + CONTEXT_CHARS, len(text))
    return {
        "set": set_name,
        "query_id": item.query_id,
        "question": item.question,
        "rank": item.rank,
        "document_chars": len(text),
        "node_span": list(item.hit.span),
        "evidence": [{**piece.as_dict(), "text": text[piece.start:piece.end]} for piece in item.hit.evidence],
        "context": text[start:best.start] + "[[" + text[best.start:best.end] + "]]" + text[best.end:end],
        "answer_span": list(answer) if answer else None,
        "answer_text": text[answer[0]:answer[1]] if answer else None,
        "best_inside_answer": round(inside_share(best, answer), 3) if answer else None,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Search both sets, write the labelling sample and the mechanical measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the folder holding the perlfaq sets")
    parser.add_argument("--cache-dir", type=Path, default=user_cache_dir("eval"), help="the encoding cache")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--sample", type=Path, default=RESULTS / "evidence_questions_sample.jsonl",
                        help="the labelling file to write")
    parser.add_argument("--stats", type=Path, default=RESULTS / "evidence_questions.json",
                        help="the mechanical measure (JSON) to write")
    args = parser.parse_args(argv)
    sets = {name: load_beir(args.data / name) for name in SAMPLE_SIZES}
    spans = answer_spans(sets["perlfaq-longdoc"], sets["perlfaq-answers"])
    stats: dict[str, Any] = {"seed": args.seed, "sample_sizes": SAMPLE_SIZES}
    with args.sample.open("w", encoding="utf-8") as out:
        for name, dataset in sets.items():
            found = search_set(dataset, args.cache_dir)
            stats[name] = {"questions": len(found), "documents": len(dataset.doc_ids),
                           "answer_document_in_top10": sum(item.hit is not None for item in found),
                           "answer_document_first": sum(item.rank == 1 for item in found)}
            chunks = chunk_spans(dataset)
            answered = [item for item in found if item.hit is not None and item.hit.evidence]
            stats[name]["evidence_is_first_chunk"] = proportion(
                sum(item.hit.evidence[0].span == chunks[item.doc_id][0] for item in answered if item.hit),
                len(answered))
            if name == "perlfaq-longdoc":
                stats[name].update(longdoc_stats(dataset, found, spans, chunks))
            for item in draw_sample(found, SAMPLE_SIZES[name], args.seed):
                answer = spans.get(item.query_id) if name == "perlfaq-longdoc" else None
                out.write(json.dumps(sample_record(name, dataset, item, answer), ensure_ascii=False) + "\n")
            print(name, json.dumps(stats[name]), flush=True)
    args.stats.write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
