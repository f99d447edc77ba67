"""The ``lmk-rag`` command line. Each command group lives in its own module and adds its commands to the
root app (:mod:`lmk_rag.cli.root`); importing this package registers them all."""

from __future__ import annotations

from lmk_rag.cli.root import app

#: The help panel of every command but the everyday ones (``ingest``, ``query``, ``info``), listed after them.
MORE = "Evaluation, training and tools"


def _register_commands() -> None:
    """Import the command modules (each adds its commands to ``app``): the everyday store commands first (the
    import order is the help's order)."""
    # isort: off
    from lmk_rag.cli import store  # noqa: F401
    from lmk_rag.cli import encode  # noqa: F401
    from lmk_rag.cli import eval  # noqa: F401
    from lmk_rag.cli import finetune  # noqa: F401
    from lmk_rag.cli import projection  # noqa: F401
    from lmk_rag.cli import static  # noqa: F401
    # isort: on

    for command in app.registered_commands:
        command.rich_help_panel = command.rich_help_panel or MORE


_register_commands()

__all__ = ["app"]
