"""Question pairs for the projection (issue 42): does a projection fitted on the shipped training pairs plus pairs
whose queries are natural questions of other domains (``benchmarks/data/faq-train``: the CVS, Emacs and R FAQs)
rank better than the shipped projection, on natural questions and on every other kind of query?

Every variant is fitted from the identity by the product's trainer with the shipped projection's settings
(:func:`lmk_rag.train.projection.train_projection`, mixed 0.5, 10% of the pairs held out to choose the epoch;
``adapt_study.Fitter``), and ranks with the store's candidates and fusion (``common.query_ranking``) over the same
cached encoder states, re-pooled through its projection:

- ``base``: the shipped projection;
- ``refit``: fitted again on the shipped projection's training pairs (the control: what a fit alone changes);
- ``train+faq``: fitted on those pairs and the question pairs;
- ``train+faq x2``: the same, each question pair given twice (questions as a larger share of the fit).

Prints nDCG@10 per variant with the paired difference to ``base`` and writes the per-query values::

    python benchmarks/studies/projection_study.py perlfaq-answers manpages-short --out projection_study.json
"""

from __future__ import annotations

import common
from adapt_study import TRAINING_PAIRS, Fitter, fitted_folder, rankings

from lmk_rag.research import user_cache_dir
from lmk_rag.train import load_training_data

QUESTION_PAIRS = common.BENCHMARKS / "data" / "faq-train" / "pairs.jsonl"
#: Where the fitted projections are kept between runs (the fits are deterministic: seeded, CPU).
FITTED = user_cache_dir("projection-study")
VARIANTS = ("refit", "train+faq", "train+faq x2")


def projections() -> dict[str, str]:
    """Each variant's projection folder, fitted when missing."""
    folders = {name: fitted_folder(FITTED, name) for name in VARIANTS}
    if not all((folder / "projection_config.json").exists() for folder in folders.values()):
        training = [(pair.query, pair.positive) for source in TRAINING_PAIRS for pair in load_training_data(source)]
        questions = [(pair.query, pair.positive) for pair in load_training_data(QUESTION_PAIRS)]
        print(f"  {len(training)} training pairs, {len(questions)} question pairs", flush=True)
        fitter = Fitter(FITTED)
        pairs = {"refit": training, "train+faq": training + questions,
                 "train+faq x2": training + questions + questions}
        for name in VARIANTS:
            fitter.fit(name, pairs[name])
    return {name: str(folder) for name, folder in folders.items()}


def study(corpus: common.Corpus) -> dict[str, dict[str, float]]:
    """Every variant's per-query nDCG@10, by query id."""
    ranked = {"base": rankings(corpus)}
    for name, projection in projections().items():
        ranked[name] = rankings(common.corpus_of(corpus.data, projection=projection))
    return common.ndcg_per_query(corpus, ranked)


if __name__ == "__main__":
    common.run_study(__doc__.split("\n")[0], study)
