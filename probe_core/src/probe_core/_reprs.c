/* repr() of many numbers at once, from msgspec's JSON text of them; and CSV rows joined from columns of cells
 * (join_rows, at the end).
 *
 * reprs(encoded, values[, suffix[, zero]]) -> list of str
 *   values:  a list of floats and ints (no bools);
 *   encoded: msgspec.json.encode(values), the JSON array of their shortest round-trip texts;
 *   suffix:  ASCII text written after each (a percent sign);
 *   zero:    ASCII text written instead for a value equal to zero (either sign), when given.
 *
 * msgspec writes the digits repr() writes (both the shortest that read back as the same double, the
 * closest of them to it), in its own notation: 0.00001 where repr writes 1e-05, 1e16 for 1e+16, null for
 * NaN and the infinities. A token already in repr's notation (most: positional, as_is_token) is copied;
 * any other is read as (sign, digits, decimal exponent) and written again in repr's: positional from 1e-4 up
 * to 1e16, else d.ddde+XX with at least two exponent digits; a null is repr() of its value; an integer token
 * (no '.', no exponent) is the int's repr already. Raises ValueError when the text does not hold len(values)
 * numbers (the caller then calls repr() itself).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A number token as read: its sign, significant digits (trailing zeros dropped) and where the decimal point
 * goes (the value is 0.d1d2... times 10^point); kind 'i' for an integer token, 'f' for a float, 'n' for null. */
typedef struct {
    char kind;
    int negative, count, point;
    char digits[32];
    const char *as_is;  /* a float token that is repr's text already (its `length` characters), else NULL */
    Py_ssize_t length;
} Token;

/* A float token msgspec wrote as repr writes it, read at text[p:) (returns where it ends; -1 for any other):
 * [-]d.ddd positional with at most 16 integer digits (repr's notation from 1e-4 up to 1e16), not 0.0000ddd
 * (repr's 1e-05), no trailing zero past the point (but "0" alone), no leading zero before it. Most statistics
 * are such tokens: their text is copied, not read digit by digit and written again. */
static Py_ssize_t as_is_token(const char *text, Py_ssize_t p, Py_ssize_t limit, Token *t) {
    Py_ssize_t start = p, whole, point;
    t->negative = p < limit && text[p] == '-';
    p += t->negative;
    whole = p;
    while (p < limit && (unsigned char)(text[p] - '0') < 10)
        p++;
    if (p == whole || p - whole > 16 || p >= limit || text[p] != '.' || (p - whole > 1 && text[whole] == '0'))
        return -1;
    point = p++;
    while (p < limit && (unsigned char)(text[p] - '0') < 10)
        p++;
    if (p == point + 1 || p - start > 40 || (p < limit && (text[p] == 'e' || text[p] == 'E')))
        return -1;
    int zero_whole = point - whole == 1 && text[whole] == '0';
    if (text[p - 1] == '0' && p - point != 2)
        return -1;  /* 1.50: not repr's */
    if (zero_whole) {  /* 0.ddd: positional from 0.0001 */
        Py_ssize_t first = point + 1;
        while (first < p && text[first] == '0')
            first++;
        if (first == p && p - point != 2)
            return -1;  /* 0.00 */
        if (first - point > 4 && first < p)
            return -1;  /* 0.0000d: repr's d e-05 */
        t->count = first < p;
    } else {
        t->count = 1;
    }
    t->kind = 'f';
    t->as_is = text + start;
    t->length = p - start;
    return p;
}

/* Reads the token at text[p:) up to the next ',' or ']' (at limit); returns where it ends, -1 when it is
 * not a number msgspec writes. */
static Py_ssize_t read_token(const char *text, Py_ssize_t p, Py_ssize_t limit, Token *t) {
    Py_ssize_t end = as_is_token(text, p, limit, t);
    if (end >= 0)
        return end;
    t->as_is = NULL;
    if (limit - p >= 4 && memcmp(text + p, "null", 4) == 0) {
        t->kind = 'n';
        return p + 4;
    }
    t->kind = 'i';
    t->negative = p < limit && text[p] == '-';
    p += t->negative;
    int count = 0, before = 0, zeros = 0, after_point = 0, any = 0;
    for (; p < limit; p++) {
        char ch = text[p];
        if (ch >= '0' && ch <= '9') {
            any = 1;
            if (count == 0 && ch == '0') {
                zeros += after_point;  /* 0.000123: the zeros between the point and the first digit */
                continue;
            }
            if (count == (int)sizeof t->digits)
                return -1;
            t->digits[count++] = ch;
            before += !after_point;
        } else if (ch == '.' && !after_point) {
            after_point = 1;
            t->kind = 'f';
        } else {
            break;
        }
    }
    if (!any)
        return -1;
    int exp10 = 0;
    if (p < limit && (text[p] == 'e' || text[p] == 'E')) {
        t->kind = 'f';
        p++;
        int minus = p < limit && text[p] == '-';
        p += p < limit && (text[p] == '-' || text[p] == '+');
        int digits = 0;
        for (; p < limit && text[p] >= '0' && text[p] <= '9' && digits < 6; p++, digits++)
            exp10 = 10 * exp10 + (text[p] - '0');
        if (!digits)
            return -1;
        exp10 = minus ? -exp10 : exp10;
    }
    while (count > 0 && t->digits[count - 1] == '0')
        count--;
    t->count = count;
    t->point = (before > 0 ? before : -zeros) + exp10;
    return p;
}

/* repr's text of a float token into out (64 bytes); returns its length. repr writes positional notation
 * from 1e-4 up to 1e16 (``0.0001``, ``123.5``, ``100.0``) and d.ddde+XX outside it (``1e-05``, ``1.5e+16``). */
static Py_ssize_t float_repr(const Token *t, char *out) {
    Py_ssize_t o = 0;
    int count = t->count, point = t->point;
    const char *digits = t->digits;
    if (t->as_is != NULL) {
        memcpy(out, t->as_is, t->length);
        return t->length;
    }
    if (t->negative)
        out[o++] = '-';
    if (count == 0) {  /* a zero, signed as written */
        memcpy(out + o, "0.0", 3);
        return o + 3;
    }
    if (point <= -4 || point > 16) {
        out[o++] = digits[0];
        if (count > 1) {
            out[o++] = '.';
            for (int k = 1; k < count; k++)
                out[o++] = digits[k];
        }
        int e = point - 1;
        out[o++] = 'e';
        out[o++] = e < 0 ? '-' : '+';
        e = e < 0 ? -e : e;
        if (e >= 100)
            out[o++] = (char)('0' + e / 100);
        out[o++] = (char)('0' + e / 10 % 10);
        out[o++] = (char)('0' + e % 10);
    } else if (point <= 0) {  /* 0.000ddd */
        out[o++] = '0';
        out[o++] = '.';
        for (int k = point; k < 0; k++)
            out[o++] = '0';
        for (int k = 0; k < count; k++)
            out[o++] = digits[k];
    } else {  /* ddd.ddd, or ddd00.0 */
        for (int k = 0; k < point; k++)
            out[o++] = k < count ? digits[k] : '0';
        out[o++] = '.';
        if (count <= point)
            out[o++] = '0';
        for (int k = point; k < count; k++)
            out[o++] = digits[k];
    }
    return o;
}

static int is_ascii(const char *text, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < n; k++)
        if (text[k] & 0x80)
            return 0;
    return 1;
}

static PyObject *reprs(PyObject *self, PyObject *args) {
    const char *text, *suffix = "", *zero = NULL;
    Py_ssize_t length, suffix_n = 0, zero_n = 0;
    PyObject *values;
    if (!PyArg_ParseTuple(args, "y#O!|s#z#", &text, &length, &PyList_Type, &values, &suffix, &suffix_n, &zero,
                          &zero_n))
        return NULL;
    if (suffix_n > 8 || zero_n > 8) {
        PyErr_SetString(PyExc_ValueError, "reprs: suffix and zero are at most 8 characters");
        return NULL;
    }
    if (!is_ascii(suffix, suffix_n) || !is_ascii(zero, zero_n))
        goto ascii;
    Py_ssize_t count = PyList_GET_SIZE(values);
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    if (length < 2 || text[0] != '[' || text[length - 1] != ']')
        goto bad;
    Py_ssize_t p = 1, limit = length - 1;
    for (Py_ssize_t index = 0; index < count; index++) {
        Token t;
        Py_ssize_t start = p;
        p = read_token(text, p, limit, &t);
        if (p < 0 || (index + 1 < count ? p >= limit || text[p] != ',' : p != limit))
            goto bad;
        PyObject *shown;
        if (t.kind == 'n') {  /* NaN or an infinity */
            PyObject *word = PyObject_Repr(PyList_GET_ITEM(values, index));
            shown = word && suffix_n ? PyUnicode_FromFormat("%U%s", word, suffix) : word;
            if (word && suffix_n)
                Py_DECREF(word);
        } else {
            char buffer[80];
            const char *from = buffer;
            Py_ssize_t n;
            if (zero != NULL && t.count == 0) {
                from = zero;
                n = zero_n;
            } else {
                n = t.kind == 'i' ? p - start : float_repr(&t, buffer);
                if (t.kind == 'i')
                    from = text + start;
                if (n > 64)
                    goto bad;
            }
            shown = PyUnicode_New(n + (from == zero ? 0 : suffix_n), 127);  /* ASCII: nothing to decode */
            if (shown != NULL) {
                memcpy(PyUnicode_1BYTE_DATA(shown), from, n);
                if (from != zero)
                    memcpy(PyUnicode_1BYTE_DATA(shown) + n, suffix, suffix_n);
            }
        }
        if (shown == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, index, shown);
        p++;  /* the comma */
    }
    if (count == 0 && limit != 1)
        goto bad;
    return out;
bad:
    Py_DECREF(out);
    PyErr_SetString(PyExc_ValueError, "reprs: the text does not hold one number per value");
    return NULL;
ascii:
    PyErr_SetString(PyExc_ValueError, "reprs: suffix and zero must be ASCII");
    return NULL;
}

/* join_rows(columns, counts) -> list of str
 *   columns: the row cells, column by column, each part either
 *            - a list of ASCII str, one cell of every row, or
 *            - a block of numbers (encoded, values, width, suffix, zero): `width` columns at once, row-major
 *              (values[r * width + k] is row r's cell k), each cell repr(value) + suffix (zero instead for a
 *              value equal to zero, when not None), encoded being msgspec.json.encode(values), as reprs
 *              reads it;
 *            every column holding the same number of rows;
 *   counts:  how many rows each text holds, in order (summing to the number of rows).
 * Each text is its rows, each row its cells joined by ',' and ended by "\r\n": what
 * "".join(",".join(row) + "\r\n" for row in rows) makes, without a tuple and a str per row, nor a str per
 * number. Raises ValueError for anything else (a cell that is not an ASCII str, lengths that disagree, a
 * block whose text does not hold its numbers): the caller then joins them itself. */
typedef struct {
    PyObject *list;      /* a column of str, or NULL for a block's column */
    const char *arena;   /* the block's texts, one after another */
    Py_ssize_t *starts;  /* where each of the block's texts starts in arena (one more: where the last ends) */
    Py_ssize_t width, k; /* cell k of each row of a block `width` cells wide */
} Column;

typedef struct {
    char *arena;
    Py_ssize_t *starts;
} Block;

/* The texts of `values` (floats and ints, no bools) into block, from `text`, msgspec's JSON array of them:
 * each repr(value) + suffix (zero instead for a value equal to zero, when not NULL); 0, -1 with ValueError (or
 * another error) set. */
static int numbers_block(const char *text, Py_ssize_t length, PyObject *values, const char *suffix,
                         Py_ssize_t suffix_n, const char *zero, Py_ssize_t zero_n, Block *block) {
    Py_ssize_t count = PyList_GET_SIZE(values);
    if (suffix_n > 8 || zero_n > 8 || length < 2 || text[0] != '[' || text[length - 1] != ']' ||
        (count == 0 && length != 2) || !is_ascii(suffix, suffix_n) || !is_ascii(zero, zero_n))
        goto bad;
    block->starts = PyMem_Malloc((count + 1) * sizeof(Py_ssize_t));
    block->arena = PyMem_Malloc(count * (64 + 8) + 1);  /* a text is at most 64 characters, a suffix 8 */
    if (block->starts == NULL || block->arena == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    char *at = block->arena;
    Py_ssize_t p = 1, limit = length - 1;
    for (Py_ssize_t index = 0; index < count; index++) {
        Token t;
        Py_ssize_t start = p, n;
        block->starts[index] = at - block->arena;
        p = read_token(text, p, limit, &t);
        if (p < 0 || (index + 1 < count ? p >= limit || text[p] != ',' : p != limit))
            goto bad;
        p++;  /* the comma */
        if (zero != NULL && t.kind != 'n' && t.count == 0) {
            memcpy(at, zero, zero_n);
            at += zero_n;
            continue;
        }
        if (t.kind == 'n') {  /* NaN or an infinity: repr's word */
            PyObject *word = PyObject_Repr(PyList_GET_ITEM(values, index));
            if (word == NULL)
                return -1;
            n = PyUnicode_IS_ASCII(word) ? PyUnicode_GET_LENGTH(word) : 99;
            if (n <= 64)
                memcpy(at, PyUnicode_1BYTE_DATA(word), n);
            Py_DECREF(word);
        } else if (t.kind == 'i') {
            n = p - 1 - start;
            if (n <= 64)
                memcpy(at, text + start, n);
        } else {
            n = float_repr(&t, at);
        }
        if (n > 64)
            goto bad;
        at += n;
        memcpy(at, suffix, suffix_n);
        at += suffix_n;
    }
    block->starts[count] = at - block->arena;
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a block's text does not hold one number per value");
    return -1;
}

/* The texts of a join_rows block (encoded, values, width, suffix, zero) into block; its number of rows, -1
 * with ValueError (or another error) set. */
static Py_ssize_t read_block(PyObject *part, Block *block) {
    const char *text, *suffix, *zero = NULL;
    Py_ssize_t length, width, suffix_n, zero_n = 0;
    PyObject *values;
    if (!PyArg_ParseTuple(part, "y#O!ns#z#", &text, &length, &PyList_Type, &values, &width, &suffix, &suffix_n,
                          &zero, &zero_n))
        return -1;
    if (width < 1 || PyList_GET_SIZE(values) % width) {
        PyErr_SetString(PyExc_ValueError, "join_rows: a block's values do not fill its rows");
        return -1;
    }
    if (numbers_block(text, length, values, suffix, suffix_n, zero, zero_n, block) < 0)
        return -1;
    return PyList_GET_SIZE(values) / width;
}

static PyObject *join_rows(PyObject *self, PyObject *args) {
    PyObject *parts, *counts, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &parts, &PyList_Type, &counts))
        return NULL;
    Py_ssize_t n_parts = PyList_GET_SIZE(parts), width = 0, rows = -1, n_blocks = 0;
    Block *blocks = PyMem_Calloc(n_parts + 1, sizeof(Block));
    Column *columns = NULL;
    if (blocks == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n_parts; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        Py_ssize_t n;
        if (PyList_CheckExact(part)) {
            n = PyList_GET_SIZE(part);
            width++;
        } else if (PyTuple_CheckExact(part) && PyTuple_GET_SIZE(part) == 5) {
            n = read_block(part, &blocks[n_blocks++]);
            if (n < 0)
                goto fail;
            width += PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 2));
        } else {
            goto bad;
        }
        if (rows >= 0 && n != rows)
            goto bad;
        rows = n;
    }
    if (width == 0)
        goto bad;
    columns = PyMem_Malloc(width * sizeof(Column));
    if (columns == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0, c = 0, b = 0; i < n_parts; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (PyList_CheckExact(part)) {
            columns[c++] = (Column){part, NULL, NULL, 1, 0};
            for (Py_ssize_t r = 0; r < rows; r++) {
                PyObject *cell = PyList_GET_ITEM(part, r);
                if (!PyUnicode_CheckExact(cell) || !PyUnicode_IS_ASCII(cell))
                    goto bad;
            }
            continue;
        }
        Py_ssize_t cells = PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 2));
        for (Py_ssize_t k = 0; k < cells; k++)
            columns[c++] = (Column){NULL, blocks[b].arena, blocks[b].starts, cells, k};
        b++;
    }
    Py_ssize_t texts = PyList_GET_SIZE(counts), row = 0;
    out = PyList_New(texts);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t t = 0; t < texts; t++) {
        Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(counts, t));
        if (n < 0 || n > rows - row) {
            if (PyErr_Occurred())
                goto fail;
            goto bad;
        }
        Py_ssize_t length = n * (width + 1);  /* the commas and each row's "\r\n" */
        for (Py_ssize_t c = 0; c < width; c++) {
            Column *column = &columns[c];
            if (column->list != NULL) {
                for (Py_ssize_t r = row; r < row + n; r++)
                    length += PyUnicode_GET_LENGTH(PyList_GET_ITEM(column->list, r));
            } else {
                for (Py_ssize_t r = row; r < row + n; r++) {
                    Py_ssize_t at = r * column->width + column->k;
                    length += column->starts[at + 1] - column->starts[at];
                }
            }
        }
        PyObject *text = PyUnicode_New(length, 127);
        if (text == NULL)
            goto fail;
        Py_UCS1 *at = PyUnicode_1BYTE_DATA(text);
        for (Py_ssize_t r = row; r < row + n; r++) {
            for (Py_ssize_t c = 0; c < width; c++) {
                Column *column = &columns[c];
                const void *from;
                Py_ssize_t size;
                if (column->list != NULL) {
                    PyObject *cell = PyList_GET_ITEM(column->list, r);
                    from = PyUnicode_1BYTE_DATA(cell);
                    size = PyUnicode_GET_LENGTH(cell);
                } else {
                    Py_ssize_t index = r * column->width + column->k;
                    from = column->arena + column->starts[index];
                    size = column->starts[index + 1] - column->starts[index];
                }
                memcpy(at, from, size);
                at += size;
                *at++ = c + 1 < width ? ',' : '\r';
            }
            *at++ = '\n';
        }
        PyList_SET_ITEM(out, t, text);
        row += n;
    }
    if (row != rows)
        goto bad;
    goto done;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "join_rows: columns of ASCII str or blocks of numbers, all of one "
                                          "length, and counts summing to it");
fail:
    Py_CLEAR(out);
done:
    for (Py_ssize_t b = 0; b < n_blocks; b++) {
        PyMem_Free(blocks[b].arena);
        PyMem_Free(blocks[b].starts);
    }
    PyMem_Free(blocks);
    PyMem_Free(columns);
    return out;
}

/* tables_json(tables, extras[, floats]) -> list of str
 *   tables: a list of dicts {tensor key: {field: value}}, a graph node's input or output descriptions;
 *   extras: for each table, None or {tensor key: {metric: str}} (compare columns merged into a description),
 *           or (names, {tensor key: row}, columns): each tensor's metrics the cells of its row of `columns`
 *           (a list, one column per name of the tuple `names`: a list of str, or (fmt, floats) shown as
 *           `fmt % x` where finite and repr(x) where not: column_set's formats), as DataMode.shown_columns
 *           gives them; tables holding the same columns list share its texts;
 *   floats: optional, the text of every float field of the tables, in order (probe_graph.vis_db.table_floats);
 *           without it each float is written as repr() writes it, from msgspec's JSON text of them all read as
 *           reprs reads it (NaN and the infinities: PyOS_double_to_string, repr's own call).
 * Each text is what probe_graph.vis_db.format_table(table, extra) returns: every field as text (a float's
 * repr, None as "null", a str as it is, anything else its str()), a scalar's value repeated as
 * Max/Min/Mean/Norm with its dtype and shape, requires_grad and data_name defaults, the extra columns merged
 * in, all written as compact JSON (as msgspec writes it). A tensor's description (one with a Max) whose extra
 * columns are all new keys is written straight from its fields; any other through a dict of its texts, as
 * format_value makes it. Raises ValueError for what it does not write (a non-ASCII text, a key that is not a
 * str, too few floats): the caller then formats the tables itself. */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Buffer;

static int reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity)
        return 0;
    Py_ssize_t capacity = b->capacity ? b->capacity : 1024;
    while (capacity < b->size + more)
        capacity *= 2;
    char *data = PyMem_Realloc(b->data, capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static int put(Buffer *b, const char *text, Py_ssize_t size) {
    if (reserve(b, size) < 0)
        return -1;
    memcpy(b->data + b->size, text, size);
    b->size += size;
    return 0;
}

/* Whether any of the 8 ASCII characters in `word` is a control character, '"' or '\\' (what JSON escapes):
 * a zero byte found in word - 0x20 per byte, word ^ '"' and word ^ '\\' (the high bit of each byte is clear). */
static inline int needs_escape(uint64_t word) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = word ^ (ones * '"'), slash = word ^ (ones * '\\');
    return (((word - ones * 0x20) | (quote - ones) | (slash - ones)) & highs) != 0;
}

/* A JSON string of the ASCII str `text`, escaped as msgspec escapes it, after `before` and followed by `after`
 * (each at most one character; 0 for none); -2 for a text it does not write. */
static int put_quoted(Buffer *b, char before, PyObject *text, char after) {
    static const char hex[] = "0123456789abcdef";
    if (!PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text))
        return -2;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(text);
    if (reserve(b, 6 * size + 4) < 0)
        return -1;
    char *at = b->data + b->size;
    if (before)
        *at++ = before;
    *at++ = '"';
    Py_ssize_t i = 0;
    for (; i + 8 <= size; i += 8) {  /* 8 characters at a time while none needs escaping */
        uint64_t word;
        memcpy(&word, chars + i, 8);
        if (needs_escape(word))
            break;
        memcpy(at, &word, 8);
        at += 8;
    }
    for (; i < size; i++) {
        unsigned char ch = chars[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *at++ = ch;
            continue;
        }
        *at++ = '\\';
        switch (ch) {
        case '"': *at++ = '"'; break;
        case '\\': *at++ = '\\'; break;
        case '\b': *at++ = 'b'; break;
        case '\t': *at++ = 't'; break;
        case '\n': *at++ = 'n'; break;
        case '\f': *at++ = 'f'; break;
        case '\r': *at++ = 'r'; break;
        default:
            *at++ = 'u'; *at++ = '0'; *at++ = '0'; *at++ = hex[ch >> 4]; *at++ = hex[ch & 15];
        }
    }
    *at++ = '"';
    if (after)
        *at++ = after;
    b->size = at - b->data;
    return 0;
}

static int put_string(Buffer *b, PyObject *text) {
    return put_quoted(b, 0, text, 0);
}

/* Where the float fields' texts come from, in the tables' order: `texts` (the caller's list of str), else
 * msgspec's JSON array of their values (`encoded`, read token by token from `p` as reprs reads it). */
typedef struct {
    PyObject *texts, *encoded;
    Py_ssize_t next, p;
} Floats;

static PyObject *encode_numbers;  /* msgspec.json.Encoder().encode, imported when first needed */

/* msgspec's JSON array of the list `values` (NULL with an error). */
static PyObject *numbers_json(PyObject *values) {
    if (encode_numbers == NULL) {
        PyObject *module = PyImport_ImportModule("msgspec.json"), *encoder;
        encoder = module != NULL ? PyObject_CallMethod(module, "Encoder", NULL) : NULL;
        Py_XDECREF(module);
        encode_numbers = encoder != NULL ? PyObject_GetAttrString(encoder, "encode") : NULL;
        Py_XDECREF(encoder);
        if (encode_numbers == NULL)
            return NULL;
    }
    PyObject *encoded = PyObject_CallOneArg(encode_numbers, values);
    if (encoded != NULL && !PyBytes_Check(encoded)) {
        Py_CLEAR(encoded);
        PyErr_SetString(PyExc_TypeError, "tables_json: msgspec.json.Encoder().encode gave no bytes");
    }
    return encoded;
}

/* Every exact float field of the tables' descriptions, in order, as msgspec's JSON array (NULL with an error). */
static PyObject *float_fields_json(PyObject *tables) {
    PyObject *values = PyList_New(0), *table, *value, *key, *item, *encoded = NULL;
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tables); i++) {
        Py_ssize_t at = 0, pos;
        table = PyList_GET_ITEM(tables, i);
        while (PyDict_Check(table) && PyDict_Next(table, &at, &key, &value))
            for (pos = 0; PyDict_Check(value) && PyDict_Next(value, &pos, &key, &item);)
                if (PyFloat_CheckExact(item) && PyList_Append(values, item) < 0)
                    goto done;
    }
    encoded = numbers_json(values);
done:
    Py_DECREF(values);
    return encoded;
}

/* repr(item) of the float field `item` into out (80 bytes), from the next of `encoded`'s tokens; its length, -2
 * when the tokens run out or are not msgspec's, -1 with an error set. */
static Py_ssize_t next_float(Floats *f, PyObject *item, char *out) {
    const char *text = PyBytes_AS_STRING(f->encoded);
    Py_ssize_t limit = PyBytes_GET_SIZE(f->encoded) - 1, start = f->p, n;
    Token t;
    if (start >= limit)
        return -2;
    Py_ssize_t end = read_token(text, start, limit, &t);
    if (end < 0 || (end < limit && text[end] != ','))
        return -2;
    f->p = end + 1;
    f->next++;
    if (t.kind == 'f')
        return float_repr(&t, out);
    if (t.kind == 'i')  /* msgspec writes no float so */
        return -2;
    char *word = PyOS_double_to_string(PyFloat_AS_DOUBLE(item), 'r', 0, Py_DTSF_ADD_DOT_0, NULL);  /* nan, inf */
    if (word == NULL)
        return -1;
    n = (Py_ssize_t)strlen(word);
    if (n <= 64)
        memcpy(out, word, n);
    PyMem_Free(word);
    return n <= 64 ? n : -2;
}

/* An int, or a list of ints (a shape), as str() writes it, as a JSON string: 0, or 1 (nothing written) for
 * anything else, as an int beyond 64 bits. */
static int put_ints(Buffer *b, PyObject *item) {
    int is_list = PyList_CheckExact(item);
    Py_ssize_t n = is_list ? PyList_GET_SIZE(item) : 1;
    if (reserve(b, 4 + n * 24) < 0)
        return -1;
    char *at = b->data + b->size;
    *at++ = '"';
    if (is_list)
        *at++ = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *number = is_list ? PyList_GET_ITEM(item, i) : item;
        int overflow = 0;
        if (!PyLong_CheckExact(number))
            return 1;
        long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
        if (overflow)
            return 1;
        if (i) {
            *at++ = ',';
            *at++ = ' ';
        }
        char digits[24];
        int count = 0;
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        if (v < 0)
            *at++ = '-';
        do {
            digits[count++] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        while (count)
            *at++ = digits[--count];
    }
    if (is_list)
        *at++ = ']';
    *at++ = '"';
    b->size = at - b->data;
    return 0;
}

static PyObject *max_key, *value_key, *type_key, *grad_key, *name_key, *null_text, *minus_one, *stat_keys[3],
    *dtype_key, *shape_key, *empty_shape;

static int init_keys(void) {
    if (max_key != NULL)
        return 0;
    value_key = PyUnicode_InternFromString("value");
    type_key = PyUnicode_InternFromString("type");
    grad_key = PyUnicode_InternFromString("requires_grad");
    name_key = PyUnicode_InternFromString("data_name");
    null_text = PyUnicode_InternFromString("null");
    minus_one = PyUnicode_InternFromString("-1");
    stat_keys[0] = PyUnicode_InternFromString("Min");
    stat_keys[1] = PyUnicode_InternFromString("Mean");
    stat_keys[2] = PyUnicode_InternFromString("Norm");
    dtype_key = PyUnicode_InternFromString("dtype");
    shape_key = PyUnicode_InternFromString("shape");
    empty_shape = PyUnicode_InternFromString("[]");
    max_key = PyUnicode_InternFromString("Max");  /* last: set once all are */
    return max_key == NULL ? -1 : 0;
}

/* A field value's text as format_value shows it (a new reference): a float's repr (the next of `f`), "null"
 * for None, anything else its str(); NULL with no error set when the floats run out. */
static PyObject *field_text(PyObject *item, Floats *f) {
    if (PyFloat_CheckExact(item)) {
        if (f->texts != NULL) {
            if (f->next >= PyList_GET_SIZE(f->texts))
                return NULL;
            PyObject *text = PyList_GET_ITEM(f->texts, f->next++);
            Py_INCREF(text);
            return text;
        }
        char out[80];
        Py_ssize_t n = next_float(f, item, out);
        return n >= 0 ? PyUnicode_FromStringAndSize(out, n) : NULL;
    }
    if (item == Py_None) {
        Py_INCREF(null_text);
        return null_text;
    }
    return PyObject_Str(item);
}

/* A field value's text as a JSON string: 0, -1 with an error set, -2 for what it does not write. */
static int put_field(Buffer *b, PyObject *item, Floats *f) {
    if (PyFloat_CheckExact(item) && f->texts == NULL) {
        if (reserve(b, 82) < 0)
            return -1;
        Py_ssize_t n = next_float(f, item, b->data + b->size + 1);
        if (n < 0)
            return (int)n;
        b->data[b->size] = '"';
        b->data[b->size + n + 1] = '"';
        b->size += n + 2;
        return 0;
    }
    if (PyUnicode_CheckExact(item))
        return put_string(b, item);
    if (item == Py_True || item == Py_False)
        return item == Py_True ? put(b, "\"True\"", 6) : put(b, "\"False\"", 7);
    if (PyLong_CheckExact(item) || PyList_CheckExact(item)) {
        int status = put_ints(b, item);
        if (status <= 0)
            return status;
    }
    PyObject *text = field_text(item, f);
    if (text == NULL)
        return PyErr_Occurred() ? -1 : -2;
    int status = put_string(b, text);
    Py_DECREF(text);
    return status;
}

/* The shown description of `value` (a new dict of str), as vis_db.format_value makes it; NULL with no error
 * set for what it does not handle. */
static PyObject *shown_value(PyObject *value, Floats *f) {
    PyObject *shown = PyDict_New(), *key, *item;
    if (shown == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(value, &pos, &key, &item)) {
        PyObject *text = field_text(item, f);
        if (text == NULL || PyDict_SetItem(shown, key, text) < 0) {
            Py_XDECREF(text);
            goto fail;
        }
        Py_DECREF(text);
    }
    int has = PyDict_Contains(value, max_key);
    if (has < 0)
        goto fail;
    if (!has) {
        PyObject *scalar = PyDict_GetItemWithError(value, value_key);
        if (scalar == NULL && PyErr_Occurred())
            goto fail;
        if (PyDict_GET_SIZE(value) == 1 && scalar == Py_None)
            return shown;  /* {"value": null}: as it is */
        if (scalar != NULL && (PyFloat_Check(scalar) || PyLong_Check(scalar)) && !PyBool_Check(scalar)) {
            PyObject *text = PyDict_GetItemWithError(shown, value_key), *kind, *dtype;
            if (text == NULL || PyDict_SetItem(shown, max_key, text) < 0)
                goto fail;
            for (int i = 0; i < 3; i++)
                if (PyDict_SetItem(shown, stat_keys[i], text) < 0)
                    goto fail;
            kind = PyDict_GetItemWithError(value, type_key);
            if (kind == NULL && PyErr_Occurred())
                goto fail;
            dtype = PyUnicode_FromFormat("<class %S>", kind ? kind : Py_None);
            if (dtype == NULL || PyDict_SetItem(shown, dtype_key, dtype) < 0) {
                Py_XDECREF(dtype);
                goto fail;
            }
            Py_DECREF(dtype);
            if (PyDict_SetItem(shown, shape_key, empty_shape) < 0)
                goto fail;
        }
    }
    if (PyDict_SetDefault(shown, grad_key, null_text) == NULL || PyDict_SetDefault(shown, name_key, minus_one) == NULL)
        goto fail;
    return shown;
fail:
    Py_DECREF(shown);
    return NULL;
}

/* An object member's start: `"key":`, after a comma unless it is the `first`. */
static int put_key(Buffer *b, PyObject *key, int first) {
    return put_quoted(b, first ? 0 : ',', key, ':');
}

/* `shown` (a dict of str) as a JSON object. */
static int put_shown(Buffer *b, PyObject *shown) {
    PyObject *field, *text;
    Py_ssize_t at = 0;
    int status = put(b, "{", 1);
    for (int first = 1; status == 0 && PyDict_Next(shown, &at, &field, &text); first = 0) {
        status = put_key(b, field, first);
        if (status == 0)
            status = put_string(b, text);
    }
    return status == 0 ? put(b, "}", 1) : status;
}

/* The shown columns of a (names, {tensor key: row}, columns) extra, as text: each column a list of str, or
 * (fmt, floats) written here into a block (short_g, else Python's formatter), each float x as Python writes
 * `fmt % x` where x is finite and as repr(x) where not; fmt "%r", or "%.<1-17>g" and then literal text ("%%" a
 * percent sign; no quote, backslash or control character). Every extra holding the same columns list shares
 * its texts. */
typedef struct {
    PyObject *texts;  /* a list of str, or NULL: the block's */
    Block block;
    Py_ssize_t count;
} Cells;

typedef struct {
    PyObject *columns, *names;  /* the caller's list and names (borrowed: its extras hold them) */
    Cells *cells;
    Py_ssize_t width;
    Buffer members;             /* `,"name":` of each name, one after another */
    Py_ssize_t *member_ends;    /* where each ends in members */
    int plain;                  /* whether every name is an ASCII str, none requires_grad or data_name */
    uint64_t lengths;           /* bit (length % 64) of each name's length: a key of no such length is no name */
} ColumnSet;

typedef struct {
    ColumnSet *sets;
    Py_ssize_t count;
} ColumnSets;

/* fmt's precision and literal tail: "%r" gives precision 0; -2 for any other format. */
static int read_format(PyObject *fmt, int *precision, char *tail, Py_ssize_t *tail_n) {
    if (!PyUnicode_CheckExact(fmt) || !PyUnicode_IS_ASCII(fmt))
        return -2;
    const char *text = (const char *)PyUnicode_1BYTE_DATA(fmt);
    Py_ssize_t n = PyUnicode_GET_LENGTH(fmt), p = 2;
    *precision = 0;
    *tail_n = 0;
    if (n == 2 && memcmp(text, "%r", 2) == 0)
        return 0;
    if (n < 4 || memcmp(text, "%.", 2) != 0)
        return -2;
    for (; p < n && text[p] >= '0' && text[p] <= '9' && *precision <= 17; p++)
        *precision = 10 * *precision + (text[p] - '0');
    if (*precision < 1 || *precision > 17 || p >= n || text[p++] != 'g')
        return -2;
    for (; p < n; p++) {
        char ch = text[p];
        if (ch == '%' && (++p >= n || text[p] != '%'))
            return -2;  /* a second conversion */
        if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\' || *tail_n == 8)
            return -2;
        tail[(*tail_n)++] = ch;
    }
    return 0;
}

/* `"%.<precision>g" % x` of a finite x into out as Python writes it (correctly rounded), for precision 1 to 9
 * and 1e-17 < |x| < 1e17 (or a zero): x times a power of ten up to 1e22 (exact, so one rounding: an error
 * below 1e-7 at 9 digits) gives the digits where it is not within 1e-5 of a tie; -1 for anything else (Python's
 * own formatter writes it). %g: positional for a decimal exponent from -4 to precision - 1, else d.ddde+XX,
 * trailing zeros dropped. */
static Py_ssize_t short_g(double x, int precision, char *out) {
    static const double tens[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13,
                                    1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    Py_ssize_t o = 0;
    int negative = signbit(x) != 0;
    double size = fabs(x);
    if (precision < 1 || precision > 9)
        return -1;
    if (negative)
        out[o++] = '-';
    if (size == 0.0) {
        out[o++] = '0';
        return o;
    }
    if (!(size > 1e-17 && size < 1e17))
        return -1;
    int e = (int)floor(log10(size));  /* the decimal exponent, adjusted below where log10 is one off */
    double scaled = 0.0;
    for (int tries = 0; tries < 3; tries++) {
        int k = precision - 1 - e;  /* scaled = size * 10^k in [10^(precision-1), 10^precision) */
        if (k > 22 || k < -22)
            return -1;
        scaled = k >= 0 ? size * tens[k] : size / tens[-k];
        if (scaled < tens[precision - 1])
            e--;
        else if (scaled >= tens[precision])
            e++;
        else
            break;
    }
    if (scaled < tens[precision - 1] || scaled >= tens[precision])
        return -1;
    double whole = floor(scaled), part = scaled - whole;
    if (fabs(part - 0.5) < 1e-5)
        return -1;  /* near a tie: the exact value decides */
    unsigned long digits_value = (unsigned long)whole + (part > 0.5);
    if (digits_value == (unsigned long)tens[precision]) {  /* 999.9996 -> 1000 */
        digits_value /= 10;
        e++;
    }
    char digits[10];
    for (int k = precision - 1; k >= 0; k--, digits_value /= 10)
        digits[k] = (char)('0' + digits_value % 10);
    int count = precision;
    while (count > 1 && digits[count - 1] == '0')
        count--;
    if (e < -4 || e >= precision) {
        out[o++] = digits[0];
        if (count > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, count - 1);
            o += count - 1;
        }
        out[o++] = 'e';
        out[o++] = e < 0 ? '-' : '+';
        int a = e < 0 ? -e : e;
        out[o++] = (char)('0' + a / 10);
        out[o++] = (char)('0' + a % 10);
    } else if (e < 0) {  /* 0.000ddd */
        out[o++] = '0';
        out[o++] = '.';
        for (int k = e; k < -1; k++)
            out[o++] = '0';
        memcpy(out + o, digits, count);
        o += count;
    } else {  /* ddd.ddd */
        memcpy(out + o, digits, e + 1 < count ? e + 1 : count);
        for (int k = count; k < e + 1; k++)
            out[o + k] = '0';
        o += e + 1;
        if (count > e + 1) {
            out[o++] = '.';
            memcpy(out + o, digits + e + 1, count - e - 1);
            o += count - e - 1;
        }
    }
    return o;
}

/* The texts of a (fmt, floats) column into block: 0, -1 with an error set, -2 for what it does not write. */
static int format_block(PyObject *column, Block *block, Py_ssize_t *count) {
    if (!PyTuple_CheckExact(column) || PyTuple_GET_SIZE(column) != 2 || !PyList_CheckExact(PyTuple_GET_ITEM(column, 1)))
        return -2;
    PyObject *values = PyTuple_GET_ITEM(column, 1);
    int precision;
    char tail[8];
    Py_ssize_t tail_n, n = PyList_GET_SIZE(values);
    if (read_format(PyTuple_GET_ITEM(column, 0), &precision, tail, &tail_n) < 0)
        return -2;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyFloat_CheckExact(PyList_GET_ITEM(values, i)))
            return -2;
    *count = n;
    if (precision == 0) {  /* repr: msgspec's digits in repr's notation */
        PyObject *encoded = numbers_json(values);
        if (encoded == NULL)
            return -1;
        int status = numbers_block(PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded), values, "", 0, NULL, 0,
                                   block);
        Py_DECREF(encoded);
        return status;
    }
    block->starts = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    block->arena = PyMem_Malloc(n * (40 + 8) + 1);  /* %.17g writes at most 24 characters, repr 4 here */
    if (block->starts == NULL || block->arena == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    char *at = block->arena;
    for (Py_ssize_t i = 0; i < n; i++) {
        double x = PyFloat_AS_DOUBLE(PyList_GET_ITEM(values, i));
        int finite = isfinite(x);
        block->starts[i] = at - block->arena;
        Py_ssize_t quick = finite ? short_g(x, precision, at) : -1;
        if (quick >= 0) {
            at += quick;
        } else {
            /* what `fmt % x` calls: Python's own float formatter; repr's call for NaN and the infinities */
            char *text = finite ? PyOS_double_to_string(x, 'g', precision, 0, NULL)
                                : PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
            if (text == NULL)
                return -1;
            size_t size = strlen(text);
            if (size <= 40)
                memcpy(at, text, size);
            PyMem_Free(text);
            if (size > 40)
                return -2;
            at += size;
        }
        if (finite) {
            memcpy(at, tail, tail_n);
            at += tail_n;
        }
    }
    block->starts[n] = at - block->arena;
    return 0;
}

/* The texts of the columns list `columns` named by the tuple `names` (a new set of `sets`, or the one made
 * already); NULL with *status -1 (an error set) or -2 (what it does not write). */
static ColumnSet *column_set(ColumnSets *sets, PyObject *columns, PyObject *names, int *status) {
    Py_ssize_t width = PyTuple_GET_SIZE(names);
    *status = -2;
    for (Py_ssize_t i = 0; i < sets->count; i++)
        if (sets->sets[i].columns == columns && sets->sets[i].names == names)
            return &sets->sets[i];
    if (!PyList_CheckExact(columns) || PyList_GET_SIZE(columns) != width)
        return NULL;
    ColumnSet *grown = PyMem_Realloc(sets->sets, (sets->count + 1) * sizeof(ColumnSet));
    Cells *cells = PyMem_Calloc(width ? width : 1, sizeof(Cells));
    Py_ssize_t *member_ends = PyMem_Calloc(width ? width : 1, sizeof(Py_ssize_t));
    if (grown != NULL)
        sets->sets = grown;
    if (grown == NULL || cells == NULL || member_ends == NULL) {
        PyMem_Free(cells);
        PyMem_Free(member_ends);
        *status = -1;
        PyErr_NoMemory();
        return NULL;
    }
    ColumnSet *set = &sets->sets[sets->count++];
    *set = (ColumnSet){columns, names, cells, width, {NULL, 0, 0}, member_ends, 1, 0};
    for (Py_ssize_t k = 0; k < width && set->plain; k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        int written = put_key(&set->members, name, 0);
        if (written == -1) {
            *status = -1;
            return NULL;
        }
        set->plain = written == 0 && name != grad_key && name != name_key && PyUnicode_Compare(name, grad_key) != 0
                     && PyUnicode_Compare(name, name_key) != 0;
        member_ends[k] = set->members.size;
        if (set->plain)
            set->lengths |= 1ULL << (PyUnicode_GET_LENGTH(name) % 64);
    }
    for (Py_ssize_t k = 0; k < width; k++) {
        PyObject *column = PyList_GET_ITEM(columns, k);
        if (PyList_CheckExact(column)) {
            cells[k].texts = column;
            cells[k].count = PyList_GET_SIZE(column);
        } else if ((*status = format_block(column, &cells[k].block, &cells[k].count)) != 0) {
            return NULL;
        }
    }
    *status = 0;
    return set;
}

static void free_sets(ColumnSets *sets) {
    for (Py_ssize_t i = 0; i < sets->count; i++) {
        for (Py_ssize_t k = 0; k < sets->sets[i].width; k++) {
            PyMem_Free(sets->sets[i].cells[k].block.arena);
            PyMem_Free(sets->sets[i].cells[k].block.starts);
        }
        PyMem_Free(sets->sets[i].cells);
        PyMem_Free(sets->sets[i].members.data);
        PyMem_Free(sets->sets[i].member_ends);
    }
    PyMem_Free(sets->sets);
}

/* A description's extra columns: `more` a dict {metric: text} (names NULL), or row `row` of `set`'s columns,
 * named by the tuple `names`. */
typedef struct {
    PyObject *more, *names;
    ColumnSet *set;
    Py_ssize_t row;
} Extra;

/* The next extra column's name, and its text where it is a str already (else NULL: the set's cell). */
static int next_extra(const Extra *x, Py_ssize_t *pos, PyObject **name, PyObject **text) {
    if (x->set == NULL)
        return PyDict_Next(x->more, pos, name, text);
    if (*pos >= x->set->width)
        return 0;
    *name = PyTuple_GET_ITEM(x->names, *pos);
    *text = NULL;
    (*pos)++;
    return 1;
}

/* Where column k's cell of the extra's row is: its str (*text), or its characters in the block. */
static int cell(const Extra *x, Py_ssize_t k, PyObject **text, const char **chars, Py_ssize_t *size) {
    Cells *cells = &x->set->cells[k];
    if (x->row >= cells->count)
        return -2;
    if (cells->texts != NULL) {
        *text = PyList_GET_ITEM(cells->texts, x->row);
        return 0;
    }
    *chars = cells->block.arena + cells->block.starts[x->row];
    *size = cells->block.starts[x->row + 1] - cells->block.starts[x->row];
    return 0;
}

/* The extra column at `pos - 1` (its `text` as next_extra gave it) as a JSON string. */
static int put_cell(Buffer *b, const Extra *x, Py_ssize_t pos, PyObject *text) {
    const char *chars;
    Py_ssize_t size;
    if (text == NULL) {
        int status = cell(x, pos - 1, &text, &chars, &size);
        if (status != 0)
            return status;
        if (text == NULL) {  /* a formatted number: nothing to escape */
            if (reserve(b, size + 2) < 0)
                return -1;
            b->data[b->size] = '"';
            memcpy(b->data + b->size + 1, chars, size);
            b->data[b->size + size + 1] = '"';
            b->size += size + 2;
            return 0;
        }
    }
    return put_string(b, text);
}

/* The extra column at `pos - 1` as a str (a new reference); NULL with no error set for what it does not write. */
static PyObject *cell_text(const Extra *x, Py_ssize_t pos, PyObject *text) {
    const char *chars;
    Py_ssize_t size;
    if (text == NULL && cell(x, pos - 1, &text, &chars, &size) != 0)
        return NULL;
    if (text != NULL) {
        Py_INCREF(text);
        return text;
    }
    return PyUnicode_FromStringAndSize(chars, size);
}

/* Whether `key` is one of the (plain) set's names. */
static int is_name(const ColumnSet *set, PyObject *key) {
    if (!PyUnicode_CheckExact(key))
        return 0;  /* no str: put_key refuses it */
    Py_ssize_t length = PyUnicode_GET_LENGTH(key);
    if (!((set->lengths >> (length % 64)) & 1))
        return 0;
    for (Py_ssize_t k = 0; k < set->width; k++) {
        PyObject *name = PyTuple_GET_ITEM(set->names, k);
        if (name == key || (PyUnicode_GET_LENGTH(name) == length && PyUnicode_Compare(name, key) == 0))
            return 1;
    }
    return 0;
}

/* A tensor's description (one with a Max) whose extra columns `x` (NULL: none) are all new keys, written
 * straight from its fields: 0, 1 (nothing written) for any other description, -1/-2 as put_field. */
static int put_tensor(Buffer *b, PyObject *value, const Extra *x, Floats *f) {
    int has = PyDict_Contains(value, max_key);
    if (has <= 0)
        return has < 0 ? -1 : 1;
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    if (x != NULL && x->set != NULL && !x->set->plain)
        return 1;
    while (x != NULL && x->set == NULL && next_extra(x, &pos, &key, &item)) {
        if (!PyUnicode_CheckExact(key))
            return 1;
        int clash = PyDict_Contains(value, key);
        if (clash != 0 || PyUnicode_Compare(key, grad_key) == 0 || PyUnicode_Compare(key, name_key) == 0)
            return clash < 0 ? -1 : 1;
    }
    Py_ssize_t start = b->size;
    Floats floats_at_start = *f;
    int status = put(b, "{", 1), grad = 0, name = 0;
    pos = 0;
    for (int first = 1; status == 0 && PyDict_Next(value, &pos, &key, &item); first = 0) {
        if (x != NULL && x->set != NULL && is_name(x->set, key)) {
            b->size = start;  /* a field a metric overrides: written through format_value's dict */
            *f = floats_at_start;
            return 1;
        }
        grad |= key == grad_key;  /* interned: the dump's keys usually are the same object */
        name |= key == name_key;
        status = put_key(b, key, first);
        if (status == 0)
            status = put_field(b, item, f);
    }
    if (status != 0)
        return status;
    if (!grad && (grad = PyDict_Contains(value, grad_key)) == 0)
        status = put(b, ",\"requires_grad\":\"null\"", 23);
    if (status == 0 && !name && (name = PyDict_Contains(value, name_key)) == 0)
        status = put(b, ",\"data_name\":\"-1\"", 17);
    if (grad < 0 || name < 0)
        return -1;
    pos = 0;
    while (status == 0 && x != NULL && next_extra(x, &pos, &key, &item)) {
        if (x->set != NULL) {  /* the member's start, as column_set wrote it */
            Py_ssize_t from = pos > 1 ? x->set->member_ends[pos - 2] : 0;
            status = put(b, x->set->members.data + from, x->set->member_ends[pos - 1] - from);
        } else {
            status = put_key(b, key, 0);
        }
        if (status == 0)
            status = put_cell(b, x, pos, item);
    }
    return status == 0 ? put(b, "}", 1) : status;
}

/* Any other description, through a dict of its texts as format_value makes it, with the extra columns `x`
 * (NULL: none) merged in. */
static int put_other(Buffer *b, PyObject *value, const Extra *x, Floats *f) {
    PyObject *shown = shown_value(value, f), *name, *text;
    if (shown == NULL)
        return PyErr_Occurred() ? -1 : -2;
    Py_ssize_t at = 0;
    int status = 0;
    while (status == 0 && x != NULL && next_extra(x, &at, &name, &text)) {
        PyObject *cell = cell_text(x, at, text);
        status = cell == NULL ? (PyErr_Occurred() ? -1 : -2) : PyDict_SetItem(shown, name, cell);
        Py_XDECREF(cell);
    }
    if (status == 0)
        status = put_shown(b, shown);
    Py_DECREF(shown);
    return status;
}

/* One table with its extra columns `extra`: None, {tensor key: {metric: text}}, or (names, {tensor key: row},
 * columns): each tensor's metrics the cells of its row of the columns (as column_set reads them), named by
 * the tuple names. */
static int put_table(Buffer *b, PyObject *table, PyObject *extra, Floats *f, ColumnSets *sets) {
    Extra x = {NULL, NULL, NULL, 0};
    if (PyTuple_CheckExact(extra)) {
        int status = 0;
        if (PyTuple_GET_SIZE(extra) != 3 || !PyTuple_CheckExact(PyTuple_GET_ITEM(extra, 0)))
            return -2;
        x.names = PyTuple_GET_ITEM(extra, 0);
        x.set = column_set(sets, PyTuple_GET_ITEM(extra, 2), x.names, &status);
        if (x.set == NULL)
            return status;
        extra = PyTuple_GET_ITEM(extra, 1);
    }
    if (!PyDict_CheckExact(table) || (extra != Py_None && !PyDict_CheckExact(extra)))
        return -2;
    if (PyDict_GET_SIZE(table) == 0)
        return put(b, "{}", 2);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int status = put(b, "{", 1);
    for (int first = 1; status == 0 && PyDict_Next(table, &pos, &key, &value); first = 0) {
        if (!PyDict_CheckExact(value))
            return -2;
        PyObject *more = extra != Py_None ? PyDict_GetItemWithError(extra, key) : NULL;
        if (more == NULL && PyErr_Occurred())
            return -1;
        if (more != NULL && x.set != NULL) {  /* a row of the columns */
            if (!PyLong_CheckExact(more) || (x.row = PyLong_AsSsize_t(more)) < 0)
                return PyErr_Occurred() ? -1 : -2;
        } else if (more != NULL && !PyDict_CheckExact(more)) {
            return -2;  /* metrics that are no dict */
        }
        x.more = more;
        int none = more == NULL || (x.set != NULL ? x.set->width : PyDict_GET_SIZE(more)) == 0;  /* nothing to merge */
        status = put_key(b, key, first);
        if (status == 0)
            status = put_tensor(b, value, none ? NULL : &x, f);
        if (status == 1)
            status = put_other(b, value, none ? NULL : &x, f);
    }
    return status == 0 ? put(b, "}", 1) : status;
}

static PyObject *tables_json(PyObject *self, PyObject *args) {
    PyObject *tables, *extras, *texts = Py_None, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!|O", &PyList_Type, &tables, &PyList_Type, &extras, &texts))
        return NULL;
    if (texts != Py_None && !PyList_Check(texts))
        return PyErr_Format(PyExc_TypeError, "tables_json: floats must be a list of str or None");
    if (init_keys() < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(tables);
    if (PyList_GET_SIZE(extras) != n)
        goto bad;
    Floats f = {texts != Py_None ? texts : NULL, NULL, 0, 1};
    if (f.texts == NULL && (f.encoded = float_fields_json(tables)) == NULL)
        return NULL;
    Buffer b = {NULL, 0, 0};
    ColumnSets sets = {NULL, 0};
    int status = 0;
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        b.size = 0;
        status = put_table(&b, PyList_GET_ITEM(tables, i), PyList_GET_ITEM(extras, i), &f, &sets);
        PyObject *text = status == 0 ? PyUnicode_New(b.size, 127) : NULL;
        if (text == NULL) {
            Py_CLEAR(out);
            break;
        }
        memcpy(PyUnicode_1BYTE_DATA(text), b.data, b.size);
        PyList_SET_ITEM(out, i, text);
    }
    PyMem_Free(b.data);
    free_sets(&sets);
    Py_ssize_t count = f.texts != NULL ? PyList_GET_SIZE(f.texts) : -1;
    if (out != NULL && f.encoded != NULL)  /* every token read: the closing bracket reached */
        count = f.p == PyBytes_GET_SIZE(f.encoded) || PyBytes_GET_SIZE(f.encoded) == 2 ? f.next : -1;
    Py_XDECREF(f.encoded);
    if (out != NULL && f.next == count)
        return out;
    Py_XDECREF(out);
    if (status != -2 && PyErr_Occurred())
        return NULL;
bad:
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "tables_json: tables of str-keyed descriptions, ASCII text, one float text "
                                      "per float field, shown columns as the extras' docs say");
    return NULL;
}

/* flatten_entry(name, entry) -> (inputs, outputs): probe_graph.flatten.flatten_entry in C (the graph's
 * input/output tables, one pair per node: the most objects a graph load makes). Under each argument, a dict
 * with a "type" key is a description, kept at its dotted key; any other dict or a list/tuple is walked, each
 * item at key.sub; None keeps its slot as {"value": None}; the rest is dropped. */
static PyObject *type_text, *params_grad_part, *input_fields[4], *input_labels[4], *output_text;

static int flatten_into(PyObject *value, PyObject *key, PyObject *into);

/* f"{key}.{sub}": key a str, sub a str key, or NULL for the list index "index" */
static PyObject *dotted(PyObject *key, PyObject *sub, Py_ssize_t index) {
    char digits[24];
    const char *tail = digits;
    Py_ssize_t tail_n;
    if (!PyUnicode_IS_ASCII(key) || (sub != NULL && !(PyUnicode_CheckExact(sub) && PyUnicode_IS_ASCII(sub))))
        return sub == NULL ? PyUnicode_FromFormat("%U.%zd", key, index) : PyUnicode_FromFormat("%U.%S", key, sub);
    if (sub == NULL)
        tail_n = snprintf(digits, sizeof digits, "%zd", index);
    else {
        tail = (const char *)PyUnicode_1BYTE_DATA(sub);
        tail_n = PyUnicode_GET_LENGTH(sub);
    }
    Py_ssize_t key_n = PyUnicode_GET_LENGTH(key);
    PyObject *name = PyUnicode_New(key_n + 1 + tail_n, 127);
    if (name != NULL) {
        char *out = (char *)PyUnicode_1BYTE_DATA(name);
        memcpy(out, PyUnicode_1BYTE_DATA(key), key_n);
        out[key_n] = '.';
        memcpy(out + key_n + 1, tail, tail_n);
    }
    return name;
}

static int flatten_item(PyObject *item, PyObject *key, PyObject *sub, Py_ssize_t index, PyObject *into) {
    PyObject *name = dotted(key, sub, index);
    if (name == NULL)
        return -1;
    int status;
    if (Py_IS_TYPE(item, &PyDict_Type) && (status = PyDict_Contains(item, type_text)) != 0)
        status = status < 0 ? -1 : PyDict_SetItem(into, name, item);
    else
        status = flatten_into(item, name, into);
    Py_DECREF(name);
    return status;
}

static int flatten_into(PyObject *value, PyObject *key, PyObject *into) {
    int status = 0;
    if (PyDict_Check(value)) {
        int typed = PyDict_Contains(value, type_text);
        if (typed != 0)
            return typed < 0 ? -1 : PyDict_SetItem(into, key, value);
    } else if (value == Py_None) {
        PyObject *none = Py_BuildValue("{sO}", "value", Py_None);
        status = none != NULL ? PyDict_SetItem(into, key, none) : -1;
        Py_XDECREF(none);
        return status;
    } else if (!PyList_Check(value) && !PyTuple_Check(value))
        return 0;
    if (Py_EnterRecursiveCall(" in flatten_entry"))
        return -1;
    if (PyDict_Check(value)) {
        PyObject *sub, *item;
        Py_ssize_t pos = 0;
        while (status == 0 && PyDict_Next(value, &pos, &sub, &item)) {
            Py_INCREF(sub);
            Py_INCREF(item);
            status = flatten_item(item, key, sub, 0, into);
            Py_DECREF(sub);
            Py_DECREF(item);
        }
    } else {
        PyObject *items = PySequence_Fast(value, "");
        for (Py_ssize_t i = 0; status == 0 && items != NULL && i < PySequence_Fast_GET_SIZE(items); i++)
            status = flatten_item(PySequence_Fast_GET_ITEM(items, i), key, NULL, i, into);
        status = items == NULL ? -1 : status;
        Py_XDECREF(items);
    }
    Py_LeaveRecursiveCall();
    return status;
}

/* flatten_into(value, f"{name}.{label}", into) */
static int flatten_under(PyObject *value, PyObject *name, PyObject *label, PyObject *into) {
    PyObject *key = dotted(name, label, 0);
    int status = key != NULL ? flatten_into(value, key, into) : -1;
    Py_XDECREF(key);
    return status;
}

static int init_flatten(void) {
    static const char *fields[4] = {"input_args", "input", "input_kwargs", "parameters"};
    static const char *labels[4] = {"input", "input", "input", "parameters"};
    if (type_text != NULL)
        return 0;
    for (int i = 0; i < 4; i++)
        if ((input_fields[i] = PyUnicode_InternFromString(fields[i])) == NULL
                || (input_labels[i] = PyUnicode_InternFromString(labels[i])) == NULL)
            return -1;
    if ((output_text = PyUnicode_InternFromString("output")) == NULL
            || (params_grad_part = PyUnicode_InternFromString(".parameters_grad.")) == NULL)
        return -1;
    return (type_text = PyUnicode_InternFromString("type")) == NULL ? -1 : 0;
}

/* a parameters_grad entry: {param: [description] or description} as inputs at {name}.{param}; else the
 * arguments (input_args, input, input_kwargs as "input"; parameters) as inputs, output as outputs */
static int flatten_fields(PyObject *name, PyObject *entry, PyObject *inputs, PyObject *outputs) {
    Py_ssize_t found = PyUnicode_Find(name, params_grad_part, 0, PY_SSIZE_T_MAX, 1);
    if (found == -2)
        return -1;
    int status = 0;
    if (found >= 0) {
        PyObject *param, *grads;
        Py_ssize_t pos = 0;
        while (status == 0 && PyDict_Next(entry, &pos, &param, &grads)) {
            PyObject *key = dotted(name, param, 0);
            if (key == NULL)
                return -1;
            Py_INCREF(grads);
            PyObject *value = PyList_Check(grads) && PyList_GET_SIZE(grads) == 1 ? PyList_GET_ITEM(grads, 0) : grads;
            status = flatten_into(value, key, inputs);
            Py_DECREF(grads);
            Py_DECREF(key);
        }
        return status;
    }
    for (int i = 0; status == 0 && i < 4; i++) {
        PyObject *value = PyDict_GetItemWithError(entry, input_fields[i]);
        if (value != NULL)
            status = flatten_under(value, name, input_labels[i], inputs);
        else if (PyErr_Occurred())
            return -1;
    }
    PyObject *value = status == 0 ? PyDict_GetItemWithError(entry, output_text) : NULL;
    if (value != NULL)
        return flatten_under(value, name, output_text, outputs);
    return status < 0 || PyErr_Occurred() ? -1 : 0;
}

static PyObject *flatten_entry(PyObject *self, PyObject *args) {
    PyObject *name, *entry;
    if (!PyArg_ParseTuple(args, "UO", &name, &entry) || init_flatten() < 0)
        return NULL;
    PyObject *inputs = PyDict_New(), *outputs = PyDict_New(), *both = NULL;
    if (inputs != NULL && outputs != NULL && (!PyDict_Check(entry) || flatten_fields(name, entry, inputs, outputs) == 0))
        both = PyTuple_Pack(2, inputs, outputs);
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    return both;
}

static PyMethodDef methods[] = {
    {"reprs", reprs, METH_VARARGS, "reprs(encoded, values[, suffix[, zero]]) -> [repr(v) + suffix for v in values]: "
                                   "see the module's source"},
    {"join_rows", join_rows, METH_VARARGS, "join_rows(columns, counts) -> the CSV text of each count of rows: "
                                           "see the module's source"},
    {"tables_json", tables_json, METH_VARARGS, "tables_json(tables, extras[, floats]) -> the viewer's JSON text of "
                                               "each table: see the module's source"},
    {"flatten_entry", flatten_entry, METH_VARARGS, "flatten_entry(name, entry) -> (inputs, outputs): "
                                                   "probe_graph.flatten's, in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_reprs", NULL, -1, methods};

PyMODINIT_FUNC PyInit__reprs(void) { return PyModule_Create(&module); }
