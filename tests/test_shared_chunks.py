"""Workers share what their tokenizers learn, and what a tokenizer takes in never changes its ids."""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import BOOKS, SAMPLE_TEXT, VOCAB

from wordpiece.shared_chunks import ChunkExchange, _whole_records
from wordpiece.tokenizer import WordPieceTokenizer
from wordpiece.vocab import Vocab


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.load(str(VOCAB))


def _learns(tokenizer: WordPieceTokenizer, text: str) -> int:
    """Chunks the tokenizer had to learn to encode text."""
    before = tokenizer.known_chunks()
    tokenizer.encode(text)
    return tokenizer.known_chunks() - before


def _ids_by_chunk(tokenizer: WordPieceTokenizer) -> dict[str, list[int]]:
    chunks, counts, ids = tokenizer.learned(0)
    ends = np.cumsum(counts)
    return {chunk: ids[end - count:end].tolist() for chunk, count, end in zip(chunks, counts, ends)}


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_worker_takes_in_what_another_learned(tmp_path, vocab, lowercase):
    book = BOOKS[0].read_text(encoding="utf-8")[:40000] + " ΟΔΟΣ 東京 naïve x" + "y" * 300
    first, second = WordPieceTokenizer(vocab, lowercase), WordPieceTokenizer(vocab, lowercase)
    mine, theirs = ChunkExchange(str(tmp_path), first), ChunkExchange(str(tmp_path), second)
    learned = _learns(first, book)
    assert learned > 1000
    mine.share()
    assert theirs.take_in() == learned
    assert _learns(second, book) == 0  # nothing left to learn
    fresh = WordPieceTokenizer(vocab, lowercase)
    assert second.encode(book).tolist() == fresh.encode(book).tolist() == first.encode(book).tolist()
    # A second visit finds nothing new, and what was taken in is not shared back.
    assert theirs.take_in() == 0
    theirs.share()
    assert os.listdir(tmp_path) == [mine.own_name]


def test_only_new_rows_are_shared_and_a_cleared_table_starts_over(tmp_path, vocab):
    text = BOOKS[1].read_text(encoding="utf-8")
    paragraphs = [p for p in text.split("\n\n") if p.strip()][:400]
    small = WordPieceTokenizer(vocab, True, cache_limit=3000)
    exchange = ChunkExchange(str(tmp_path), small)
    reader = WordPieceTokenizer(vocab, True, cache_limit=10**6)
    other = ChunkExchange(str(tmp_path), reader)
    generations, new_rows, last = set(), 0, (small.generation, 0)
    for paragraph in paragraphs:
        small.encode(paragraph)
        # What the table learned since the last share: everything it holds after a clear.
        new_rows += small.known_chunks() - (last[1] if last[0] == small.generation else 0)
        last = (small.generation, small.known_chunks())
        exchange.share()
        other.take_in()
        generations.add(small.generation)
    assert len(generations) > 1  # the small table was cleared on the way
    written = list(_whole_records((tmp_path / exchange.own_name).read_bytes()))
    assert sum(len(chunks) for (chunks, _, _), _ in written) == new_rows  # each row appended once
    # The reader holds every chunk the small table ever learned, each once, with the right ids.
    every_chunk = {c for p in paragraphs for c in p.lower().split()}
    assert reader.known_chunks() == len(every_chunk)
    fresh = WordPieceTokenizer(vocab, True)
    assert reader.encode(text[:30000]).tolist() == fresh.encode(text[:30000]).tolist()


def test_a_record_still_being_written_is_read_later(tmp_path, vocab):
    writer = WordPieceTokenizer(vocab, True)
    exchange = ChunkExchange(str(tmp_path), writer)
    writer.encode(SAMPLE_TEXT.read_text(encoding="utf-8"))
    exchange.share()
    path = tmp_path / exchange.own_name
    whole = path.read_bytes()
    path.write_bytes(whole[:-5])  # the end of the record not yet appended
    reader = WordPieceTokenizer(vocab, True)
    other = ChunkExchange(str(tmp_path), reader)
    assert other.take_in() == 0
    assert reader.known_chunks() == 0
    path.write_bytes(whole)
    assert other.take_in() == writer.known_chunks()
    assert _ids_by_chunk(reader) == _ids_by_chunk(writer)


def test_a_damaged_record_ends_the_reading_of_its_file(tmp_path, vocab):
    writer = WordPieceTokenizer(vocab, True)
    exchange = ChunkExchange(str(tmp_path), writer)
    writer.encode("The first record holds these words.")
    exchange.share()
    path = tmp_path / exchange.own_name
    first = path.read_bytes()
    writer.encode(SAMPLE_TEXT.read_text(encoding="utf-8"))
    exchange.share()
    damaged = bytearray(path.read_bytes())
    damaged[len(first) + 40] ^= 1  # one bit of the second record's text
    path.write_bytes(bytes(damaged))
    reader = WordPieceTokenizer(vocab, True)
    other = ChunkExchange(str(tmp_path), reader)
    assert other.take_in() == len("The first record holds these words.".split())
    writer.encode("Later words appended after the damage.")
    exchange.share()
    assert other.take_in() == 0  # nothing more is read from that file
    fresh = WordPieceTokenizer(vocab, True)
    text = SAMPLE_TEXT.read_text(encoding="utf-8")
    assert reader.encode(text).tolist() == fresh.encode(text).tolist()


def test_a_full_table_takes_nothing_in(tmp_path, vocab):
    big = WordPieceTokenizer(vocab, True)
    big.encode(BOOKS[0].read_text(encoding="utf-8")[:20000])
    ChunkExchange(str(tmp_path), big).share()
    tiny = WordPieceTokenizer(vocab, True, cache_limit=10)
    assert ChunkExchange(str(tmp_path), tiny).take_in() == 0
    assert tiny.known_chunks() == 0


def test_a_worker_takes_in_only_while_its_table_is_less_than_half_full(tmp_path, vocab):
    writer = WordPieceTokenizer(vocab, True)
    exchange = ChunkExchange(str(tmp_path), writer)
    writer.encode(SAMPLE_TEXT.read_text(encoding="utf-8"))
    exchange.share()
    first = writer.known_chunks()
    reader = WordPieceTokenizer(vocab, True, cache_limit=2 * first - 2)
    other = ChunkExchange(str(tmp_path), reader)
    assert other.take_in() == first
    writer.encode(BOOKS[0].read_text(encoding="utf-8")[:20000])
    exchange.share()
    assert writer.known_chunks() > first
    assert other.take_in() == 0  # past half of its limit: the room is left for its own learning
    assert reader.known_chunks() == first
