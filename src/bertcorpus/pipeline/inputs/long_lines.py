"""Lines too long to hold: a line of more than LINE_LIMIT bytes (a JSONL document of a gigabyte, a text file with no
newline, a gigabyte of NUL bytes) is never held whole. It is read in two passes of bounded memory, which give the
documents that the line read whole would give:

    pass 1  its bytes go by LINE_LIMIT at a time, as the file is read: a text line is scanned for where its
            stripped text starts and ends, a JSONL line for its members (each one but its text held, if small)
    pass 2  the line is read again from a stream opened anew at its offset, and only then, the part that is text
            handed on a chunk at a time, to be cut into pieces as it comes (transforms/document_pieces.py)

Positions are counted in the characters of the decoded line (invalid UTF-8 as U+FFFD, as decode_line decodes the
line whole), so that both passes decode the same bytes the same way, whatever their parts.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field
from typing import BinaryIO

from bertcorpus.transforms.compression import MIB

LINE_LIMIT = 16 * MIB  # a line of at most this many bytes is held whole; a longer one is read in two passes
SMALL_VALUE = MIB  # a member of a long JSONL line other than its text is held up to this many characters
MAX_DEPTH = 256  # arrays and objects inside a member of a long JSONL line, one in another
_REPLACEMENT_BYTES = "\ufffd".encode()


def decode_line(raw: bytes) -> tuple[str, int]:
    """The line as text, invalid UTF-8 replaced by U+FFFD, and how many replacements that took."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        return text, text.count("\ufffd") - raw.count(_REPLACEMENT_BYTES)


class Utf8Parts:
    """The bytes of a line in parts → its text a chunk at a time, the chunks together being what decode_line gives
    of the bytes together: a character cut between two parts is decoded whole. `replaced` counts the U+FFFD."""

    def __init__(self):
        self._carry, self.replaced = b"", 0

    def decode(self, part: bytes, last: bool = False) -> str:
        data = self._carry + part
        cut = len(data) if last else _whole_characters(data)
        self._carry = data[cut:]
        text, replaced = decode_line(data[:cut])
        self.replaced += replaced
        return text


def _whole_characters(data: bytes) -> int:
    """The bytes of `data` up to where a UTF-8 character may end: all but a character begun at its end (a lead byte
    without all its continuation bytes), which the next part may finish. A decoder starts afresh at a lead byte,
    so decoding the parts cut there gives what decoding them together gives."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:
            needs = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) - back if back < needs else len(data)
    return len(data)


@dataclass
class LongLine:
    """A line of more than LINE_LIMIT bytes at byte `start` of the (decompressed) file: `parts` gives its bytes once,
    as the file is read, through its newline; `again()` gives them once more, from a stream that `reopen` opens at
    an offset. `ended` says whether its end was read (a compressed file's damage may cut it)."""

    start: int
    parts: Iterator[bytes]
    reopen: Callable[[int], ContextManager[BinaryIO]]
    size: int = 0
    ended: bool = False

    def pass_by(self) -> None:
        """Read what is left of its parts, for nothing: the line's end and size are known then."""
        for _ in self.parts:
            pass

    def again(self) -> Iterator[bytes]:
        with self.reopen(self.start) as stream:
            left = self.size
            while left:
                chunk = stream.read(min(left, MIB))
                if not chunk:
                    raise OSError(
                        f"the line at byte {self.start:,} ended early when it was read again: the file changed"
                    )
                left -= len(chunk)
                yield chunk


def file_lines(
    stream: BinaryIO, start: int, reopen: Callable[[int], ContextManager[BinaryIO]], cut: Callable[[], bool]
) -> Iterator[tuple[int, bytes | LongLine]]:
    """(offset, line) of each line of a stream at byte `start` of the (decompressed) file: a line of at most
    LINE_LIMIT bytes as its bytes, a longer one as a LongLine, whose parts are to be read before the next line
    is asked for (what is left of them is passed by then). A line that the damage of a compressed file cut short
    (`cut()` says so at its end) is part of the damage, not a line."""
    reader = stream if hasattr(stream, "peek") else io.BufferedReader(stream, MIB)
    at = start
    while part := reader.readline(LINE_LIMIT):
        if part.endswith(b"\n") or len(part) < LINE_LIMIT or not reader.peek(1):
            if not part.endswith(b"\n") and cut():
                return
            yield at, part
            at += len(part)
            continue
        line = LongLine(at, iter(()), reopen)
        line.parts = _long_parts(reader, part, line, cut)
        yield at, line
        line.pass_by()
        if not line.ended:
            return
        at += line.size


def _long_parts(reader: BinaryIO, part: bytes, line: LongLine, cut: Callable[[], bool]) -> Iterator[bytes]:
    """A long line's parts from its first one on, its size and its end noted in `line` as they go by."""
    while True:
        line.size += len(part)
        yield part
        if part.endswith(b"\n"):
            line.ended = True
            return
        part = reader.readline(LINE_LIMIT)
        if not part:  # the line ends with the file, unless damage cut it
            line.ended = not cut()
            return


def decoded(parts: Iterator[bytes], decoder: Utf8Parts | None = None, first_line: bool = False) -> Iterator[str]:
    """The text of a line's bytes, a chunk per part; the first line of a file without the byte-order mark some
    editors put first."""
    decoder = decoder or Utf8Parts()
    for part in parts:
        text = decoder.decode(part)
        if first_line and text:
            text, first_line = text.removeprefix("\ufeff"), False
        yield text
    yield decoder.decode(b"", last=True)


def characters(chunks: Iterator[str], start: int, stop: int) -> Iterator[str]:
    """Characters start..stop-1 of the text that the chunks make up."""
    at = 0
    for chunk in chunks:
        low, high = max(start - at, 0), min(stop - at, len(chunk))
        if low < high:
            yield chunk[low:high]
        at += len(chunk)
        if at >= stop:
            return


# ---------------------------------------------------------------------------------------------- text lines


def stripped_extent(chunks: Iterator[str]) -> tuple[int, int]:
    """(start, stop): where the line's text stripped of whitespace (str.strip's) begins and ends, in characters;
    (n, n) for a line of whitespace only."""
    at, start, stop = 0, None, 0
    for chunk in chunks:
        kept = chunk.rstrip()
        if kept:
            if start is None:
                start = at + len(chunk) - len(chunk.lstrip())
            stop = at + len(kept)
        at += len(chunk)
    return (at, at) if start is None else (start, stop)


# ---------------------------------------------------------------------------------------------- JSONL lines


class NotJson(ValueError):
    """A long JSONL line that is not one JSON object; the message says what is wrong, as a bad line's detail."""


@dataclass
class ScannedRecord:
    """What pass 1 found in a long JSONL line: its members but the text, decoded; the text's own value where it is
    small (`text`), else where its content lies between its quotes, in characters (`text_span`), for pass 2."""

    members: dict = field(default_factory=dict)
    text: object = None
    text_span: tuple[int, int] | None = None
    has_text: bool = False


_JSON_SPACE = " \t\n\r"
_STRING_STOP = re.compile(r'["\\\x00-\x1f]')
_ESCAPES = set('"\\/bfnrtu')
_HEX = set("0123456789abcdefABCDEF")


class JsonLineScanner:
    """Pass 1 over a long JSONL line: feed() its text a chunk at a time, then finish() for the record. Checks that
    the line is one JSON object (str.strip's whitespace around it) as json.loads would, holding no member longer
    than SMALL_VALUE characters except strings, which are checked as they go by; a "text" string longer than that
    is named by where it lies."""

    def __init__(self):
        self.record = ScannedRecord()
        self._at = 0  # characters fed so far
        self._state = "lead"
        self._key: str | None = None
        self._raw: list[str] = []  # the member being held (a key, a small value), as written
        self._held = 0
        self._string_start = 0
        self._escape = 0  # 0: none; 1: after a backslash; 2-5: that many hex digits of \\uXXXX still to come
        self._depth: list[str] = []  # the closing brackets a container value awaits
        self._in_string = False  # inside a string within a container value
        self._members = 0

    def feed(self, chunk: str) -> None:
        i, n = 0, len(chunk)
        while i < n:
            state = self._state
            if state == "lead":
                rest = chunk[i:].lstrip()
                if not rest:
                    break
                i = n - len(rest)
                if chunk[i] != "{":
                    raise NotJson(f"not an object: it starts with {chunk[i]!r}")
                self._state, i = "key_or_end", i + 1
            elif state in ("key_or_end", "key", "colon", "value", "after_value"):
                while i < n and chunk[i] in _JSON_SPACE:
                    i += 1
                if i == n:
                    break
                i = self._token(chunk, i)
            elif state in ("key_string", "value_string"):
                i = self._string(chunk, i)
            elif state == "container":
                i = self._container(chunk, i)
            elif state == "scalar":
                i = self._scalar(chunk, i)
            else:  # "trail": after the object, only whitespace
                if chunk[i:].strip():
                    raise NotJson("extra data after the object")
                break
        self._at += n

    def finish(self) -> ScannedRecord:
        if self._state != "trail":
            raise NotJson("the line ends inside the object")
        return self.record

    # -- tokens between members

    def _token(self, chunk: str, i: int) -> int:
        c, state = chunk[i], self._state
        if state in ("key_or_end", "key") and c == '"':
            self._begin_string("key_string", i)
            return i + 1
        if state == "key_or_end" and c == "}":
            self._state = "trail"
            return i + 1
        if state == "colon" and c == ":":
            self._state = "value"
            return i + 1
        if state == "after_value" and c in ",}":
            self._state = "key" if c == "," else "trail"
            return i + 1
        if state == "value":
            if c == '"':
                self._begin_string("value_string", i)
                return i + 1
            self._raw, self._held = [], 0
            if c in "[{":
                self._state, self._depth, self._in_string = "container", [], False
            else:
                self._state = "scalar"
            return i
        raise NotJson(f"{c!r} where {_EXPECTED[state]} should be")

    def _begin_string(self, state: str, i: int) -> None:
        self._state, self._raw, self._held, self._escape = state, [], 0, 0
        self._string_start = self._at + i + 1

    # -- strings: checked as json.loads checks them, held while small

    def _string(self, chunk: str, i: int) -> int:
        n = len(chunk)
        while i < n:
            if self._escape:
                i = self._escaped(chunk, i)
                continue
            found = _STRING_STOP.search(chunk, i)
            end = found.start() if found else n
            self._hold(chunk[i:end])
            if found is None:
                return n
            c = chunk[end]
            if c == '"':
                self._end_string(self._at + end)
                return end + 1
            if c == "\\":
                self._hold(c)
                self._escape, i = 1, end + 1
                continue
            raise NotJson(f"a control character ({ord(c):#04x}) in a string")
        return n

    def _escaped(self, chunk: str, i: int) -> int:
        c = chunk[i]
        if self._escape == 1:
            if c not in _ESCAPES:
                raise NotJson(f"an invalid escape \\{c}")
            self._escape = 5 if c == "u" else 0
        elif c in _HEX:
            self._escape = 0 if self._escape == 2 else self._escape - 1
        else:
            raise NotJson("an invalid \\u escape")
        self._hold(c)
        return i + 1

    def _hold(self, text: str) -> None:
        if self._held <= SMALL_VALUE:
            self._raw.append(text)
        self._held += len(text)

    def _end_string(self, end: int) -> None:
        raw, small = "".join(self._raw), self._held <= SMALL_VALUE
        if self._state == "key_string":
            if not small:
                raise NotJson(f"a key longer than {SMALL_VALUE:,} characters")
            self._key, self._state = json.loads(f'"{raw}"'), "colon"
            return
        value = json.loads(f'"{raw}"') if small else None
        if self._key == "text":
            self.record.has_text = True
            self.record.text, self.record.text_span = (value, None) if small else (None, (self._string_start, end))
        elif small:
            self.record.members[self._key] = value
        else:  # held by none; a member a reader asks for must be small, which finish's user checks
            self.record.members[self._key] = _TooLong(self._held)
        self._state = "after_value"

    # -- other values: held whole, within SMALL_VALUE, and read by json.loads

    def _container(self, chunk: str, i: int) -> int:
        start, n = i, len(chunk)
        while i < n:
            c = chunk[i]
            if self._in_string:
                if self._escape:
                    self._escape = 0
                elif c == "\\":
                    self._escape = 1
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "[{":
                self._depth.append("]" if c == "[" else "}")
                if len(self._depth) > MAX_DEPTH:
                    raise NotJson(f"arrays or objects nested more than {MAX_DEPTH} deep")
            elif c in "]}":
                if not self._depth or self._depth.pop() != c:
                    raise NotJson(f"{c!r} closes no array or object")
                if not self._depth:
                    self._hold_value(chunk[start : i + 1])
                    self._end_value()
                    return i + 1
            i += 1
        self._hold_value(chunk[start:n])
        return n

    def _scalar(self, chunk: str, i: int) -> int:
        end = i
        while end < len(chunk) and chunk[end] not in ",}" and chunk[end] not in _JSON_SPACE:
            end += 1
        self._hold_value(chunk[i:end])
        if end < len(chunk):
            self._end_value()
        return end

    def _hold_value(self, text: str) -> None:
        self._hold(text)
        if self._held > SMALL_VALUE:
            raise NotJson(f"a member other than a string longer than {SMALL_VALUE:,} characters")

    def _end_value(self) -> None:
        try:
            value = json.loads("".join(self._raw))
        except (ValueError, RecursionError) as e:
            raise NotJson(f"not JSON: {e}") from None
        if self._key == "text":
            self.record.has_text, self.record.text, self.record.text_span = True, value, None
        else:
            self.record.members[self._key] = value
        self._state = "after_value"


_EXPECTED = {
    "key_or_end": "a key or }",
    "key": "a key",
    "colon": ":",
    "value": "a value",
    "after_value": ", or }",
}


@dataclass(frozen=True)
class _TooLong:
    """A member of a long line held by no one: a string of `size` characters."""

    size: int


def too_long(value) -> bool:
    """Whether a scanned member is a string too long to have been held."""
    return isinstance(value, _TooLong)


_UNESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_OPEN_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")


class JsonStringText:
    """Pass 2 of a long JSONL line's text: the content of its string (checked in pass 1) a chunk at a time →
    the text it stands for, as json.loads decodes it: \\uD83D\\uDE00 one character, half a pair alone U+FFFD
    (counted in `replaced`, as the reader counts the lone surrogates of any line)."""

    def __init__(self):
        self._carry, self._high, self.replaced = "", "", 0

    def text(self, chunks: Iterator[str]) -> Iterator[str]:
        for chunk in chunks:
            data = self._carry + chunk
            if (opened := _OPEN_ESCAPE.search(data)) and not _escaped_backslash(data, opened.start()):
                data, self._carry = data[: opened.start()], data[opened.start() :]
            else:
                self._carry = ""
            yield self._paired(_ESCAPE.sub(_unescaped, data))
        yield self._paired("", last=True)

    def _paired(self, text: str, last: bool = False) -> str:
        """Surrogate escapes in pairs made characters, a high one at the end held for the next chunk."""
        text = self._high + text
        self._high = ""
        if text and not last and "\ud800" <= text[-1] <= "\udbff":
            text, self._high = text[:-1], text[-1]
        if not re.search("[\ud800-\udfff]", text):
            return text
        text = re.sub("[\ud800-\udbff][\udc00-\udfff]", _pair, text)
        text, lone = re.subn("[\ud800-\udfff]", "\ufffd", text)
        self.replaced += lone
        return text


def _escaped_backslash(data: str, at: int) -> bool:
    """Whether the backslash at `at` is itself escaped: after an odd run of backslashes."""
    run = len(data[:at]) - len(data[:at].rstrip("\\"))
    return run % 2 == 1


def _unescaped(found: re.Match) -> str:
    code = found.group(1)
    return chr(int(code[1:], 16)) if len(code) == 5 else _UNESCAPED[code]


def _pair(found: re.Match) -> str:
    high, low = (ord(c) for c in found.group())
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def json_text(line: LongLine, span: tuple[int, int], decoder: JsonStringText) -> Iterator[str]:
    """Pass 2: the text of a long JSONL line's "text" member, read again, a chunk at a time."""
    return decoder.text(characters(decoded(line.again(), first_line=line.start == 0), *span))


def text_of_line(line: LongLine, extent: tuple[int, int]) -> Iterator[str]:
    """Pass 2: a long text line's stripped text, read again, a chunk at a time."""
    return characters(decoded(line.again()), *extent)
