"""The two passes over a line too long to hold (src/bertcorpus/pipeline/inputs/long_lines.py), cut into parts of
every size: the UTF-8 decoding gives what decoding the line whole gives, the JSON scan finds what json.loads finds
(or refuses what it refuses), and the text read again is the string json.loads decodes, lone surrogates replaced."""

from __future__ import annotations

import json
import re

import pytest

from bertcorpus.pipeline.inputs import long_lines
from bertcorpus.pipeline.inputs.long_lines import (
    JsonLineScanner,
    JsonStringText,
    NotJson,
    Utf8Parts,
    characters,
    decode_line,
    stripped_extent,
)

from conftest import SAMPLE_TEXT

WORDS = SAMPLE_TEXT.read_text(encoding="utf-8")[:600]
# A real text with what a JSON string may hold: escapes of quotes, backslashes and control characters, non-ASCII
# letters, a character past the BMP (a surrogate pair when escaped), half a pair alone, and \\u written literally.
TEXT = WORDS + ' "quoted" back\\slash\ttab\nnew line café 😀 \ud800 alone \\u0041 literal ' + WORDS[:50]


def parts_of(data, size: int) -> list:
    return [data[i : i + size] for i in range(0, len(data), size)]


def scanned(line: bytes, size: int):
    """The scan of a JSONL line, its bytes in parts of `size`, and the line's text as pass 1 decodes it."""
    decoder, scanner, text = Utf8Parts(), JsonLineScanner(), []
    for part in parts_of(line, size):
        chunk = decoder.decode(part)
        text.append(chunk)
        scanner.feed(chunk)
    text.append(decoder.decode(b"", last=True))
    scanner.feed(text[-1])
    return scanner.finish(), "".join(text)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 13, 64, 4096])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_long_line_in_parts_of_any_size_is_read_as_json_loads_reads_it(monkeypatch, size, ensure_ascii):
    record = {
        "id": "doc \ud83d",
        "meta": {"a": [1, 2.5e3, {"b": "}]\\"}], "ok": True, "none": None},
        "text": TEXT,
        "language": "zh-Hans",
    }
    raw = (json.dumps(record, ensure_ascii=ensure_ascii) + " \u3000\n").encode("utf-8", "surrogatepass")
    # A raw surrogate is no UTF-8: U+FFFD, as for the line read whole, stripped of str.strip's whitespace.
    expected = json.loads(decode_line(raw)[0].strip())
    text = re.sub("[\ud800-\udfff]", "\ufffd", expected.pop("text"))
    for small in (long_lines.SMALL_VALUE, 64):  # the text held, or named by where it lies and read again
        monkeypatch.setattr(long_lines, "SMALL_VALUE", small)
        found, decoded = scanned(raw, size)
        assert found.has_text and found.members == expected
        if found.text_span is None:
            assert small > 64 and found.text == expected_text(raw)
            continue
        unescaper = JsonStringText()
        streamed = "".join(unescaper.text(characters(iter(parts_of(decoded, size)), *found.text_span)))
        assert streamed == text and unescaper.replaced == ensure_ascii  # the lone \ud800 escape


def expected_text(raw: bytes) -> str:
    return json.loads(decode_line(raw)[0].strip())["text"]


@pytest.mark.parametrize(
    "line",
    [
        '{"text": "a\x01b"}',  # a control character in a string
        '{"text": "\\x"}',
        '{"text": "\\u12G4"}',
        '{"a": 1,}',
        '{"a" 1}',
        '{"text": "x"} more',
        '{"a": [1, 2}',
        '{"a": "b',
        '{"a": tru}',
    ],
)
def test_a_line_json_loads_refuses_is_refused(line):
    with pytest.raises(ValueError):
        json.loads(line)
    for size in (1, 4, 1000):
        with pytest.raises(NotJson):
            scanned(line.encode(), size)


def test_members_nested_past_the_bound_and_lines_of_no_object_are_refused():
    line = '{"a": ' + "[" * (long_lines.MAX_DEPTH + 1) + "]" * (long_lines.MAX_DEPTH + 1) + ', "text": "x"}'
    with pytest.raises(NotJson, match="nested more than 256 deep"):
        scanned(line.encode(), 100)
    with pytest.raises(NotJson, match="not an object"):  # JSON, but no record (bad_jsonl_line read whole too)
        scanned(b'[{"text": "x"}]', 100)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 100])
def test_utf8_in_parts_decodes_as_the_line_whole(size):
    raw = "Café, 汉语 and 😀".encode() + b" bad \xff\xfe, cut \xe6\xb1 then \xf0\x9f\x98 end \xef\xbf\xbd ok\r\n"
    decoder = Utf8Parts()
    text = "".join(decoder.decode(part) for part in parts_of(raw, size)) + decoder.decode(b"", last=True)
    assert (text, decoder.replaced) == decode_line(raw)


@pytest.mark.parametrize("size", [1, 3, 10])
def test_the_stripped_extent_of_a_line_is_str_strip(size):
    for line in ["\u3000 \tword and more words \x85\r\n", "   \u2028\n", "x\n", "\n"]:
        start, stop = stripped_extent(iter(parts_of(line, size)))
        assert line[start:stop] == line.strip()
