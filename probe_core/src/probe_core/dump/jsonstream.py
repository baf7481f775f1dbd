"""Stream the members of a big JSON object without loading the whole file.

dump.json is ``{"task": ..., ..., "data": {name: entry, ...}}`` and can hold
hundreds of thousands of entries. :func:`iter_object` walks the top-level
object and yields the members of one nested object (``data``) one at a time,
each decoded (by msgspec where it is exact, see :mod:`probe_core.fastjson`, else by the C scanner of
:mod:`json`) and tagged with its byte span in the file, so a reader can come back to an entry later with
:func:`read_span` instead of keeping it in memory. Memory stays bounded by
the read chunk plus the largest single entry.

``NaN``, ``Infinity`` and ``-Infinity`` (what Python's json writes) are
accepted. A malformed or truncated file raises :class:`JsonStreamError`
with the 1-based line and column and the byte offset.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from probe_core.fastjson import MISS, decode, try_decode

try:
    from probe_core.dump import _scan
except ImportError:  # built without a C compiler
    _scan = None

CHUNK = 1 << 22  # 4 MiB per read
FIRST_CHUNK = 1 << 16  # the first read: the header and first entries are often all a reader wants
MAX_DEPTH = 200  # deepest nesting the small-file readers accept (probe and msprobe files nest < 20)
_WHITESPACE = " \t\n\r"
_decoder = json.JSONDecoder()
_KEY = re.compile(r'([ \t\n\r]*)"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')  # a key without escapes, and ':'
_SEPARATOR = re.compile(r"[ \t\n\r]*([,}])")


class JsonStreamError(ValueError):
    """The file is not valid JSON from ``line``/``column`` on (``offset`` in bytes)."""

    def __init__(self, message: str, line: int, column: int, offset: int, truncated: bool) -> None:
        self.reason, self.line, self.column, self.offset, self.truncated = message, line, column, offset, truncated
        where = f"line {line}, column {column}" if column > 0 else f"line {line}"
        super().__init__(f"{message}: {where} (byte {offset})")


class Member(NamedTuple):
    """One member of the nested object: its key, decoded value and byte span ``[start, end)``."""

    key: str
    value: Any
    start: int
    end: int
    flat: tuple[Any, tuple] | None = None  # with ``known`` (see iter_object): (known[skeleton] or skeleton, stats)


class _Cursor:
    """A window of decoded text over a binary file, with byte offsets for any position."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.base = 0  # byte offset of text[0]
        self.eof = False
        self.ascii = True
        self._mark = (0, 0)
        self.read = 0  # bytes read from the file so far
        self.bad: JsonStreamError | None = None  # invalid UTF-8 met: raised where the valid text ends
        self._size = min(FIRST_CHUNK, CHUNK)  # bytes the next read asks for

    def fill(self) -> bool:
        """Read one more chunk (dropping consumed text); False at end of file."""
        if self.eof:
            return False
        self.base += self.pos if self.ascii else len(self.text[:self.pos].encode("utf-8"))
        raw = self.handle.read(self._size)
        self._size = CHUNK
        self.eof = not raw
        pending = len(self.decoder.getstate()[0])
        try:
            decoded = self.decoder.decode(raw, final=self.eof)
        except UnicodeDecodeError as exc:  # keep the valid text before the bad byte; fail where it ends
            decoded = exc.object[:exc.start].decode("utf-8")
            offset = self.read - pending + exc.start
            self.eof = True
            self.bad = self._bad_utf8(exc, offset, self.text[self.pos:] + decoded)
        self.read += len(raw)
        self.text = self.text[self.pos:] + decoded
        self.pos = 0
        self.ascii = self.text.isascii()
        self._mark = (0, self.base)
        return not self.eof or bool(decoded)

    def _lines_before(self) -> tuple[int, int]:
        """(newlines before text[0], byte offset of the line text[0] is on), read back from the file: only an
        error needs them, so reading does not count lines as it goes."""
        at = self.handle.tell()
        self.handle.seek(0)
        before = self.handle.read(self.base)
        self.handle.seek(at)
        return before.count(b"\n"), before.rfind(b"\n") + 1

    def _bad_utf8(self, exc: UnicodeDecodeError, offset: int, before: str) -> JsonStreamError:
        line = self._lines_before()[0] + before.count("\n") + 1
        column = len(before) - before.rfind("\n") if "\n" in before else 0  # 0: not known
        if exc.reason == "unexpected end of data":
            return JsonStreamError("the file ends inside a multi-byte UTF-8 character", line, column, offset, True)
        byte = exc.object[exc.start]
        return JsonStreamError(f"invalid UTF-8 byte 0x{byte:02x} (dump files must be UTF-8)", line, column,
                               offset, False)

    def byte_at(self, pos: int) -> int:
        """Byte offset in the file of text position ``pos`` (cheap for positions moving forward)."""
        if self.ascii:
            return self.base + pos
        mark_pos, mark_byte = self._mark if self._mark[0] <= pos else (0, self.base)
        byte = mark_byte + len(self.text[mark_pos:pos].encode("utf-8"))
        self._mark = (pos, byte)
        return byte

    def error(self, message: str, pos: int | None = None, truncated: bool = False) -> JsonStreamError:
        pos = self.pos if pos is None else pos
        if self.bad is not None and (truncated or pos >= len(self.text)):
            return self.bad  # the text ran out where the invalid bytes begin
        lines, line_start = self._lines_before()
        line = lines + self.text.count("\n", 0, pos) + 1
        newline = self.text.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self.byte_at(pos) - line_start + 1  # the line began earlier
        return JsonStreamError(message, line, column, self.byte_at(pos), truncated or (self.eof and pos >= len(self.text)))

    def peek(self) -> str:
        """The next non-blank character ('' at end of file), without consuming it."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if not self.fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        char = self.peek()
        if not char:
            raise self.error(f"file ends early, expected {what}", truncated=True)
        if char not in chars:
            raise self.error(f"expected {what}, found {char!r}")
        self.pos += 1
        return char

    def value(self) -> Any:
        """Decode the JSON value at the cursor, reading more of the file as needed."""
        if not self.peek():
            raise self.error("file ends early, expected a value", truncated=True)
        while True:
            try:
                value, end = _decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                near_end = exc.pos >= len(self.text) - 16 or exc.msg.startswith("Unterminated")  # a token cut by the chunk
                start = self.pos
                if near_end and self.fill():
                    continue
                # fill() moves the window to start at the value even at the end of the file
                raise self.error(exc.msg, exc.pos - start + self.pos, truncated=near_end and self.eof) from None
            except RecursionError:
                raise self.error(f"a value nested deeper than Python can decode (over "
                                 f"{sys.getrecursionlimit()} levels of [ and {{)") from None
            except ValueError as exc:  # e.g. an integer literal longer than Python converts (4300 digits)
                raise self.error(_value_error(exc)) from None
            if end >= len(self.text) and not self.eof and self.fill():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value

    def key(self) -> str:
        if self.peek() != '"':
            if not self.peek():
                raise self.error("file ends early, expected a key", truncated=True)
            raise self.error(f"expected a quoted key, found {self.peek()!r}")
        return self.value()


def iter_object(path: str | Path, nested: str = "data", header: dict[str, Any] | None = None,
                known: dict[bytes, Any] | None = None) -> Iterator[Member]:
    """Yield the members of ``top[nested]`` in file order.

    Other top-level members are stored into ``header`` (when given) as they
    are met: members before ``nested`` are there by the first yield, members
    after it once the generator is exhausted. Raises :class:`JsonStreamError`
    on malformed input (after yielding every member read before the fault).

    With ``known`` (a dict, and the scanner :mod:`probe_core.dump._scan` built), a *flat* member (a statistics
    entry of tensor records and number arguments, see ``_scan.c``) is read without building its value: its
    statistics in file order, and its *skeleton* (its text without them) looked up in ``known``. Such a
    member comes as ``flat=(known[skeleton], stats)`` with ``value=None``, or, the first time a skeleton is
    met, as ``flat=(skeleton, stats)`` with its value decoded, for the caller to remember in ``known``.
    """
    header = {} if header is None else header
    with open(path, "rb") as handle:
        cur = _Cursor(handle)
        if not cur.peek():
            raise cur.error("file is empty", truncated=True)
        cur.expect("{", "'{' opening the top-level object")
        if cur.peek() == "}":
            cur.pos += 1
        else:
            while True:
                key = cur.key()
                cur.expect(":", "':' after a key")
                if key == nested and cur.peek() == "{":
                    yield from _members(cur, known if scanning() else None)
                else:
                    header[key] = cur.value()
                if cur.expect(",}", "',' or '}' after a top-level member") == "}":
                    break
        if cur.peek():
            raise cur.error(f"unexpected {cur.peek()!r} after the end of the top-level object")


def scanning() -> bool:
    """Whether flat members are read by the scanner (built, and not switched off by ``PROBE_SCAN=0``)."""
    return _scan is not None and os.environ.get("PROBE_SCAN", "1") != "0"


def _members(cur: _Cursor, known: dict[bytes, Any] | None) -> Iterator[Member]:
    cur.expect("{", "'{'")
    if cur.peek() == "}":
        cur.pos += 1
        return
    ends: _MemberEnds | None = None  # found from the first key on its own line
    while True:
        if known is not None and cur.ascii:
            members, pos, state = _scan.scan(cur.text, cur.pos, cur.base, known, Member)
            if not members and state == _scan.CUT and cur.fill():
                continue
            if members and members[0].flat[0].__class__ is bytes:  # a skeleton met for the first time: decode it
                key, _, start, end, flat = members[0]
                value = _decoded(cur.text[start - cur.base:end - cur.base])
                members = [] if value is MISS else [Member(key, value, start, end, flat)]
            if members:
                cur.pos = pos
                yield from members
                if state == _scan.CLOSED:
                    return
                continue
        found = _KEY.match(cur.text, cur.pos)  # the common case in one regex call: a plain key within the window
        if found is not None and found.end() < len(cur.text):
            key, cur.pos = found.group(2), found.end()
            if ends is None and "\n" in found.group(1):
                ends = _MemberEnds(found.group(1))
        else:  # an escaped key, or one the window cuts: token by token, reading on
            key = cur.key()
            cur.expect(":", "':' after a key")
            cur.peek()
        start = cur.byte_at(cur.pos)
        value = ends.value(cur) if ends is not None else MISS
        if value is MISS:
            value = cur.value()
        yield Member(key, value, start, cur.byte_at(cur.pos))
        found = _SEPARATOR.match(cur.text, cur.pos)
        if found is not None:
            cur.pos = found.end()
            separator = found.group(1)
        else:
            separator = cur.expect(",}", "',' or '}' after an entry")
        if separator == "}":
            return


def _decoded(text: str) -> Any:
    """The value of a member's text, :data:`MISS` when it is not valid JSON (the token path then says why)."""
    value = try_decode(text)
    if value is MISS:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return MISS
    return value


class _MemberEnds:
    """Fast decoding of the members of an indented object (``json.dump(indent=...)``: every member's key on
    a line of its own at one indent). A member's value is the text up to the ',' before the next such line
    (JSON strings hold no raw newline), decoded by :func:`~probe_core.fastjson.try_decode`; a value the window
    cuts reads one more chunk first. When that does not apply (the last member, another layout, a value
    msgspec leaves to :mod:`json`, a value longer than a chunk), the caller decodes token by token."""

    def __init__(self, indent: str) -> None:
        self.key_line = indent[indent.rfind("\n"):] + '"'  # a newline, the members' indent and the key's quote
        self.text: str | None = None  # the window of the last miss ...
        self.ahead = -1  # ... and the key line it found there: no try before it (a try costs the text up to it)

    def value(self, cur: _Cursor) -> Any:
        """The value at the cursor (the cursor moved past it), or :data:`MISS` (the cursor unmoved)."""
        text, pos = cur.text, cur.pos
        if text is self.text and pos < self.ahead:
            return MISS
        end = text.find(self.key_line, pos)
        if end < 0 and not cur.eof:
            # the window cuts the value: read one more chunk rather than fall back to json, whose error for the
            # cut token counts the lines of the whole window
            cur.fill()
            text, pos = cur.text, cur.pos
            end = text.find(self.key_line, pos)
        if end >= 0:
            segment = text[pos:end].rstrip(_WHITESPACE)
            if segment.endswith(","):
                segment = segment[:-1].rstrip(_WHITESPACE)
                value = try_decode(segment)  # a whole value, or MISS: no JSON value ends before a ',' inside it
                if value is not MISS:
                    cur.pos = pos + len(segment)
                    return value
        self.text, self.ahead = text, end if end >= 0 else len(text)
        return MISS


def read_span(handle, start: int, end: int) -> Any:
    """Decode the JSON value stored at bytes ``[start, end)`` of an open binary file."""
    handle.seek(start)
    return loads(handle.read(end - start), max_depth=None)  # leaves_of bounds the depth it walks


def loads(text: str | bytes, max_depth: int | None = MAX_DEPTH) -> Any:
    """``json.loads`` that turns every failure into :class:`ValueError` (never RecursionError or
    UnicodeDecodeError) and refuses values nested deeper than ``max_depth``."""
    try:
        value = decode(text)
    except RecursionError:
        raise ValueError(f"nested deeper than Python can decode (over {sys.getrecursionlimit()} levels)") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"invalid UTF-8 byte at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno}, column {exc.colno} (char {exc.pos})") from None
    except ValueError as exc:
        raise ValueError(_value_error(exc)) from None
    if max_depth is not None:
        check_depth(value, max_depth)
    return value


def _value_error(exc: ValueError) -> str:
    if "digits" in str(exc):
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        return f"an integer literal longer than {limit} digits (no dump value has one)"
    return f"a value cannot be decoded ({exc})"


def check_depth(value: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`ValueError` when ``value`` nests lists/objects deeper than ``max_depth`` (iterative)."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth >= max_depth:
            raise ValueError(f"nested deeper than {max_depth} levels")
        below = depth + 1
        stack += [(child, below) for child in children if isinstance(child, (dict, list))]
