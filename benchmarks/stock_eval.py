"""``lmk-rag eval`` with the stock LlamaIndex pipelines registered too: compare lmk-rag with what a LlamaIndex user
builds from stock parts, on your own BEIR folder (docs/eval.md). Takes ``lmk-rag eval``'s arguments::

    pip install -c requirements/lock.txt -r benchmarks/requirements.txt
    python benchmarks/stock_eval.py MY_SET --pipeline llamaindex-fused --json
    python benchmarks/stock_eval.py MY_SET --pipeline lmk-rag --json
"""

from __future__ import annotations

import sys

import stock_pipelines  # noqa: F401  registers the llamaindex-* pipelines

from lmk_rag.cli import app

if __name__ == "__main__":
    app(["eval", *sys.argv[1:]], prog_name="lmk-rag eval")
