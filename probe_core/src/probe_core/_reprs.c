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
    for (Py_ssize_t k = 0; k < suffix_n; k++)
        if (suffix[k] & 0x80)
            goto ascii;
    for (Py_ssize_t k = 0; k < zero_n; k++)
        if (zero[k] & 0x80)
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
 *   columns: a list of lists of ASCII str, each holding one cell of every row (the same number of rows);
 *   counts:  how many rows each text holds, in order (summing to the number of rows).
 * Each text is its rows, each row its cells joined by ',' and ended by "\r\n": what
 * "".join(",".join(row) + "\r\n" for row in rows) makes, without a tuple and a str per row. Raises
 * ValueError for anything else (a cell that is not an ASCII str, lengths that disagree): the caller then
 * joins them itself. */
static PyObject *join_rows(PyObject *self, PyObject *args) {
    PyObject *columns, *counts;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &columns, &PyList_Type, &counts))
        return NULL;
    Py_ssize_t width = PyList_GET_SIZE(columns), rows = -1;
    for (Py_ssize_t c = 0; c < width; c++) {
        PyObject *column = PyList_GET_ITEM(columns, c);
        if (!PyList_CheckExact(column) || (rows >= 0 && PyList_GET_SIZE(column) != rows))
            goto bad;
        rows = PyList_GET_SIZE(column);
    }
    if (width == 0)
        goto bad;
    Py_ssize_t texts = PyList_GET_SIZE(counts), row = 0;
    PyObject *out = PyList_New(texts);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t t = 0; t < texts; t++) {
        Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(counts, t));
        if (n < 0 || n > rows - row) {
            Py_DECREF(out);
            if (!PyErr_Occurred())
                goto bad;
            return NULL;
        }
        Py_ssize_t length = n * (width + 1);  /* the commas and each row's "\r\n" */
        for (Py_ssize_t c = 0; c < width; c++) {
            PyObject *column = PyList_GET_ITEM(columns, c);
            for (Py_ssize_t r = row; r < row + n; r++) {
                PyObject *cell = PyList_GET_ITEM(column, r);
                if (!PyUnicode_CheckExact(cell) || !PyUnicode_IS_ASCII(cell)) {
                    Py_DECREF(out);
                    goto bad;
                }
                length += PyUnicode_GET_LENGTH(cell);
            }
        }
        PyObject *text = PyUnicode_New(length, 127);
        if (text == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        Py_UCS1 *at = PyUnicode_1BYTE_DATA(text);
        for (Py_ssize_t r = row; r < row + n; r++) {
            for (Py_ssize_t c = 0; c < width; c++) {
                PyObject *cell = PyList_GET_ITEM(PyList_GET_ITEM(columns, c), r);
                Py_ssize_t size = PyUnicode_GET_LENGTH(cell);
                memcpy(at, PyUnicode_1BYTE_DATA(cell), size);
                at += size;
                *at++ = c + 1 < width ? ',' : '\r';
            }
            *at++ = '\n';
        }
        PyList_SET_ITEM(out, t, text);
        row += n;
    }
    if (row != rows) {
        Py_DECREF(out);
        goto bad;
    }
    return out;
bad:
    PyErr_SetString(PyExc_ValueError, "join_rows: columns of ASCII str of one length, and counts summing to it");
    return NULL;
}

static PyMethodDef methods[] = {
    {"reprs", reprs, METH_VARARGS, "reprs(encoded, values[, suffix[, zero]]) -> [repr(v) + suffix for v in values]: "
                                   "see the module's source"},
    {"join_rows", join_rows, METH_VARARGS, "join_rows(columns, counts) -> the CSV text of each count of rows: "
                                           "see the module's source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_reprs", NULL, -1, methods};

PyMODINIT_FUNC PyInit__reprs(void) { return PyModule_Create(&module); }
