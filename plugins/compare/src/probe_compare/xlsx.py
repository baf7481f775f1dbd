"""A small streaming XLSX writer for big result tables (header frozen, whole rows filled).

openpyxl needs ~20 µs per cell, minutes for a 100,000-entry compare; this
writer streams the sheet XML straight into the zip (inline strings, two
fills), about ten times faster. The files open in Excel, LibreOffice and
openpyxl. NaN and infinities (not allowed as XLSX numbers) are written as
text; control characters are dropped from strings.
"""

from __future__ import annotations

import math
import re
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from probe_core.api import CompareError

MAX_ROWS = 1_048_576
_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_ILLEGAL_SHEET = re.compile(r"[\[\]:*?/\\]")  # characters a sheet name may not hold
_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/styles.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'
    '{sheets}</Types>')
_SHEET_TYPE = ('<Override PartName="/xl/worksheets/sheet{n}.xml" '
               'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>')
_ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="xl/workbook.xml"/></Relationships>')
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets>{sheets}</sheets></workbook>')
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}'
    '<Relationship Id="rIdStyles" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'styles" Target="styles.xml"/></Relationships>')
_STYLES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    '<fonts count="2"><font><sz val="11"/><name val="Calibri"/></font>'
    '<font><b/><sz val="11"/><name val="Calibri"/></font></fonts>'
    '<fills count="{nfills}"><fill><patternFill patternType="none"/></fill>'
    '<fill><patternFill patternType="gray125"/></fill>{fills}</fills>'
    '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
    '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
    '<cellXfs count="{nxfs}"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
    '<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1"/>{xfs}</cellXfs>'
    '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
    '</styleSheet>')
_SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    '<sheetViews><sheetView workbookViewId="0"><pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" '
    'state="frozen"/></sheetView></sheetViews><sheetData>')
_SHEET_TAIL = "</sheetData></worksheet>"


def escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as XML entities (what xml.sax.saxutils.escape does, without importing urllib)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def column_letter(index: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _text(value: str) -> str:
    value = escape(_ILLEGAL.sub("", value))
    return f'<is><t xml:space="preserve">{value}</t></is>'


class StreamingXlsx:
    """Write rows to ``path`` sheet by sheet; ``fills`` maps a row tag to an RGB colour (``"FFC7CE"``).

    The file is created new (:func:`probe_core.outputs.create_exclusive`): when ``path`` is taken (another
    run's result), the book goes to ``{stem}_1.xlsx``, ...; :attr:`path` is the file written."""

    def __init__(self, path: Path, header: Sequence[str], fills: dict[str, str], sheet_name: str = "compare_result",
                 max_rows: int = MAX_ROWS) -> None:
        from probe_core.api import create_exclusive

        path = Path(path)
        self.header, self.sheet_name, self.max_rows = list(header), sheet_name, max_rows
        self.styles = {tag: i + 2 for i, tag in enumerate(fills)}  # xf 0 plain, 1 bold header
        self.fills = list(fills.values())
        self.letters = [column_letter(i) for i in range(len(self.header))]
        self.path, self._file = create_exclusive(path.parent, path.name, "wb")
        self.zip = zipfile.ZipFile(self._file, "w", zipfile.ZIP_DEFLATED, compresslevel=1)
        self.sheets = 0
        self.names: list[str] = []
        self._stream = None
        self._row = 0
        self._new_sheet()

    def start_sheet(self, name: str) -> None:
        """Go on in a new sheet called ``name`` (the header row is repeated)."""
        self._new_sheet(name)

    def _new_sheet(self, name: str | None = None) -> None:
        if self._stream is not None:
            self._stream.write(_SHEET_TAIL.encode())
            self._stream.close()
        self.sheets += 1
        self.names.append(name or (self.sheet_name if self.sheets == 1 else f"{self.sheet_name}{self.sheets}"))
        self._stream = self.zip.open(f"xl/worksheets/sheet{self.sheets}.xml", "w", force_zip64=True)
        self._stream.write(_SHEET_HEAD.encode())
        self._row = 0
        self._write(self.header, 1)

    def _write(self, values: Sequence[Any], style: int) -> None:
        self._row += 1
        r = self._row
        s = f' s="{style}"' if style else ""
        parts = [f'<row r="{r}">']
        for letter, value in zip(self.letters, values):
            if value is None:
                continue
            kind = type(value)
            if kind is bool:
                parts.append(f'<c r="{letter}{r}"{s} t="b"><v>{int(value)}</v></c>')
            elif (kind is int or kind is float) and (kind is int or math.isfinite(value)):
                parts.append(f'<c r="{letter}{r}"{s}><v>{value!r}</v></c>')
            else:
                parts.append(f'<c r="{letter}{r}"{s} t="inlineStr">{_text(str(value))}</c>')
        parts.append("</row>")
        self._stream.write("".join(parts).encode("utf-8"))

    def write(self, values: Sequence[Any], tag: str | None = None) -> None:
        """Append one row; ``tag`` (e.g. ``"error"``) picks its fill."""
        if self._row >= self.max_rows:
            self._new_sheet()
        self._write(values, self.styles.get(tag, 0))

    def close(self) -> None:
        self._stream.write(_SHEET_TAIL.encode())
        self._stream.close()
        names = [_ILLEGAL_SHEET.sub("_", name)[:31] for name in self.names]
        self.zip.writestr("[Content_Types].xml", _CONTENT_TYPES.format(
            sheets="".join(_SHEET_TYPE.format(n=n) for n in range(1, self.sheets + 1))))
        self.zip.writestr("_rels/.rels", _ROOT_RELS)
        self.zip.writestr("xl/workbook.xml", _WORKBOOK.format(sheets="".join(
            f'<sheet name="{escape(name)}" sheetId="{n}" r:id="rId{n}"/>' for n, name in enumerate(names, 1))))
        self.zip.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS.format(rels="".join(
            f'<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            f'worksheet" Target="worksheets/sheet{n}.xml"/>' for n in range(1, self.sheets + 1))))
        fills = "".join(f'<fill><patternFill patternType="solid"><fgColor rgb="FF{rgb}"/><bgColor indexed="64"/>'
                        f"</patternFill></fill>" for rgb in self.fills)
        xfs = "".join(f'<xf numFmtId="0" fontId="0" fillId="{i + 2}" borderId="0" xfId="0" applyFill="1"/>'
                      for i in range(len(self.fills)))
        self.zip.writestr("xl/styles.xml", _STYLES.format(nfills=2 + len(self.fills), fills=fills,
                                                          nxfs=2 + len(self.fills), xfs=xfs))
        self.zip.close()
        self._file.close()


#: the last column an XLSX sheet may have (XFD): a cell reference beyond it is no spreadsheet's
MAX_COLUMNS = 16384
#: what ``read_first_sheet`` refuses instead of reading: a damaged or hostile file
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError)


class _RootElement(Exception):
    """The XML's root element starts: nothing before it declared a DOCTYPE."""


def _refuse_doctype(data: bytes, where: str) -> None:
    """Refuse XML that declares a DOCTYPE (hence entities: a billion-laughs bomb, an external file); a
    spreadsheet's parts never do. Reads only up to the root element's start tag."""
    from xml.parsers import expat

    def doctype(*_: Any) -> None:
        raise CompareError(f"{where}: declares a DOCTYPE/ENTITY, which no spreadsheet holds (an XML entity bomb "
                           "or an external file); refused: give the file probe compare or msprobe wrote")

    def root(*_: Any) -> None:
        raise _RootElement

    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = doctype
    parser.StartElementHandler = root
    try:
        parser.Parse(data, True)
    except _RootElement:
        return
    except expat.ExpatError as exc:
        raise CompareError(f"{where}: not well-formed XML ({exc}); the file is damaged: give the file probe "
                           "compare or msprobe wrote") from None


def _xml(book: zipfile.ZipFile, member: str, path: Path) -> Any:
    """The parsed XML of ``member`` of the XLSX ``path``, refused when it declares a DOCTYPE."""
    import xml.etree.ElementTree as ET

    where = f"{path}: {member}"
    data = book.read(member)
    _refuse_doctype(data, where)
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise CompareError(f"{where}: not well-formed XML ({exc}); the file is damaged: give the file probe "
                           "compare or msprobe wrote") from None


def _cell_value(cell: Any, shared: list[str]) -> Any:
    kind = cell.get("t")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(f"{_MAIN}t"))
    value = cell.find(f"{_MAIN}v")
    if value is None or value.text is None:
        return None
    if kind == "s":
        return shared[int(value.text)]
    if kind == "b":
        return value.text == "1"
    if kind in ("str", "e"):
        return value.text
    number = float(value.text)
    return int(number) if number.is_integer() and "." not in value.text and "E" not in value.text.upper() else number


def _column_index(ref: str) -> int:
    index = 0
    for char in ref:
        if not ("A" <= char.upper() <= "Z"):
            break
        index = index * 26 + ord(char.upper()) - 64
        if index > MAX_COLUMNS:
            break
    return index - 1


def read_first_sheet(path: Path) -> list[list[Any]]:
    """The rows of an XLSX file's first sheet (ours or one pandas/openpyxl wrote), cells as str/int/float/None.

    A file that is no XLSX, damaged XML, XML declaring a DOCTYPE (entities) and cells that are not what
    their type says are one :class:`~probe_core.errors.CompareError` line naming the file and the cell."""
    try:
        with zipfile.ZipFile(path) as book:
            names = set(book.namelist())
            shared = []
            if "xl/sharedStrings.xml" in names:
                root = _xml(book, "xl/sharedStrings.xml", path)
                shared = ["".join(t.text or "" for t in item.iter(f"{_MAIN}t")) for item in root.iter(f"{_MAIN}si")]
            sheets = sorted(n for n in names if n.startswith("xl/worksheets/sheet") and n.endswith(".xml"))
            if not sheets:
                raise CompareError(f"{path}: holds no worksheet (xl/worksheets/sheet1.xml); give the .xlsx probe "
                                   "compare or msprobe wrote, or its .csv")
            sheet = "xl/worksheets/sheet1.xml" if "xl/worksheets/sheet1.xml" in names else sheets[0]
            root = _xml(book, sheet, path)
    except _UNREADABLE as exc:
        raise CompareError(f"{path}: cannot be read as an XLSX (zip) file ({exc}); give the .xlsx probe compare "
                           "or msprobe wrote, or its .csv") from None
    rows: list[list[Any]] = []
    width = MAX_COLUMNS  # the header row's, once read: cells right of it are left out
    for row in root.iter(f"{_MAIN}row"):
        values: list[Any] = []
        for cell in row.iter(f"{_MAIN}c"):
            ref = cell.get("r")
            at = _column_index(ref) if ref else len(values)
            if not 0 <= at < MAX_COLUMNS:
                raise CompareError(f"{path}: {sheet}: cell {ref!r} is no column A..XFD; the file is damaged: give "
                                   "the file probe compare or msprobe wrote")
            if at >= width:
                continue
            values.extend([None] * (at - len(values)))
            try:
                values.append(_cell_value(cell, shared))
            except (ValueError, IndexError, OverflowError):
                raise CompareError(f"{path}: {sheet}: cell {ref or len(values)!r} holds {_raw(cell)!r}, which is "
                                   f"not a {cell.get('t') or 'number'}; the file is damaged: give the file probe "
                                   "compare or msprobe wrote") from None
        if not rows:
            width = len(values)
        rows.append(values)
    return rows


def _raw(cell: Any) -> str:
    """A cell's stored value as written (cut to 40 characters), for an error message."""
    value = cell.find(f"{_MAIN}v")
    return "" if value is None or value.text is None else value.text[:40]
