"""Old option spellings kept as hidden aliases: they still work and print a one-line deprecation warning."""

from __future__ import annotations

from typing import Any, TypeVar

import typer

T = TypeVar("T")


def old_spelling(old: str, new: str) -> Any:
    """A hidden option for a renamed flag (default None, so the command can tell whether it was given).

    :param old: the old flag, e.g. ``"--lr"``.
    :param new: the flag that replaced it, e.g. ``"--learning-rate"``.
    :return: the ``typer.Option`` to use as a parameter default.
    """
    return typer.Option(None, old, hidden=True, help=f"Deprecated spelling of {new}.")


def renamed(value: T, old_value: T | None, old: str, new: str) -> T:
    """The value of a renamed option: the old spelling's value when it was given (with a warning on stderr).

    :param value: the value of the new option.
    :param old_value: the value of the old spelling (None when not given).
    :param old: the old flag.
    :param new: the new flag.
    :return: the value to use.
    """
    if old_value is None:
        return value
    typer.echo(f"warning: {old} is deprecated, use {new}", err=True)
    return old_value
