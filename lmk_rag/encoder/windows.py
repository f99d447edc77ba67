"""Model input for landmark encoding: landmark tokens inserted after chunks, chunks packed into windows.

Two layouts:

* ``"after"`` (LMK pooling): ``[CLS] c1 [SEP] c2 [SEP] ... cn [SEP]``; each chunk's landmark is the
  SEP (or EOS) after it, and the last landmark doubles as the end-of-sequence token, so a one-chunk
  text is exactly the sequence a plain encoder sees.
* ``"before"`` (multi-CLS, the paper's control): ``[CLS] c1 [CLS] c2 ... [CLS] cn [SEP]``; each
  chunk's landmark is the CLS before it.

A window holds whole chunks only. Each chunk owns the states of its tokens and its landmark; the first
chunk of a window also owns the window's leading/trailing special tokens, so a chunk alone in its
window (``context="chunk"``) owns exactly the tokens a plain encoder would mean-pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from lmk_rag.errors import EmptyTextError, LandmarkTokenError

LandmarkPlacement = Literal["after", "before"]


@dataclass(frozen=True)
class SpecialTokens:
    """The token ids a landmark placement needs.

    :param cls_id: the sequence-start token (CLS, or BOS), or None when the tokenizer has neither.
    :param landmark_id: the landmark token: SEP, or EOS when there is no SEP.
    :param pad_id: the padding token.
    """

    cls_id: int | None
    landmark_id: int
    pad_id: int

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> SpecialTokens:
        """Read the special tokens of a Hugging Face tokenizer: the landmark is its SEP (BERT, ModernBERT, RoBERTa and
        XLM-R's ``</s>``), else its EOS (decoders); the sequence start is the one token the tokenizer itself puts
        before a text (CLS, ``<s>``, BOS), or None when it puts none.

        :raises LandmarkTokenError: when the tokenizer has neither a SEP nor an EOS token, or puts more than one token
            before a text; the message names the fix.
        """
        landmark_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        if landmark_id is None:
            raise LandmarkTokenError(
                f"tokenizer {type(tokenizer).__name__} has neither a SEP nor an EOS token to use as landmark: give it "
                "one (tokenizer.add_special_tokens({'eos_token': '</s>'}) and model.resize_token_embeddings, then save "
                "both into the model folder), or use a model whose tokenizer has one"
            )
        bare = tokenizer("a", add_special_tokens=False)["input_ids"]
        full = tokenizer("a")["input_ids"]
        prefix = next((full[:start] for start in range(len(full) - len(bare) + 1)
                       if full[start:start + len(bare)] == bare), full)
        if len(prefix) > 1:
            raise LandmarkTokenError(
                f"tokenizer {type(tokenizer).__name__} puts {len(prefix)} tokens {prefix} before a text; lmk-rag "
                "places landmarks for one sequence-start token (CLS, <s>, BOS) or none: save the tokenizer with a "
                "simpler post-processor"
            )
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else landmark_id
        return cls(cls_id=prefix[0] if prefix else None, landmark_id=landmark_id, pad_id=pad_id)


@dataclass(frozen=True)
class Tokenized:
    """One text's tokens, without special tokens.

    :param ids: the text's token ids.
    :param offsets: per token, its ``(start, end)`` char offsets in the text.
    :param prompt_ids: the prompt's token ids, put before the text's tokens in every window (empty without one).
    """

    ids: list[int]
    offsets: list[tuple[int, int]]
    prompt_ids: list[int]


@dataclass(frozen=True)
class Window:
    """One model input sequence and where each of its chunks' states are.

    :param text_index: which text of the batch this window belongs to.
    :param input_ids: the token ids, special tokens included.
    :param chunk_indices: the chunks of the text whose states this window yields (context chunks excluded).
    :param landmark_positions: per yielded chunk, the position of its landmark token.
    :param sum_ranges: per yielded chunk, the positions ``[start, end)`` whose states it owns.
    :param cls_position: the position of the window's sequence-start token, or None.
    :param prompt_range: the positions ``[start, end)`` of the prompt's tokens (owned by no chunk; empty without a
        prompt); they lie inside the first chunk's ``sum_ranges`` entry when that chunk starts the window.
    """

    text_index: int
    input_ids: list[int]
    chunk_indices: list[int]
    landmark_positions: list[int]
    sum_ranges: list[tuple[int, int]]
    cls_position: int | None
    prompt_range: tuple[int, int] = (0, 0)


def special_token_count(placement: LandmarkPlacement, special: SpecialTokens) -> int:
    """How many tokens a window with one chunk adds around it (so a chunk may hold ``max_length`` minus this)."""
    if placement == "before":
        return 2
    return 2 if special.cls_id is not None else 1


def build_windows(
    text_index: int,
    ids: Sequence[int],
    chunks: Sequence[tuple[int, int]],
    special: SpecialTokens,
    placement: LandmarkPlacement,
    max_length: int,
    *,
    one_chunk_per_window: bool = False,
    overlap_tokens: int = 0,
    prompt_ids: Sequence[int] = (),
) -> list[Window]:
    """Pack a text's chunks into windows of at most ``max_length`` tokens.

    :param text_index: index of the text in its batch (copied into each window).
    :param ids: the text's token ids, without special tokens.
    :param chunks: token ranges from :func:`lmk_rag.encoder.planning.plan_landmarks`; each must fit a window.
    :param special: the special token ids.
    :param placement: ``"after"`` (SEP landmarks) or ``"before"`` (CLS landmarks).
    :param max_length: the model's window, special tokens included.
    :param one_chunk_per_window: encode each chunk alone (``context="chunk"``).
    :param overlap_tokens: up to this many tokens of whole preceding chunks are prepended to a window as
        context; their states are not used.
    :param prompt_ids: the prompt's tokens, put after the sequence-start token of every window (``"after"`` only).
    :return: the windows, in text order.
    """
    if placement == "before" and special.cls_id is None:
        raise LandmarkTokenError("multi-CLS pooling needs a CLS or BOS token; this tokenizer has neither")
    if placement == "before" and prompt_ids:
        raise ValueError("multi-CLS windows take no prompt")
    base = special_token_count(placement, special) - 1 + len(prompt_ids)
    windows: list[Window] = []
    next_chunk = 0
    while next_chunk < len(chunks):
        context = [] if one_chunk_per_window else _context_chunks(chunks, next_chunk, overlap_tokens)
        budget = max_length - base - sum(_cost(chunks[c]) for c in context)
        if _cost(chunks[next_chunk]) > budget:
            context, budget = [], max_length - base
        members: list[int] = []
        while next_chunk < len(chunks) and _cost(chunks[next_chunk]) <= budget:
            members.append(next_chunk)
            budget -= _cost(chunks[next_chunk])
            next_chunk += 1
            if one_chunk_per_window:
                break
        if not members:
            size = _cost(chunks[next_chunk]) - 1
            raise ValueError(f"chunk of {size} tokens does not fit a {max_length}-token window")
        windows.append(_assemble(text_index, ids, chunks, context, members, special, placement, prompt_ids))
    return windows


def _cost(chunk: tuple[int, int]) -> int:
    """Tokens a chunk takes in a window: its tokens and its landmark."""
    return chunk[1] - chunk[0] + 1


def _context_chunks(chunks: Sequence[tuple[int, int]], first: int, overlap_tokens: int) -> list[int]:
    """The whole chunks just before ``first`` that fit in ``overlap_tokens``."""
    context: list[int] = []
    used = 0
    index = first - 1
    while index >= 0 and used + chunks[index][1] - chunks[index][0] <= overlap_tokens and overlap_tokens > 0:
        used += chunks[index][1] - chunks[index][0]
        context.insert(0, index)
        index -= 1
    return context


def _assemble(
    text_index: int,
    ids: Sequence[int],
    chunks: Sequence[tuple[int, int]],
    context: list[int],
    members: list[int],
    special: SpecialTokens,
    placement: LandmarkPlacement,
    prompt_ids: Sequence[int],
) -> Window:
    """Lay out one window's tokens and record each member chunk's landmark and owned positions."""
    input_ids: list[int] = []
    landmark_positions: list[int] = []
    sum_ranges: list[tuple[int, int]] = []
    cls_position: int | None = None
    if placement == "after" and special.cls_id is not None:
        input_ids.append(special.cls_id)
        cls_position = 0
    prompt_range = (len(input_ids), len(input_ids) + len(prompt_ids))
    input_ids.extend(prompt_ids)
    for order, chunk_index in enumerate([*context, *members]):
        owned_from = 0 if order == 0 else len(input_ids)
        if placement == "before":
            if cls_position is None:
                cls_position = len(input_ids)
            landmark = len(input_ids)
            input_ids.append(special.cls_id)  # type: ignore[arg-type]  # checked in build_windows
            start, end = chunks[chunk_index]
            input_ids.extend(ids[start:end])
        else:
            start, end = chunks[chunk_index]
            input_ids.extend(ids[start:end])
            landmark = len(input_ids)
            input_ids.append(special.landmark_id)
        if chunk_index in members:
            landmark_positions.append(landmark)
            sum_ranges.append((owned_from, len(input_ids)))
    if placement == "before":
        input_ids.append(special.landmark_id)
        last_start, _ = sum_ranges[-1]
        sum_ranges[-1] = (last_start, len(input_ids))
    return Window(
        text_index=text_index,
        input_ids=input_ids,
        chunk_indices=list(members),
        landmark_positions=landmark_positions,
        sum_ranges=sum_ranges,
        cls_position=cls_position,
        prompt_range=prompt_range,
    )


def tokenize_with_offsets(tokenizer: Any, texts: Sequence[str], prompt: str = "") -> list[Tokenized]:
    """Token ids and char offsets of each text, without special tokens and without truncation.

    With a prompt, ``prompt + text`` is tokenised as one string, as sentence-transformers does (a BPE tokenizer joins
    the prompt's last space to the text's first word); the tokens that end inside the prompt are the prompt's, the
    others the text's, their offsets counted from the text's start.

    :param tokenizer: a Hugging Face fast tokenizer.
    :param texts: the texts.
    :param prompt: the prompt put before every text, or ``""``.
    :return: per text, its tokens.
    :raises EmptyTextError: when a text has no tokens.
    """
    encoded = tokenizer(
        [prompt + text for text in texts],
        add_special_tokens=False,
        return_offsets_mapping=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        truncation=False,
        verbose=False,
    )
    shift = len(prompt)
    result = []
    for index, (ids, offsets) in enumerate(zip(encoded["input_ids"], encoded["offset_mapping"])):
        split = _prompt_tokens(offsets, shift)
        if split == len(ids):
            raise EmptyTextError(f"text {index} has no tokens for this tokenizer: {texts[index][:40]!r}")
        text_offsets = [(max(start - shift, 0), end - shift) for start, end in offsets[split:]]
        result.append(Tokenized(ids=list(ids[split:]), offsets=text_offsets, prompt_ids=list(ids[:split])))
    return result


def _prompt_tokens(offsets: Sequence[Sequence[int]], prompt_length: int) -> int:
    """How many leading tokens are the prompt's: those that end inside its ``prompt_length`` chars (none without a
    prompt)."""
    if not prompt_length:
        return 0
    return next((position for position, (_, end) in enumerate(offsets) if end > prompt_length), len(offsets))


def pad_windows(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Window token ids padded to the longest window, as the model takes them (inference and training alike).

    :param sequences: each window's token ids (at least one window).
    :param pad_id: the padding token (:attr:`SpecialTokens.pad_id`).
    :return: ``(input_ids, attention_mask)``, int64, shape (n_windows, longest); the mask is 1 for real tokens.
    """
    longest = max(len(sequence) for sequence in sequences)
    input_ids = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(sequences), longest), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        input_ids[row, : len(sequence)] = sequence
        attention_mask[row, : len(sequence)] = 1
    return input_ids, attention_mask
