"""Training a linear projection (:mod:`lmk_rag.encoder.projection`) on (query, positive) pairs.

The encoder's vectors are computed once, without a projection; then ``W = I + A`` is fitted so that each query's
positive wins a softmax over *every* distinct positive (each scored by chunk MaxSim, as the store scores a node),
with ``A`` kept small by an L2 penalty. The fit of the epoch with the best mean reciprocal rank on held-out pairs
is kept (epoch 0 is the identity, so a fit never does worse than none there), and the projection is that fit mixed
with the identity in weight space, ``I + mix * A`` (WiSE-FT's interpolation of a fine-tuned and a zero-shot model,
which keeps most of the gain on the training distribution and loses less away from it; docs/decisions.md,
"quality: a linear projection"). Torch runs the fit; the encoder and the store stay numpy-only at inference.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lmk_rag.checks import check_count, check_positive
from lmk_rag.encoder.projection import LinearProjection
from lmk_rag.errors import InvalidInputError
from lmk_rag.train.losses import maxsim_scores


@dataclass(frozen=True)
class ProjectionConfig:
    """How a projection is trained (the shipped one: these defaults, docs/decisions.md).

    :param epochs: passes over the training pairs.
    :param batch_size: queries per step.
    :param learning_rate: Adam's learning rate.
    :param l2: weight of the penalty ``sum(A ** 2)`` that keeps ``W`` near the identity.
    :param temperature: divides the MaxSim scores in the softmax.
    :param mix: the share of the fit in the projection, ``I + mix * A`` (1: the fit itself; 0: the identity).
    :param seed: seeds the batch order.
    """

    epochs: int = 8
    batch_size: int = 128
    learning_rate: float = 3e-4
    l2: float = 1e-2
    temperature: float = 0.05
    mix: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        """Check the numbers a fit cannot start with (before any pair is encoded).

        :raises InvalidInputError: naming the setting and the values it takes.
        """
        check_count("epochs", self.epochs)
        check_count("batch_size", self.batch_size)
        check_positive("learning_rate", self.learning_rate)
        check_positive("temperature", self.temperature)
        if isinstance(self.l2, bool) or not isinstance(self.l2, (int, float)) or not math.isfinite(self.l2) \
                or self.l2 < 0:
            raise InvalidInputError(f"l2 must be a finite number >= 0 (0: no penalty), got {self.l2!r}")
        if not 0.0 <= self.mix <= 1.0:
            raise InvalidInputError(f"mix must be in [0, 1] (1: the fit itself, 0: the identity), got {self.mix}")


@dataclass(frozen=True)
class ProjectionResult:
    """A trained projection and how it was chosen.

    :param projection: the fit of the best held-out epoch, mixed with the identity (:attr:`ProjectionConfig.mix`).
    :param best_epoch: that epoch (0: the identity won).
    :param history: per epoch, ``{"epoch", "loss", "heldout_mrr"}`` of the fit (epoch 0: before training).
    :param heldout_mrr: the held-out MRR of the projection itself (after the mix).
    :param seconds: the training time, encoding excluded.
    """

    projection: LinearProjection
    best_epoch: int
    history: list[dict[str, float]]
    heldout_mrr: float
    seconds: float


class EncodedPairs:
    """Pairs as the encoder sees them: each query's chunk vectors, and every distinct positive's (padded).

    :param pairs: (query, positive) pairs.
    :param encode: texts -> one (n_chunks, dim) array of unit chunk vectors per text (the encoder without projection).
    """

    def __init__(self, pairs: Sequence[tuple[str, str]], encode: Callable[[list[str]], list[np.ndarray]]) -> None:
        positives: dict[str, int] = {}
        for _, positive in pairs:
            positives.setdefault(positive, len(positives))
        self.queries = [torch.from_numpy(np.asarray(rows, np.float32)) for rows in encode([q for q, _ in pairs])]
        self.positive = torch.tensor([positives[positive] for _, positive in pairs])
        docs = [np.asarray(rows, np.float32) for rows in encode(list(positives))]
        width = max(len(rows) for rows in docs)
        #: every positive's chunk vectors one after another, and each positive's rows in it (padded with row 0)
        self.chunks = torch.from_numpy(np.concatenate(docs))
        self.rows = torch.zeros(len(docs), width, dtype=torch.long)
        self.doc_mask = torch.zeros(len(docs), width, dtype=torch.bool)
        start = 0
        for index, rows in enumerate(docs):
            self.rows[index, : len(rows)] = torch.arange(start, start + len(rows))
            self.doc_mask[index, : len(rows)] = True
            start += len(rows)

    def scores(self, weight: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """Projected MaxSim (mean over query vectors) of the queries ``rows`` against every positive, shape
        (len(rows), positives)."""
        queries = [F.normalize(self.queries[row] @ weight.T, dim=-1) for row in rows]
        width = max(len(query) for query in queries)
        padded = torch.zeros(len(queries), width, weight.shape[0])
        mask = torch.zeros(len(queries), width)
        for index, query in enumerate(queries):
            padded[index, : len(query)] = query
            mask[index, : len(query)] = 1
        docs = F.normalize(self.chunks @ weight.T, dim=-1)[self.rows]
        return maxsim_scores(padded, mask, docs, self.doc_mask, mean=True)

    def mrr(self, weight: torch.Tensor, rows: Sequence[int]) -> float:
        """Mean reciprocal rank of each query's positive among every positive (ties count against it)."""
        with torch.no_grad():
            scores = self.scores(weight, rows)
            own = scores[torch.arange(len(rows)), self.positive[list(rows)]]
            return float((1.0 / (scores >= own[:, None]).sum(1).float()).mean())


def train_projection(
    pairs: EncodedPairs, train_rows: Sequence[int], heldout_rows: Sequence[int], config: ProjectionConfig,
    projection_config: dict[str, object], log: Callable[[str], None] = print,
) -> ProjectionResult:
    """Fit ``W = I + A`` on the training rows, keep the epoch with the best held-out MRR, mix it with the identity.

    :param pairs: the encoded pairs.
    :param train_rows: the pairs trained on.
    :param heldout_rows: the pairs that choose the epoch (at least one).
    :param config: the training settings.
    :param projection_config: what the projection records (``model_digest``, ``chunk_vector``, ...); ``dim`` and the
        training record are added.
    :param log: where progress lines go.
    :return: the projection.
    :raises InvalidInputError: without training or held-out pairs.
    """
    if not train_rows or not heldout_rows:
        raise InvalidInputError("a projection needs training pairs and held-out pairs (at least one of each)")
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    dim = pairs.chunks.shape[-1]
    delta = torch.nn.Parameter(torch.zeros(dim, dim))
    optimizer = torch.optim.Adam([delta], lr=config.learning_rate)
    identity = torch.eye(dim)
    best = (pairs.mrr(identity, heldout_rows), 0, identity)
    history = [{"epoch": 0, "loss": float("nan"), "heldout_mrr": best[0]}]
    log(f"epoch 0: held-out MRR {best[0]:.4f}")
    for epoch in range(1, config.epochs + 1):
        order = np.random.default_rng([config.seed, epoch]).permutation(np.asarray(train_rows))
        losses = []
        for first in range(0, len(order), config.batch_size):
            rows = order[first : first + config.batch_size].tolist()
            scores = pairs.scores(identity + delta, rows) / config.temperature
            loss = F.cross_entropy(scores, pairs.positive[rows]) + config.l2 * (delta**2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        weight = (identity + delta).detach().clone()
        mrr = pairs.mrr(weight, heldout_rows)
        history.append({"epoch": epoch, "loss": float(np.mean(losses)), "heldout_mrr": mrr})
        log(f"epoch {epoch}: loss {np.mean(losses):.4f}, held-out MRR {mrr:.4f}")
        if mrr > best[0]:
            best = (mrr, epoch, weight)
    weight = identity + config.mix * (best[2] - identity)
    mixed = pairs.mrr(weight, heldout_rows)
    log(f"epoch {best[1]} mixed with the identity at {config.mix}: held-out MRR {mixed:.4f}")
    record = {**projection_config, "dim": dim, "training": {**asdict(config), "best_epoch": best[1], "history": history,
                                                         "heldout_mrr": mixed}}
    projection = LinearProjection(weight.numpy().astype(np.float32), record)
    return ProjectionResult(projection, best[1], history, mixed, time.perf_counter() - start)
