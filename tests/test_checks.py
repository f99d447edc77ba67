"""The one text check (lmk_rag.checks.check_text / check_texts) and the boundaries that use it: the encoders, the
training data and the LlamaIndex embedding refuse the same texts with the same error types."""

from __future__ import annotations

import pytest

from lmk_rag.checks import check_text, check_texts
from lmk_rag.errors import EmptyTextError, InvalidInputError


def test_check_text_names_the_problem() -> None:
    assert check_text("a word") == "a word"
    assert check_text(" \n", blank=True) == " \n"
    with pytest.raises(InvalidInputError, match="text must be a str, got int"):
        check_text(5)
    with pytest.raises(EmptyTextError, match="query is empty or whitespace-only"):
        check_text(" \t", "query")
    with pytest.raises(InvalidInputError, match=r"not valid Unicode \(surrogates not allowed at character 5\)"):
        check_text("lone \ud800", blank=True)


def test_check_texts_takes_a_str_or_a_sequence() -> None:
    assert check_texts("one") == ["one"]
    assert check_texts(("a", "b")) == ["a", "b"] and check_texts([]) == []
    with pytest.raises(InvalidInputError, match="text 1 must be a str, got NoneType"):
        check_texts(["a", None])
    with pytest.raises(EmptyTextError, match="text 1 is empty"):
        check_texts(["a", ""])
    assert check_texts(["a", ""], blank=True) == ["a", ""]
    for texts in (None, 7, b"bytes", {"a"}):
        with pytest.raises(InvalidInputError, match="texts must be a str or a sequence of str"):
            check_texts(texts)


def test_the_static_encoders_refuse_what_the_check_refuses() -> None:
    from lmk_rag.static import StaticTokenEncoder
    from lmk_rag.static.document_encoder import StaticDocumentEncoder

    static, documents = StaticTokenEncoder(), StaticDocumentEncoder()
    for call in (lambda: static.encode_query_tokens("lone \ud800"), lambda: static.tokenize("a\ud800"),
                 lambda: static.encode(["fine", "a\ud800"]), lambda: documents.encode_documents(["a\ud800"])):
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            call()
    with pytest.raises(EmptyTextError, match="text 1 is empty"):
        documents.encode_queries(["fine", "  "])
    assert static.encode(["fine", ""]).shape == (2, static.dim)  # pooled: a text without words gives zeros
