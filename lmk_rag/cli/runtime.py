"""The encoder options shared by the commands that build an encoder: ``--backend``, ``--dtype``, ``--granularity``.

Plain strings, checked by the encoder (whose error names the fix): importing the encoder's types here would
import torch for every command.
"""

from __future__ import annotations

from typing import Any

import typer


def backend_option() -> Any:
    """The ``--backend`` option (default None: the encoder's default, torch)."""
    return typer.Option(None, "--backend", help="What runs the transformer: torch (default) or onnx (CPU).")


def dtype_option() -> Any:
    """The ``--dtype`` option (default None: the encoder's default, auto)."""
    return typer.Option(
        None, "--dtype", help="torch: auto, float32, bfloat16, float16; onnx: auto (float32), float32, int8."
    )


def runtime_settings(backend: str | None, dtype: str | None) -> dict[str, Any]:
    """The encoder keyword arguments the two options set (only those given).

    :param backend: the ``--backend`` value or None.
    :param dtype: the ``--dtype`` value or None.
    :return: e.g. ``{"backend": "onnx", "dtype": "int8"}``.
    """
    settings: dict[str, Any] = {}
    if backend is not None:
        settings["backend"] = backend
    if dtype is not None:
        settings["dtype"] = dtype
    return settings


def parse_granularity(value: str) -> int | str | None:
    """A ``--granularity`` value: a number of tokens (``"32"``, also ``"-3"``, which the encoder then refuses with
    its own message), ``"sentence"``, ``"variable"`` or ``"none"`` (the plain encoder).

    :raises typer.BadParameter: for anything else.
    """
    if value.lstrip("-").isdigit():
        return int(value)
    if value.lower() == "none":
        return None
    if value in ("sentence", "variable"):
        return value
    raise typer.BadParameter(f"expected a number of tokens, 'sentence', 'variable' or 'none', got {value!r}",
                             param_hint="'--granularity'")
