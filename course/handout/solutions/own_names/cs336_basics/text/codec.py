"""Encoding text to ids and back with a learned vocabulary and merge list."""

import regex

from ..failures import BadInput, UnknownToken
from .pretokens import GPT2_SPLIT, checked_specials, special_splitter

_SPACE = regex.compile(r"\s")


class ByteLevelCodec:
    def __init__(self, vocab, merges, special_tokens=None):
        self.specials = checked_specials(special_tokens)
        self.decoder = dict(vocab)
        self.encoder = {token: i for i, token in self.decoder.items()}
        for special in self.specials:
            token = special.encode("utf-8")
            if token not in self.encoder:
                self.encoder[token] = len(self.decoder) and max(self.decoder) + 1
                self.decoder[self.encoder[token]] = token
        self.merge_rank = {}
        for rank, (left, right) in enumerate(merges):
            if (
                left not in self.encoder
                or right not in self.encoder
                or left + right not in self.encoder
            ):
                raise BadInput(
                    f"merge {left!r} + {right!r} uses or makes a token outside the vocab"
                )
            self.merge_rank[(left, right)] = rank
        self.splitter = special_splitter(self.specials)
        self.memo = {}

    def _pretoken(self, word):
        hit = self.memo.get(word)
        if hit is not None:
            return hit
        symbols = [bytes([b]) for b in word.encode("utf-8")]
        while len(symbols) > 1:
            best = None
            for i in range(len(symbols) - 1):
                rank = self.merge_rank.get((symbols[i], symbols[i + 1]))
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, i)
            if best is None:
                break
            i = best[1]
            symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]
        ids = tuple(self.encoder[s] for s in symbols)
        if len(self.memo) < 100_000:
            self.memo[word] = ids
        return ids

    def encode(self, text):
        ids = []
        pieces = self.splitter.split(text) if self.splitter else [text]
        for position, piece in enumerate(pieces):
            if position % 2:
                ids.append(self.encoder[piece.encode("utf-8")])
                continue
            for word in GPT2_SPLIT.findall(piece):
                ids.extend(self._pretoken(word))
        return ids

    def _settled(self, text):
        """Length of the prefix of ``text`` whose encoding more text cannot change: it stops
        before any tail that more text could turn into (a longer) special token, then at the
        start of the last whitespace run that follows a non-space (no pre-token crosses it), or
        before the special token that run lies in (specials may hold spaces)."""
        end = len(text)
        longest = max(map(len, self.specials), default=0)
        for start in range(max(0, len(text) - longest + 1), len(text)):
            tail = text[start:]
            if any(len(s) > len(tail) and s.startswith(tail) for s in self.specials):
                end = start
                break
        i = end - 1
        while i > 0 and not (_SPACE.match(text[i]) and not _SPACE.match(text[i - 1])):
            i -= 1
        for match in self.splitter.finditer(text) if self.splitter else ():
            if match.start() < i < match.end():
                return match.start()
        return max(i, 0)

    def encode_iterable(self, chunks):
        pending = ""
        for chunk in chunks:
            pending += chunk
            cut = self._settled(pending)
            if cut:
                yield from self.encode(pending[:cut])
                pending = pending[cut:]
        if pending:
            yield from self.encode(pending)

    def decode(self, ids):
        try:
            raw = b"".join(self.decoder[i] for i in ids)
        except KeyError as error:
            raise UnknownToken(f"unknown token id {error.args[0]}") from None
        return raw.decode("utf-8", errors="replace")
