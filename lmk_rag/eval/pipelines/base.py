"""The pipeline contract and registry of the eval harness.

A *pipeline* turns document texts into something searchable and ranks those documents for query
texts. The harness (:mod:`lmk_rag.eval.run`) only ever hands a pipeline plain ``str`` texts: no
ids, no qrels, no query metadata. Documents are identified by their position in the list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lmk_rag.errors import InvalidInputError
from lmk_rag.paths import user_cache_dir

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder import LandmarkEncoder

#: One query's result: ``(doc_index, score)`` pairs, best first, at most ``k`` of them.
Ranking = list[tuple[int, float]]


@dataclass(frozen=True)
class PipelineOptions:
    """What every pipeline is built from.

    :param model: a model name or local model folder; ``None`` means the encoder's default model.
    :param cache_dir: a folder the pipeline may use to cache document encodings across runs.
    :param encoder: pipeline settings as JSON values (names, numbers, folder paths as ``str``), what
        ``lmk-rag eval --encoder KEY=VALUE`` sets: keyword overrides for :class:`lmk_rag.LandmarkEncoder`
        (e.g. ``granularity``, ``context``, ``chunk_vector``, ``window_overlap``) and pipeline-specific
        settings (e.g. ``static_model``, ``mixer``); keys left out keep the defaults. A pipeline that needs
        a particular value (``maxsim-chunk`` needs ``context="chunk"``) overrides it.
    :param batch_size: the encoding batch size.
    :param show_progress: whether long steps may show a progress bar.
    :raises InvalidInputError: if ``encoder`` holds a value JSON cannot write (e.g. a live model object).
    """

    model: str | None = None
    cache_dir: Path = field(default_factory=lambda: user_cache_dir("eval"))
    encoder: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 32
    show_progress: bool = False

    def __post_init__(self) -> None:
        """Refuse settings that are not JSON values (the report records them as given)."""
        try:
            json.dumps(self.encoder)
        except (TypeError, ValueError) as error:
            raise InvalidInputError(
                f"PipelineOptions.encoder takes JSON values (names, numbers, folder paths as str): {error}"
            ) from error


@dataclass(frozen=True)
class IndexStats:
    """What indexing the documents cost.

    :param encode_s: seconds the cold (uncached) document encoding or indexing took. On a cache hit
        this is the time stored with the cache, not the time of the load.
    :param cached: whether the document encodings came from the on-disk cache.
    """

    encode_s: float
    cached: bool = False


class Pipeline(Protocol):
    """A retrieval pipeline under evaluation. The harness calls ``index`` once, then ``search`` once.

    A pipeline may also have a ``settings`` attribute (a JSON-able dict, e.g. its encoder's
    effective settings); the harness reports it as ``encoder`` in the JSON.
    """

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Make the documents searchable.

        :param docs: the document texts; a document's index in this list is its identity.
        :return: the indexing cost.
        """
        ...

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Rank the indexed documents for each query.

        :param queries: the query texts.
        :param k: how many documents to return per query at most.
        :return: one :data:`Ranking` per query, in query order.
        """
        ...


PipelineFactory = Callable[[PipelineOptions], Pipeline]

_REGISTRY: dict[str, PipelineFactory] = {}


def register_pipeline(name: str) -> Callable[[PipelineFactory], PipelineFactory]:
    """Register a pipeline factory under ``name`` (a class decorator, or a function decorator).

    The decorated callable takes a :class:`PipelineOptions` and returns an object with the
    :class:`Pipeline` methods. It is returned unchanged, so one class can be registered under
    several names with several decorators (each factory then decides by other means what differs,
    e.g. a ``functools.partial``).

    :param name: the name used by ``lmk-rag eval --pipeline NAME``.
    :return: the decorator.
    :raises InvalidInputError: if ``name`` is already registered.
    """

    def decorator(factory: PipelineFactory) -> PipelineFactory:
        if name in _REGISTRY:
            raise InvalidInputError(f"pipeline {name!r} is registered twice")
        _REGISTRY[name] = factory
        return factory

    return decorator


def get_pipeline(name: str, options: PipelineOptions) -> Pipeline:
    """Build the pipeline registered under ``name``.

    :param name: a registered pipeline name.
    :param options: the options to build it with.
    :return: the pipeline, ready for ``index``.
    :raises InvalidInputError: if no pipeline has that name; the message lists the known names.
    """
    if name not in _REGISTRY:
        raise InvalidInputError(f"unknown pipeline {name!r}; known pipelines: {', '.join(pipeline_names())}")
    return _REGISTRY[name](options)


def pipeline_names() -> list[str]:
    """Return the registered pipeline names, sorted.

    :return: the names.
    """
    return sorted(_REGISTRY)


def landmark_encoder(options: PipelineOptions, settings: dict[str, Any]) -> LandmarkEncoder:
    """The :class:`~lmk_rag.LandmarkEncoder` of a pipeline: the options' model, batch size and progress, plus the
    encoder ``settings`` (what ``lmk-rag eval --encoder KEY=VALUE`` gave, minus the pipeline's own keys).

    :raises InvalidInputError: for a setting the encoder does not take, naming the ones it does.
    """
    import inspect

    from lmk_rag.encoder import LandmarkEncoder

    taken = set(inspect.signature(LandmarkEncoder).parameters) - {"model_name", "batch_size", "show_progress_bar"}
    unknown = sorted(set(settings) - taken)
    if unknown:
        raise InvalidInputError(f"unknown encoder setting(s) {unknown}; the encoder takes {sorted(taken)}")
    return LandmarkEncoder(model_name=options.model, batch_size=options.batch_size,
                           show_progress_bar=options.show_progress, **settings)
