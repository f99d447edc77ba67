"""A backend's engine calls with their failures as typed errors: :class:`Guarded` wraps the engine object (an Edge
shard, a qdrant-client client) and passes every failure of its calls through the backend's translation
(``edge.py`` and ``server.py`` each say what their engine's errors mean)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Guarded:
    """A backend's engine object whose every method call passes its failures through ``translate``.

    :param target: the engine object (an Edge shard, a qdrant-client client).
    :param translate: ``(method name, error) -> a typed error to raise instead, or None to let the error through``.
    """

    def __init__(self, target: Any, translate: Callable[[str, BaseException], Exception | None]) -> None:
        self._target = target
        self._translate = translate

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as error:  # pyo3's PanicException is a BaseException
                typed = self._translate(name, error)
                if typed is None:
                    raise
                raise typed from error

        return guarded
