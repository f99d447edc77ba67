"""The ``--backend`` and ``--dtype`` options shared by the commands that build an encoder.

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
