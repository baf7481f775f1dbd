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
 * NaN and the infinities. Each token here is read as (sign, digits, decimal exponent) whatever its
 * notation, and written again in repr's: positional from 1e-4 up to 1e16, else d.ddde+XX with at least
 * two exponent digits; a null is repr() of its value; an integer token (no '.', no exponent) is the int's
 * repr already. Raises ValueError when the text does not hold len(values) numbers (the caller then
 * calls repr() itself).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* A number token as read: its sign, significant digits (trailing zeros dropped) and where the decimal point
 * goes (the value is 0.d1d2... times 10^point); kind 'i' for an integer token, 'f' for a float, 'n' for null. */
typedef struct {
    char kind;
    int negative, count, point;
    char digits[32];
} Token;

/* Reads the token at text[p:) up to the next ',' or ']' (at limit); returns where it ends, -1 when it is
 * not a number msgspec writes. */
static Py_ssize_t read_token(const char *text, Py_ssize_t p, Py_ssize_t limit, Token *t) {
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

/* The texts of a block's numbers into block; its number of rows, -1 with ValueError (or another error) set. */
static Py_ssize_t read_block(PyObject *part, Block *block) {
    const char *text, *suffix, *zero = NULL;
    Py_ssize_t length, width, suffix_n, zero_n = 0;
    PyObject *values;
    if (!PyArg_ParseTuple(part, "y#O!ns#z#", &text, &length, &PyList_Type, &values, &width, &suffix, &suffix_n,
                          &zero, &zero_n))
        return -1;
    Py_ssize_t count = PyList_GET_SIZE(values);
    if (width < 1 || count % width || suffix_n > 8 || zero_n > 8 || length < 2 || text[0] != '[' ||
        text[length - 1] != ']' || (count == 0 && length != 2))
        goto bad;
    if (!is_ascii(suffix, suffix_n) || !is_ascii(zero, zero_n))
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
    return count / width;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "join_rows: a block's text does not hold one number per value");
    return -1;
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

/* tables_json(tables, extras, floats) -> list of str
 *   tables: a list of dicts {tensor key: {field: value}}, a graph node's input or output descriptions;
 *   extras: for each table, None or {tensor key: {metric: str}} (compare columns merged into a description);
 *   floats: the text of every float field of the tables, in order (probe_core.graph.vis_db.table_floats).
 * Each text is what probe_core.graph.vis_db.format_table(table, extra, iter(floats)) returns: every field
 * as text (a float's from floats, None as "null", a str as it is, anything else its str()), a scalar's
 * value repeated as Max/Min/Mean/Norm with its dtype and shape, requires_grad and data_name defaults, the
 * extra columns merged in, all written as compact JSON (as msgspec writes it). Raises ValueError for what
 * it does not write (a non-ASCII text, a key that is not a str, too few floats): the caller then formats
 * the tables itself. */
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

/* A JSON string of the ASCII str `text`, escaped as msgspec escapes it; -2 for a text it does not write. */
static int put_string(Buffer *b, PyObject *text) {
    static const char hex[] = "0123456789abcdef";
    if (!PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text))
        return -2;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(text);
    if (reserve(b, 6 * size + 2) < 0)
        return -1;
    char *at = b->data + b->size;
    *at++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
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
    b->size = at - b->data;
    return 0;
}

/* The shown description of `value` (a new dict of str), as vis_db.format_value makes it; NULL with
 * ValueError set for what it does not handle. */
static PyObject *shown_value(PyObject *value, PyObject *floats, Py_ssize_t *next) {
    if (!PyDict_CheckExact(value))
        return NULL;
    PyObject *shown = PyDict_New(), *key, *item;
    if (shown == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(value, &pos, &key, &item)) {
        PyObject *text;
        if (PyFloat_CheckExact(item)) {
            if (*next >= PyList_GET_SIZE(floats))
                goto fail;
            text = PyList_GET_ITEM(floats, (*next)++);
            Py_INCREF(text);
        } else if (item == Py_None) {
            text = PyUnicode_FromString("null");
        } else {
            text = PyObject_Str(item);
        }
        if (text == NULL || PyDict_SetItem(shown, key, text) < 0) {
            Py_XDECREF(text);
            goto fail;
        }
        Py_DECREF(text);
    }
    static PyObject *max_key, *value_key, *type_key, *grad_key, *name_key, *null_text, *minus_one, *stat_keys[3],
        *dtype_key, *shape_key, *empty_shape;
    if (max_key == NULL) {
        max_key = PyUnicode_InternFromString("Max");
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
        if (empty_shape == NULL)
            goto fail;
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

static int put_table(Buffer *b, PyObject *table, PyObject *extra, PyObject *floats, Py_ssize_t *next) {
    if (!PyDict_CheckExact(table) || (extra != Py_None && !PyDict_CheckExact(extra)))
        return -2;
    if (PyDict_GET_SIZE(table) == 0)
        return put(b, "{}", 2);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int first = 1;
    if (put(b, "{", 1) < 0)
        return -1;
    while (PyDict_Next(table, &pos, &key, &value)) {
        PyObject *shown = shown_value(value, floats, next);
        if (shown == NULL)
            return PyErr_Occurred() ? -1 : -2;
        if (extra != Py_None) {
            PyObject *more = PyDict_GetItemWithError(extra, key);
            int truth = more != NULL ? PyObject_IsTrue(more) : 0;
            if ((more == NULL && PyErr_Occurred()) || truth < 0 || (truth && PyDict_Update(shown, more) < 0)) {
                Py_DECREF(shown);
                return -1;
            }
        }
        int status = put(b, first ? "" : ",", first ? 0 : 1);
        first = 0;
        if (status == 0)
            status = put_string(b, key);
        if (status == 0)
            status = put(b, ":{", 2);
        PyObject *field, *text;
        Py_ssize_t at = 0;
        int inner = 1;
        while (status == 0 && PyDict_Next(shown, &at, &field, &text)) {
            if (!inner)
                status = put(b, ",", 1);
            inner = 0;
            if (status == 0)
                status = put_string(b, field);
            if (status == 0)
                status = put(b, ":", 1);
            if (status == 0)
                status = put_string(b, text);
        }
        Py_DECREF(shown);
        if (status == 0)
            status = put(b, "}", 1);
        if (status != 0)
            return status;
    }
    return put(b, "}", 1);
}

static PyObject *tables_json(PyObject *self, PyObject *args) {
    PyObject *tables, *extras, *floats;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &tables, &PyList_Type, &extras, &PyList_Type, &floats))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(tables), next = 0;
    if (PyList_GET_SIZE(extras) != n)
        goto bad;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    Buffer b = {NULL, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        b.size = 0;
        int status = put_table(&b, PyList_GET_ITEM(tables, i), PyList_GET_ITEM(extras, i), floats, &next);
        PyObject *text = status == 0 ? PyUnicode_New(b.size, 127) : NULL;
        if (text == NULL) {
            PyMem_Free(b.data);
            Py_DECREF(out);
            if (status == -2)
                goto bad;
            return NULL;
        }
        memcpy(PyUnicode_1BYTE_DATA(text), b.data, b.size);
        PyList_SET_ITEM(out, i, text);
    }
    PyMem_Free(b.data);
    if (next != PyList_GET_SIZE(floats)) {
        Py_DECREF(out);
        goto bad;
    }
    return out;
bad:
    PyErr_SetString(PyExc_ValueError, "tables_json: tables of str-keyed descriptions, ASCII text, one float text "
                                      "per float field");
    return NULL;
}

static PyMethodDef methods[] = {
    {"reprs", reprs, METH_VARARGS, "reprs(encoded, values[, suffix[, zero]]) -> [repr(v) + suffix for v in values]: "
                                   "see the module's source"},
    {"join_rows", join_rows, METH_VARARGS, "join_rows(columns, counts) -> the CSV text of each count of rows: "
                                           "see the module's source"},
    {"tables_json", tables_json, METH_VARARGS, "tables_json(tables, extras, floats) -> the viewer's JSON text of "
                                               "each table: see the module's source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_reprs", NULL, -1, methods};

PyMODINIT_FUNC PyInit__reprs(void) { return PyModule_Create(&module); }
