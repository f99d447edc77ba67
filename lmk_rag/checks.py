"""Argument checks shared by the encoders, the store and the LlamaIndex adapters."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lmk_rag.errors import EmptyTextError, InvalidInputError

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


def check_text(text: Any, name: str = "text", blank: bool = False) -> str:
    """Return a text to encode: a str of valid Unicode (no lone surrogate, so it has a UTF-8 form) with a word in it,
    unless ``blank`` lets an empty or whitespace-only text through.

    :param text: the value to check.
    :param name: what the messages call it (``"text 3"``).
    :param blank: accept an empty or whitespace-only text (for encoders that give it a vector of its own).
    :raises InvalidInputError: for anything but a str, or a str that is not valid Unicode.
    :raises EmptyTextError: for an empty or whitespace-only text, unless ``blank``.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{name} must be a str, got {type(text).__name__}")
    if not blank and not text.strip():
        raise EmptyTextError(f"{name} is empty or whitespace-only: there is nothing to encode")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"{name} is not valid Unicode ({error.reason} at character {error.start}); decode the source with "
            "errors='replace' or fix it"
        ) from None
    return text


def check_texts(texts: Any, blank: bool = False) -> list[str]:
    """Return one text or a sequence of texts as a list, each checked by :func:`check_text` (named ``text i``).

    :param texts: a str, or a sequence of str (it may be empty).
    :param blank: accept empty and whitespace-only texts.
    :raises InvalidInputError: for anything but a str or a sequence, or an item :func:`check_text` refuses.
    :raises EmptyTextError: for an empty or whitespace-only text, unless ``blank``.
    """
    if isinstance(texts, str):
        return [check_text(texts, blank=blank)]
    if not isinstance(texts, Sequence) or isinstance(texts, (bytes, bytearray)):
        raise InvalidInputError(f"texts must be a str or a sequence of str, got {type(texts).__name__}")
    return [check_text(text, f"text {index}", blank) for index, text in enumerate(texts)]

