"""Filter values: bytes are refused everywhere (never read as a list of ints); on the command line, a value in double
quotes is a string, so a string that looks like a number is found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.cli.store import filter_value
from lmk_rag.errors import InvalidInputError
from lmk_rag.store import FieldCondition, Filter, LandmarkStore


@pytest.mark.parametrize("op, value", [("nin", b"007"), ("in", bytearray(b"007")), ("eq", b"007"), ("ne", b"7"),
                                       ("substring", b"0"), ("nin", memoryview(b"007"))])
def test_bytes_are_refused_by_name_in_every_operator(op: str, value: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"bytes .*value\.decode\(\)"):
        FieldCondition("code", op, value)  # type: ignore[arg-type]


def test_a_bytes_filter_is_refused_before_a_search(tmp_path: Path, minilm_encoder: Any, docs: dict[str, str]) -> None:
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as store:
        store.upsert_documents([("as-string", next(iter(docs.values())), {"code": "007"})])
        with pytest.raises(InvalidInputError, match="bytes"):
            store.search("a page", filter=Filter(must=[FieldCondition("code", "nin", b"007")]))
        with pytest.raises(InvalidInputError, match="bytes"):
            store.search("a page", filter={"code": b"007"})


@pytest.mark.parametrize("raw, value", [
    ('"007"', "007"), ('"true"', "true"), ('"null"', "null"), ('"1e5"', "1e5"), ('""', ""), ('"a"b"', 'a"b'),
    ('"', '"'), ('"007', '"007'), ("007", 7),
])
def test_a_value_in_double_quotes_is_the_string_between_them(raw: str, value: Any) -> None:
    parsed = filter_value(raw)
    assert parsed == value and type(parsed) is type(value)


def test_query_filters_a_string_that_looks_like_a_number(tmp_path: Path, minilm_encoder: Any,
                                                         docs: dict[str, str]) -> None:
    texts = list(docs.values())[:2]
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as store:
        store.upsert_documents([("as-string", texts[0], {"code": "007"}), ("as-number", texts[1], {"code": 7})])

    def found(option: str) -> set[str]:
        result = CliRunner().invoke(app, ["query", "a page", "--store", str(tmp_path / "store"), "--filter", option,
                                          "--json"])
        assert result.exit_code == 0, result.output
        return {hit["doc_id"] for hit in json.loads(result.stdout)["hits"]}

    assert found('code="007"') == {"as-string"}
    assert found("code=007") == {"as-number"}
