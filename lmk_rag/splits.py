"""The one seeded train / held-out split of training pairs (LMK fine-tuning and the static mixer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def split_heldout(pairs: Sequence[T], fraction: float, seed: int, max_heldout: int | None = None
                  ) -> tuple[list[T], list[T]]:
    """Split pairs into a training part and a held-out part, both in their original order.

    :param pairs: all pairs.
    :param fraction: the share held out (0 holds out nothing); at least two pairs always stay for training.
    :param seed: seeds the shuffle.
    :param max_heldout: at most this many pairs are held out (None: no cap).
    :return: ``(train, heldout)``.
    """
    n_heldout = min(round(len(pairs) * fraction), max(len(pairs) - 2, 0))
    if max_heldout is not None:
        n_heldout = min(n_heldout, max_heldout)
    order = np.random.default_rng([seed, 7]).permutation(len(pairs))
    heldout = [pairs[i] for i in sorted(order[:n_heldout])]
    train = [pairs[i] for i in sorted(order[n_heldout:])]
    return train, heldout
