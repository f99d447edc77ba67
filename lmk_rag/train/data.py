"""Training data for LMK fine-tuning: (query, positive, negatives) pairs, batches and haystacks.

Two input formats are read: a pairs JSONL file (one ``{"query", "positive", "negatives"?}`` object
per line) or a BEIR folder's train split (``corpus.jsonl[.gz]``, ``queries.jsonl``,
``qrels/train.tsv``). Every random choice is derived from ``(seed, step)`` so that a resumed run
draws exactly the batches the interrupted run would have drawn.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmk_rag.checks import check_text
from lmk_rag.errors import DatasetError, InvalidInputError
from lmk_rag.jsonl import read_jsonl

GRANULARITIES: tuple[int, ...] = (32, 64, 128, 256)


@dataclass(frozen=True)
class TrainPair:
    """One training example.

    :param query: the query text.
    :param positive: the relevant passage.
    :param negatives: passages known to be irrelevant (given in the data or mined).
    """

    query: str
    positive: str
    negatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Batch:
    """The texts of one training step and the granularity drawn for each.

    :param queries: B query texts.
    :param passages: B positives, then the hard negatives (``passages[B:]``).
    :param haystacks: B haystacks; haystack ``i`` hides ``positives[i]`` among filler text.
    :param query_granularity: one granularity per query.
    :param passage_granularity: one granularity per passage.
    :param haystack_granularity: one granularity per haystack.
    """

    queries: list[str]
    passages: list[str]
    haystacks: list[str]
    query_granularity: list[int]
    passage_granularity: list[int]
    haystack_granularity: list[int]


def _text_field(row: dict, key: str, where: str) -> str:
    """A row's text field as :func:`~lmk_rag.checks.check_text` accepts it, else a DatasetError naming the line."""
    try:
        return check_text(row.get(key), f"{where}: field {key!r}")
    except InvalidInputError as error:
        raise DatasetError(str(error)) from None


def load_pairs_jsonl(path: str | Path) -> list[TrainPair]:
    """Read a pairs JSONL file.

    :param path: a file with one ``{"query": str, "positive": str, "negatives": [str]?}`` per line.
    :return: the pairs, in file order.
    :raises DatasetError: when a line is not a JSON object or lacks a non-empty query or positive.
    """
    path = Path(path)
    pairs = []
    for line_no, row in read_jsonl(path):
        where = f"{path}:{line_no}"
        negatives = row.get("negatives") or []
        if not isinstance(negatives, list) or not all(isinstance(n, str) for n in negatives):
            raise DatasetError(f"{where}: field 'negatives' must be a list of strings")
        pairs.append(
            TrainPair(_text_field(row, "query", where), _text_field(row, "positive", where), tuple(negatives))
        )
    if not pairs:
        raise DatasetError(f"{path}: no training pairs")
    return pairs


def _beir_doc_text(row: dict) -> str:
    title, text = row.get("title") or "", row.get("text") or ""
    return f"{title}\n{text}".strip() if title else text


def load_beir_train(folder: str | Path, split: str = "train") -> list[TrainPair]:
    """Read the pairs of a BEIR folder's split (each query with each of its relevant documents).

    :param folder: a folder with ``corpus.jsonl[.gz]``, ``queries.jsonl[.gz]`` and ``qrels/<split>.tsv``.
    :param split: the qrels file to read.
    :return: one pair per (query, relevant document) with score > 0.
    :raises DatasetError: when a file is missing or a qrels line names an unknown id.
    """
    folder = Path(folder)

    def find(stem: str) -> Path:
        for candidate in (folder / f"{stem}.jsonl", folder / f"{stem}.jsonl.gz"):
            if candidate.is_file():
                return candidate
        raise DatasetError(f"{folder}: missing {stem}.jsonl or {stem}.jsonl.gz")

    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise DatasetError(f"{folder}: missing qrels/{split}.tsv (a BEIR folder needs a {split} split to train on)")
    corpus = {str(row["_id"]): _beir_doc_text(row) for _, row in read_jsonl(find("corpus")) if "_id" in row}
    queries = {str(row["_id"]): row.get("text", "") for _, row in read_jsonl(find("queries")) if "_id" in row}
    pairs = []
    with open(qrels_path, encoding="utf-8", newline="") as handle:
        for line_no, fields in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if line_no == 1 and not fields[-1].strip().lstrip("-").isdigit():
                continue  # header
            if len(fields) < 3:
                raise DatasetError(f"{qrels_path}:{line_no}: expected 'query-id corpus-id score'")
            query_id, doc_id, score = fields[0], fields[1], fields[-1]
            if int(score) <= 0:
                continue
            if query_id not in queries or doc_id not in corpus:
                raise DatasetError(f"{qrels_path}:{line_no}: unknown query {query_id!r} or document {doc_id!r}")
            if queries[query_id].strip() and corpus[doc_id].strip():
                pairs.append(TrainPair(queries[query_id], corpus[doc_id]))
    if not pairs:
        raise DatasetError(f"{qrels_path}: no positive training pairs")
    return pairs


def load_training_data(source: str | Path) -> list[TrainPair]:
    """Read pairs from a pairs JSONL file or a BEIR folder (its train split).

    :param source: a ``.jsonl[.gz]`` file or a BEIR folder.
    :return: the training pairs.
    :raises DatasetError: when the source does not exist or is malformed.
    """
    path = Path(source)
    if path.is_dir():
        return load_beir_train(path)
    if path.is_file():
        return load_pairs_jsonl(path)
    raise DatasetError(f"{path}: no such pairs file or BEIR folder")


class HaystackBuilder:
    """Hides a passage among other passages so that only some landmarks cover it.

    Token counts come from the model's tokenizer so that a haystack fits one encoder window:
    the needle is never cut off by truncation.

    :param tokenizer: a Hugging Face tokenizer (counts tokens only).
    :param filler: the texts to build haystacks from.
    :param haystack_tokens: the content tokens a haystack should hold (landmarks not counted).
    """

    def __init__(self, tokenizer, filler: Sequence[str], haystack_tokens: int) -> None:
        self.filler = list(filler)
        self.haystack_tokens = haystack_tokens
        self._tokenizer = tokenizer
        self._filler_words = [text.split() for text in self.filler]
        counts = tokenizer(self.filler, add_special_tokens=False)["input_ids"] if self.filler else []
        # tokens per word, to cut a filler to a token budget without tokenising again
        self._tokens_per_word = [len(ids) / max(len(words), 1) for ids, words in zip(counts, self._filler_words)]

    def _count(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _cut(self, words: list[str], ratio: float, budget: int) -> str:
        return " ".join(words[: max(int(budget / max(ratio, 1e-6)), 0)])

    def build(self, needle: str, rng: np.random.Generator, exclude: set[int]) -> tuple[str, tuple[int, int]]:
        """Build one haystack around ``needle``.

        :param needle: the passage to hide; it is cut to at most half the haystack.
        :param rng: the generator that chooses the filler and the needle's place.
        :param exclude: filler indices not to use (e.g. the positives of the same batch).
        :return: the haystack text and the needle's char span in it.
        """
        needle_budget = self.haystack_tokens // 2
        needle_words = needle.split()
        if self._count(needle) > needle_budget:
            ratio = self._count(needle) / max(len(needle_words), 1)
            needle = self._cut(needle_words, ratio, needle_budget)
        budget = self.haystack_tokens - self._count(needle)
        pieces: list[str] = []
        candidates = [i for i in rng.permutation(len(self.filler)) if int(i) not in exclude]
        for index in candidates:
            if budget <= 8:
                break
            index = int(index)
            ratio = self._tokens_per_word[index]
            words = self._filler_words[index]
            if len(words) * ratio <= budget:
                pieces.append(" ".join(words))
                budget -= int(np.ceil(len(words) * ratio)) + 1
            else:
                start = int(rng.integers(0, max(len(words) - int(budget / ratio), 1)))
                pieces.append(self._cut(words[start:], ratio, int(budget * 0.9)))
                budget = 0
        slot = int(rng.integers(0, len(pieces) + 1))
        before = " ".join(pieces[:slot])
        after = " ".join(pieces[slot:])
        start = len(before) + (1 if before else 0)
        text = " ".join(part for part in (before, needle, after) if part)
        return text, (start, start + len(needle))


class BatchSampler:
    """Draws the batch of a step from ``(seed, step)`` alone: epochs are fixed permutations of the pairs.

    :param pairs: the training pairs.
    :param batch_size: pairs per step.
    :param seed: the run's seed.
    :param haystacks: builds each positive's haystack; ``None`` draws no haystacks.
    :param granularities: the granularities to draw from, one per text.
    :param hard_negatives: how many negatives to add per pair (from ``pair.negatives``).
    """

    def __init__(
        self,
        pairs: Sequence[TrainPair],
        batch_size: int,
        seed: int,
        haystacks: HaystackBuilder | None = None,
        granularities: Sequence[int] = GRANULARITIES,
        hard_negatives: int = 0,
    ) -> None:
        if batch_size < 2:
            raise DatasetError(f"batch size {batch_size}: in-batch negatives need at least 2 pairs per batch")
        if len(pairs) < batch_size:
            raise DatasetError(f"{len(pairs)} training pairs are fewer than the batch size {batch_size}")
        self.pairs = list(pairs)
        self.batch_size = batch_size
        self.seed = seed
        self.haystacks = haystacks
        self.granularities = tuple(granularities)
        self.hard_negatives = hard_negatives
        self._permutations: dict[int, np.ndarray] = {}
        self._positive_to_filler = (
            {text: i for i, text in enumerate(haystacks.filler)} if haystacks is not None else {}
        )

    @property
    def steps_per_epoch(self) -> int:
        """Full batches in one pass over the pairs."""
        return len(self.pairs) // self.batch_size

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._permutations:
            self._permutations = {epoch: np.random.default_rng([self.seed, 1, epoch]).permutation(len(self.pairs))}
        return self._permutations[epoch]

    def indices(self, step: int) -> list[int]:
        """The pair indices of step ``step`` (0-based)."""
        epoch, offset = divmod(step, self.steps_per_epoch)
        start = offset * self.batch_size
        return [int(i) for i in self._permutation(epoch)[start : start + self.batch_size]]

    def batch(self, step: int) -> Batch:
        """The batch of step ``step``.

        :param step: 0-based step number.
        :return: the batch's texts and granularities.
        """
        rng = np.random.default_rng([self.seed, 2, step])
        chosen = [self.pairs[i] for i in self.indices(step)]
        queries = [pair.query for pair in chosen]
        passages = [pair.positive for pair in chosen]
        batch_positives = set(passages)
        for pair in chosen:
            options = [text for text in pair.negatives if text not in batch_positives]
            if self.hard_negatives and options:
                picks = rng.choice(len(options), size=min(self.hard_negatives, len(options)), replace=False)
                passages.extend(options[int(p)] for p in picks)
        haystacks: list[str] = []
        if self.haystacks is not None:
            exclude = {self._positive_to_filler[p] for p in batch_positives if p in self._positive_to_filler}
            for pair in chosen:
                haystacks.append(self.haystacks.build(pair.positive, rng, exclude)[0])

        def draw(n: int, options: Sequence[int] = self.granularities) -> list[int]:
            return [int(g) for g in rng.choice(options, size=n)]

        # a haystack needs several landmarks for the landmark loss to teach anything
        haystack_options = [g for g in self.granularities if self.haystacks and g < self.haystacks.haystack_tokens]

        return Batch(
            queries=queries,
            passages=passages,
            haystacks=haystacks,
            query_granularity=draw(len(queries)),
            passage_granularity=draw(len(passages)),
            haystack_granularity=draw(len(haystacks), haystack_options or self.granularities),
        )
