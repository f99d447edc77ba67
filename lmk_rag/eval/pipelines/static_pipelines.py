"""Static (model2vec) pipelines: ``static`` (pooled), ``static-maxsim`` (raw token MaxSim) and
``static-mixer`` (token MaxSim after the trained ConvMixer).

Settings come from ``PipelineOptions.encoder`` (``lmk-rag eval --encoder`` overrides):
``static_model`` (a model2vec folder or hub id; default: the model distilled from MiniLM) and, for
``static-mixer``, ``mixer`` (a folder saved by ``lmk-rag train-mixer``; default: the cached default mixer).
numpy only: these pipelines import no torch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, register_pipeline
from lmk_rag.eval.scoring import rank_single, top_k

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.static import StaticTokenEncoder


class _StaticPipeline:
    """Build the static encoder from the options, encode documents in ``index``, queries in ``search``."""

    def __init__(self, options: PipelineOptions, tokens: bool, mixer: bool) -> None:
        """:param options: the pipeline options.
        :param tokens: rank by token MaxSim (True) or by pooled vectors (False).
        :param mixer: pass tokens through the ConvMixer.
        """
        self.options = options
        self._tokens = tokens
        self._use_mixer = mixer
        self._encoder: StaticTokenEncoder | None = None
        self._docs: Any = None

    @property
    def settings(self) -> dict[str, Any]:
        """The static encoder's settings (after :meth:`index`), reported in the eval JSON."""
        return dict(self._encoder.settings) if self._encoder is not None else {}

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Load the static model (and mixer) and encode the documents.

        :param docs: the document texts.
        :return: the encoding time (never cached: static encoding is cheap).
        """
        from lmk_rag.static import StaticTokenEncoder
        from lmk_rag.static.mixer import default_mixer_dir

        mixer = None
        if self._use_mixer:
            mixer = self.options.encoder.get("mixer") or default_mixer_dir()
        self._encoder = StaticTokenEncoder(self.options.encoder.get("static_model"), mixer=mixer)
        start = time.perf_counter()
        if self._tokens:
            self._docs = [self._encoder.encode_document_tokens(text) for text in docs]
        else:
            self._docs = self._encoder.encode(list(docs))
        return IndexStats(encode_s=time.perf_counter() - start)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Encode the queries and rank the documents.

        :param queries: the query texts.
        :param k: results per query.
        :return: one ranking per query.
        """
        from lmk_rag.static import maxsim_matrix

        assert self._encoder is not None, "index() must be called before search()"
        if not self._tokens:
            return rank_single(self._encoder.encode(list(queries)), self._docs, k)
        query_tokens = [self._encoder.encode_query_tokens(text) for text in queries]
        return top_k(maxsim_matrix(query_tokens, self._docs), k)


register_pipeline("static")(lambda options: _StaticPipeline(options, tokens=False, mixer=False))
register_pipeline("static-maxsim")(lambda options: _StaticPipeline(options, tokens=True, mixer=False))
register_pipeline("static-mixer")(lambda options: _StaticPipeline(options, tokens=True, mixer=True))
