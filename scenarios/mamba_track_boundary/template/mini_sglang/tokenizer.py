"""A character tokenizer over a 64-symbol alphabet (token 0, the space, doubles as EOS)."""

from __future__ import annotations

import string

ALPHABET = " " + string.ascii_lowercase + string.ascii_uppercase + string.digits + "."
assert len(ALPHABET) == 64


class CharTokenizer:
    vocab_size = len(ALPHABET)

    def encode(self, text: str) -> list[int]:
        unknown = sorted({c for c in text if c not in ALPHABET})
        if unknown:
            raise ValueError(f"characters outside the vocabulary: {''.join(unknown)!r}")
        return [ALPHABET.index(c) for c in text]

    def decode(self, token_ids: list[int]) -> str:
        return "".join(ALPHABET[t] for t in token_ids)
