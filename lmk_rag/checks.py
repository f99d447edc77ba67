"""Argument checks shared by the encoder and the store."""

from __future__ import annotations

import math
from typing import Any

from lmk_rag.errors import InvalidInputError

MAX_COUNT = 2**31 - 1
"""The largest count any setting or argument takes (the engine's integers overflow long before memory runs out)."""


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """Return a count setting or argument (``k``, ``batch_size``, ``window_overlap``, ...).

    :param name: the argument's name, for the message.
    :param minimum: the smallest value allowed.
    :raises InvalidInputError: for anything but an integer from ``minimum`` to :data:`MAX_COUNT` (bools and floats
        included).
    """
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_COUNT:
        raise InvalidInputError(f"{name} must be an integer from {minimum} to {MAX_COUNT}, got {value!r}")
    return value


def check_positive(name: str, value: Any) -> float:
    """Return a rate or weight that must be a finite number > 0 (``learning_rate``, ``temperature``, ...).

    :param name: the argument's name, for the message.
    :raises InvalidInputError: for anything else (bools, NaN and infinity included).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)
