"""Differentiable landmark pooling: hidden states with grad, gathered at the landmark positions."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lmk_rag.train.features import TokenBatch


def hidden_states(model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
    """Run the model on a batch's windows.

    :param model: a Hugging Face encoder (its output has ``last_hidden_state``).
    :param batch: the windows, on the model's device.
    :return: the final states, shape (n_windows, longest, dim).
    """
    return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state


def landmark_states(hidden: torch.Tensor, batch: TokenBatch) -> torch.Tensor:
    """The final state of every landmark token.

    :param hidden: the batch's states from :func:`hidden_states`.
    :param batch: the batch they came from.
    :return: landmark states in batch order, shape (n_landmarks, dim), float32.
    """
    return hidden[batch.landmark_window, batch.landmark_position].float()


def lmk_vectors(states: torch.Tensor, batch: TokenBatch) -> torch.Tensor:
    """LMK pooling: the mean of each text's landmark states, L2-normalised.

    :param states: landmark states from :func:`landmark_states`, shape (n_landmarks, dim).
    :param batch: the batch they came from.
    :return: one vector per text, shape (n_texts, dim).
    """
    sums = states.new_zeros((batch.n_texts, states.shape[1])).index_add(0, batch.landmark_text, states)
    counts = torch.bincount(batch.landmark_text, minlength=batch.n_texts).clamp_min(1).to(states.dtype)
    return F.normalize(sums / counts[:, None], dim=-1)


def landmark_matrix(states: torch.Tensor, batch: TokenBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Each text's normalised landmark vectors, padded to the longest text.

    :param states: landmark states, shape (n_landmarks, dim), listed text by text.
    :param batch: the batch they came from.
    :return: ``(vectors, mask)``: shape (n_texts, most_landmarks, dim) and (n_texts, most_landmarks),
        ``mask`` True where a landmark is real.
    """
    counts = torch.bincount(batch.landmark_text, minlength=batch.n_texts)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(len(batch.landmark_text), device=states.device) - starts[batch.landmark_text]
    width = int(counts.max())
    vectors = states.new_zeros((batch.n_texts, width, states.shape[1]))
    vectors = vectors.index_put((batch.landmark_text, slot), F.normalize(states, dim=-1))
    mask = torch.zeros((batch.n_texts, width), dtype=torch.bool, device=states.device)
    mask[batch.landmark_text, slot] = True
    return vectors, mask
