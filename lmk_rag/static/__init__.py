"""Static late interaction: model2vec token vectors, MaxSim scoring and an optional ConvMixer (torch).

``StaticTokenEncoder``, ``StaticDocumentEncoder`` (documents and queries as a static store encodes them),
``MixerWeights`` (mixer inference, :mod:`lmk_rag.static.mixer`) and the MaxSim functions
need numpy and model2vec only; ``ConvMixer`` and training import torch from :mod:`lmk_rag.static.mixer_torch` /
:mod:`lmk_rag.static.train`.
"""

from __future__ import annotations

from lmk_rag.static.document_encoder import StaticDocumentEncoder
from lmk_rag.static.maxsim import maxsim, maxsim_matrix
from lmk_rag.static.mixer import MixerWeights
from lmk_rag.static.model import StaticVectors, default_model_dir, distill_static, load_static_vectors
from lmk_rag.static.token_encoder import StaticTokenEncoder, StaticTokens, tokens_in_chunks

__all__ = [
    "MixerWeights",
    "StaticDocumentEncoder",
    "StaticTokenEncoder",
    "StaticTokens",
    "StaticVectors",
    "default_model_dir",
    "distill_static",
    "load_static_vectors",
    "maxsim",
    "maxsim_matrix",
    "tokens_in_chunks",
]
