"""Model input for training: the encoder's own landmark planning and windows, with a granularity per text.

Training must see exactly the sequences inference builds, so this module only calls
:func:`lmk_rag.encoder.planning.plan_landmarks` and :func:`lmk_rag.encoder.windows.build_windows`
(layout ``"after"``: ``[CLS] c1 [SEP] c2 [SEP] ...``) and pads the windows as inference does
(:func:`lmk_rag.encoder.windows.pad_windows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lmk_rag.encoder.planning import plan_landmarks
from lmk_rag.encoder.windows import (
    SpecialTokens,
    build_windows,
    pad_windows,
    special_token_count,
    tokenize_with_offsets,
)
from lmk_rag.errors import InvalidInputError


@dataclass(frozen=True)
class TokenBatch:
    """Padded windows of a batch of texts and where each text's landmarks are.

    Landmarks are listed text by text, in chunk order.

    :param input_ids: window token ids, shape (n_windows, longest).
    :param attention_mask: 1 for real tokens, shape (n_windows, longest).
    :param landmark_window: the window of each landmark, shape (n_landmarks,).
    :param landmark_position: the landmark's position in its window, shape (n_landmarks,).
    :param landmark_text: the text each landmark belongs to, shape (n_landmarks,).
    :param n_texts: how many texts the batch holds.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    landmark_window: torch.Tensor
    landmark_position: torch.Tensor
    landmark_text: torch.Tensor
    n_texts: int

    def to(self, device: torch.device | str) -> TokenBatch:
        """The same batch with every tensor on ``device``."""
        return TokenBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            landmark_window=self.landmark_window.to(device),
            landmark_position=self.landmark_position.to(device),
            landmark_text=self.landmark_text.to(device),
            n_texts=self.n_texts,
        )

    @property
    def padded_tokens(self) -> int:
        """The tokens the model runs on, padding included: windows x the longest window."""
        return self.input_ids.numel()

    def split(self, batch_tokens: int) -> list[MicroBatch]:
        """Split the windows into micro-batches of at most ``batch_tokens`` padded tokens each.

        Windows are sorted longest first (as the encoder batches them) so that little padding is run, and each
        micro-batch is padded to its own longest window only.

        :param batch_tokens: the most padded tokens of one micro-batch, at least the longest window.
        :return: micro-batches covering every window and every landmark once.
        :raises InvalidInputError: when one window alone is longer than ``batch_tokens``.
        """
        lengths = self.attention_mask.sum(dim=1).tolist()
        if max(lengths) > batch_tokens:
            raise InvalidInputError(f"a {max(lengths)}-token window does not fit batch_tokens={batch_tokens}")
        groups: list[list[int]] = []
        for window in sorted(range(len(lengths)), key=lambda index: -lengths[index]):
            if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= batch_tokens:
                groups[-1].append(window)
            else:
                groups.append([window])
        return [self._micro_batch(group, lengths[group[0]]) for group in groups]

    def _micro_batch(self, windows: list[int], longest: int) -> MicroBatch:
        """The micro-batch of some windows (the longest of them ``longest`` tokens), trimmed to that length."""
        rows = torch.tensor(windows, dtype=torch.long, device=self.input_ids.device)
        row_of_window = torch.full((len(self.input_ids),), -1, dtype=torch.long, device=rows.device)
        row_of_window[rows] = torch.arange(len(windows), device=rows.device)
        landmarks = torch.nonzero(row_of_window[self.landmark_window] >= 0).flatten()
        tokens = TokenBatch(
            input_ids=self.input_ids[rows, :longest],
            attention_mask=self.attention_mask[rows, :longest],
            landmark_window=row_of_window[self.landmark_window[landmarks]],
            landmark_position=self.landmark_position[landmarks],
            landmark_text=self.landmark_text[landmarks],
            n_texts=self.n_texts,
        )
        return MicroBatch(tokens, landmarks)


@dataclass(frozen=True)
class MicroBatch:
    """Some windows of a :class:`TokenBatch`, run by the model on their own.

    :param tokens: the windows, padded to their own longest; ``landmark_window`` indexes these windows, and
        ``landmark_text`` and ``n_texts`` are the whole batch's.
    :param landmarks: where the micro-batch's landmarks are in the whole batch's landmark list, shape (n,).
    """

    tokens: TokenBatch
    landmarks: torch.Tensor


def build_token_batch(
    tokenizer: Any, texts: Sequence[str], granularities: Sequence[int], max_length: int
) -> TokenBatch:
    """Tokenise texts, plan ``granularities[i]``-token chunks for text ``i`` and pack them into windows.

    :param tokenizer: a fast Hugging Face tokenizer (char offsets are needed for planning).
    :param texts: the texts.
    :param granularities: one chunk size per text.
    :param max_length: the model window, special tokens included; longer texts get several windows.
    :return: the padded windows and the landmark positions.
    :raises InvalidInputError: when the two lists differ in length or are empty.
    :raises EmptyTextError: when a text has no tokens.
    """
    if len(texts) != len(granularities) or not texts:
        raise InvalidInputError(f"{len(texts)} texts and {len(granularities)} granularities: need one per text, >= 1")
    special = SpecialTokens.from_tokenizer(tokenizer)
    max_chunk_tokens = max_length - special_token_count("after", special)
    tokenized = tokenize_with_offsets(tokenizer, texts)
    sequences: list[list[int]] = []
    windows_of_landmark: list[int] = []
    positions: list[int] = []
    owners: list[int] = []
    for index, (text, tokens, k) in enumerate(zip(texts, tokenized, granularities)):
        plan = plan_landmarks(text, tokens.offsets, int(k), max_chunk_tokens)
        windows = build_windows(index, tokens.ids, plan.chunks, special, "after", max_length)
        # windows come in text order and each lists its chunks in order: landmarks stay in chunk order
        for window in windows:
            for position in window.landmark_positions:
                windows_of_landmark.append(len(sequences))
                positions.append(position)
                owners.append(index)
            sequences.append(window.input_ids)
    input_ids, attention_mask = pad_windows(sequences, special.pad_id)
    return TokenBatch(
        input_ids=torch.from_numpy(input_ids),
        attention_mask=torch.from_numpy(attention_mask),
        landmark_window=torch.tensor(windows_of_landmark, dtype=torch.long),
        landmark_position=torch.tensor(positions, dtype=torch.long),
        landmark_text=torch.tensor(owners, dtype=torch.long),
        n_texts=len(texts),
    )
