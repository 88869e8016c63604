"""A document → its sentences' token ids, by a WordPiece vocab.txt or by a tokenizer.json as it is, with the words
of its Chinese text where whole-word masking asks a segmenter for them.

With a vocab.txt, each sentence is tokenised as the reference's FullTokenizer would (whitespace does not matter).
With a tokenizer.json, each sentence is encoded as it stands in the document, with the whitespace before it, so
that a leading space gets its mark (Ġ, ▁) as in the tokenizer's own encoding of the whole text; its ids are what
`Tokenizer.encode` gives for that piece of text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcorpus.transforms.sentence_spans import joined_pieces, sentence_spans, text_pieces
from bertcorpus.transforms.sentences import document_sentences
from bertcorpus.transforms.word_segmentation import SegmenterSpec, run_continuations, segmenter_of, word_continues
from bertcorpus.wordpiece.cjk import ideograph_code_points
from bertcorpus.wordpiece.piece_encoder import PieceEncoder
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile
from bertcorpus.wordpiece.vocab import UNK, Vocab


@dataclass
class DocumentTokens:
    ids: np.ndarray  # int32, every sentence's tokens in order
    lengths: np.ndarray  # int32, tokens per sentence (0 for a sentence that tokenises to nothing)
    sentences: list[str]  # the sentences, as their pieces of text
    # Per token, True where it continues a segmenter's word (whole-word masking of Chinese); None where the text has
    # no ideograph or no segmenter asked. `misaligned`: the text and the tokens disagreed on the ideographs.
    word_continues: np.ndarray | None = None
    misaligned: bool = False
    ideographs: int = 0  # the tokens that stand for (or start on) an ideograph, where a segmenter asked
    # tokens of the text that a vocabulary holding its special tokens as pieces made special, turned into its
    # unknown token (a document's "</s>" must not end a segment, nor "<mask>" look masked)
    specials_as_text: int = 0
    # (sentences, 2) int64, where asked: the characters [start, end) of the document's text (for sentences given
    # apart, of the sentences joined by a space) that each sentence's tokens were made from
    spans: np.ndarray | None = None


class DocumentTokenizer:
    """Documents → DocumentTokens, through a vocab.txt (the reference's tokenisation, lower-cased or not) or a
    tokenizer.json (its own normalisation)."""

    def __init__(self, vocab: Vocab | TokenizerFile, lowercase: bool = True, segmentation: SegmenterSpec | None = None):
        self.segmentation = segmentation
        if isinstance(vocab, TokenizerFile):
            self.pieces = PieceEncoder(vocab)
            self.wordpiece = None
            self.unk = vocab.specials.get("unk")
            # the special tokens the model's own pieces may produce from text (a Unigram vocab holding "<s>")
            special = {i for i, is_special in vocab.added.items() if is_special} | set(vocab.specials.values())
            self.specials = np.array(sorted(special - {self.unk}), np.int64)
        else:
            self.wordpiece = WordPieceTokenizer(vocab, lowercase)
            self.unk = vocab.ids[UNK]

    def tokenize(self, text: str | None, sentences: list[str] | None = None, spans: bool = False) -> DocumentTokens:
        """A document's text (paragraphs apart by a blank line) or its sentences given apart; with spans, where
        each sentence's tokens come from in the text."""
        if self.wordpiece is not None:
            split = sentences if sentences is not None else document_sentences(text or "")
            found = self._by_vocab(split)
            if spans:
                found.spans = joined_spans(split) if sentences is not None else sentence_stretches(text or "", split)
            return found
        if sentences is not None:
            pieces, starts = joined_pieces(sentences), None
        else:
            pieces, starts = text_pieces(text or "")
        found = self._by_tokenizer(pieces)
        if spans:
            if starts is None:
                starts = np.cumsum([0, *map(len, pieces[:-1])])
            elif len(starts) != len(pieces):  # not expected: see text_pieces
                raise ValueError("the sentences are not the text's")
            starts = np.asarray(starts, np.int64)
            found.spans = np.stack([starts, starts + np.fromiter(map(len, pieces), np.int64, len(pieces))], axis=1)
        return found

    def _by_vocab(self, sentences: list[str]) -> DocumentTokens:
        if self.segmentation is None:
            ids, lengths = self.wordpiece.encode_sentences(sentences)
            return DocumentTokens(ids, lengths, sentences)
        ids, lengths, ideographs = self.wordpiece.encode_sentences_marked(sentences)
        if not ideographs.any():
            return DocumentTokens(ids, lengths, sentences)
        continues = word_continues(sentences, ideographs, self.segmentation)
        if continues is None:
            return DocumentTokens(ids, lengths, sentences, misaligned=True)
        return DocumentTokens(ids, lengths, sentences, continues, ideographs=int(ideographs.sum()))

    def _by_tokenizer(self, pieces: list[str]) -> DocumentTokens:
        if self.segmentation is None:
            ids, lengths = self.pieces.encode_pieces(pieces)
            found = DocumentTokens(ids, lengths, pieces)
        else:
            ids, lengths, offsets = self.pieces.encode_pieces(pieces, offsets=True)
            words = piece_words(pieces, lengths, offsets, self.segmentation)
            if words is None:
                found = DocumentTokens(ids, lengths, pieces)
            else:
                found = DocumentTokens(ids, lengths, pieces, words[0], ideographs=int(words[1].sum()))
        special = np.isin(found.ids, self.specials)
        if special.any():
            found.ids = np.where(special, -1 if self.unk is None else self.unk, found.ids).astype(np.int32)
            found.specials_as_text = int(special.sum())
            if self.unk is None:  # no unknown token to stand for them: they go
                keep = found.ids >= 0
                owner = np.repeat(np.arange(len(found.lengths)), found.lengths)
                found.lengths = np.bincount(owner[keep], minlength=len(found.lengths)).astype(np.int32)
                found.ids = found.ids[keep]
                if found.word_continues is not None:
                    # a token continues a word when the kept token before it is of the same word
                    word = np.cumsum(~found.word_continues)[keep]
                    found.word_continues = np.concatenate([[False], word[1:] == word[:-1]])[: len(word)]
        return found


def joined_spans(sentences: list[str]) -> np.ndarray:
    """Each sentence's characters in the sentences joined by a space."""
    lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))
    starts = np.cumsum(lengths + 1) - lengths - 1
    return np.stack([starts, starts + lengths], axis=1).reshape(-1, 2)


def sentence_stretches(text: str, sentences: list[str]) -> np.ndarray:
    """Each sentence's characters in the text, from its first to its last."""
    spans = sentence_spans(text, sentences)
    if spans is None:  # not expected (document_sentences keeps every character but whitespace)
        raise ValueError("the sentences are not the text's")
    return np.array(spans, np.int64).reshape(-1, 2)


def piece_words(
    pieces: list[str], lengths: np.ndarray, offsets: np.ndarray, spec: SegmenterSpec
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per token of the pieces (offsets: where each starts in its piece): True where it starts on an ideograph that
    continues the segmenter's word of the one before, and True where it starts on an ideograph at all; None where
    the pieces hold no ideograph. A token that starts
    inside the character the token before starts on (a byte-level token of part of a character) is no word start
    either, by its vocabulary's word flags (TokenizerFile.word_flags)."""
    text = "".join(pieces)
    code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    ideograph = ideograph_code_points(code_points)
    if not ideograph.any() or not len(offsets):
        return None
    piece_starts = np.cumsum([0, *map(len, pieces[:-1])])
    first_char = np.minimum(offsets + np.repeat(piece_starts, lengths), len(text) - 1)
    words_of = segmenter_of(spec)
    continuing = np.concatenate([run_continuations(p, spec, words_of) for p in pieces])  # per ideograph, in order
    rank = np.cumsum(ideograph) - 1  # per character, the number of the last ideograph up to it
    new_char = np.concatenate(([True], first_char[1:] != first_char[:-1]))
    on_ideograph = ideograph[first_char] & new_char
    out = np.zeros(len(offsets), bool)
    out[on_ideograph] = continuing[rank[first_char[on_ideograph]]]
    return out, on_ideograph
