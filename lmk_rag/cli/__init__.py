"""The ``lmk-rag`` command line. Each command group lives in its own module and registers itself here."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="lmk-rag",
    help="Landmark-pooling embeddings and two-stage Qdrant search for long documents.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Landmark-pooling embeddings and two-stage Qdrant search for long documents."""


def _register_commands() -> None:
    """Import the command modules; each adds its commands to ``app``."""
    from lmk_rag.cli import encode  # noqa: F401
    from lmk_rag.cli import eval  # noqa: F401
    from lmk_rag.cli import finetune  # noqa: F401
    from lmk_rag.cli import static  # noqa: F401
    from lmk_rag.cli import store  # noqa: F401


_register_commands()
