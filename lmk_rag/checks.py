"""Argument checks shared by the encoder and the store."""

from __future__ import annotations

from typing import Any

from lmk_rag.errors import InvalidInputError


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """Return a count setting or argument (``k``, ``batch_size``, ``window_overlap``, ...).

    :param name: the argument's name, for the message.
    :param minimum: the smallest value allowed.
    :raises InvalidInputError: for anything but an integer >= ``minimum`` (bools and floats included).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value
