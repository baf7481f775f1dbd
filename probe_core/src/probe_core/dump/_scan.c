/* The members of a dump.json's "data" object, read a window at a time without building their values.
 *
 * scan(text, pos, base, known[, member]) -> (members, pos, state)
 *   text:   a window of the file, decoded (an ASCII str: text positions are byte positions);
 *   pos:    where the next member (or the blank before it) starts in text;
 *   base:   the byte offset of text[0] in the file;
 *   known:  a dict from skeleton (bytes) to whatever the caller keeps for it (a compact form's signature);
 *   member: the tuple type (a named tuple) of the members (default: tuple).
 *
 * Most entries of a statistics dump are *flat*: an object whose keys are sections ("input_args",
 * "input_kwargs", "input", "output", "parameters", each at most once and in that order) holding a list, or
 * an object with distinct plain keys, of leaves that are either a tensor record with exactly the keys
 * type, dtype, shape, Max, Min, Mean, Norm and maybe requires_grad (in that order) or a number argument
 * with exactly type and value. scan() reads such a member's text once: its statistics become Python numbers
 * (json's own: int() of an integer token, float() of any other, NaN and +-Infinity as json reads them),
 * and everything else of its text, the *skeleton* (the statistics cut out, each leaving a \x01), is
 * looked up in known. Two entries with the same skeleton differ in their statistics only.
 *
 * members holds, in file order, each flat member's (key, None, start, end, (known[skeleton], statistics))
 * while the skeletons are known; a member whose skeleton is not known comes alone, as (key, None, start,
 * end, (skeleton, statistics)), for the caller to decode once and remember. start and end are the byte
 * span of the value; None stands for the value, which is not built. pos is where reading goes on (after
 * the separator of the last member and the blank after it). state is CLOSED when that separator was the
 * '}' closing the object, CUT when scan() stopped because the window ends within the next member (the
 * caller reads on, then calls again), else STOPPED: scan() stops before any member it does not read this
 * way (not flat, an escaped key, a number it cannot parse), which the caller reads by itself, then calls
 * scan() again. It never reads past the window, and returns no member whose separator it has not seen.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *s;
    Py_ssize_t n, p;
    char *skel;          /* the skeleton of the member being read */
    Py_ssize_t skel_n, skel_cap;
    Py_ssize_t copied;   /* text up to here is in the skeleton (or cut) */
    PyObject *stats;     /* list of the member's statistics */
} Scan;

enum { STOPPED, CLOSED, CUT };

static const char *SECTIONS[] = {"input_args", "input_kwargs", "input", "output", "parameters"};
#define N_SECTIONS 5

static void blank(Scan *c) {
    while (c->p < c->n) {
        unsigned char ch = c->s[c->p];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
            break;
        c->p++;
    }
}

static int take(Scan *c, unsigned char ch) {
    blank(c);
    if (c->p < c->n && c->s[c->p] == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A string token; *a, *b: its contents (without quotes). plain: refuse escapes. */
static int string(Scan *c, Py_ssize_t *a, Py_ssize_t *b, int plain) {
    if (!take(c, '"'))
        return 0;
    *a = c->p;
    while (c->p < c->n) {
        unsigned char ch = c->s[c->p];
        if (ch == '"') {
            *b = c->p++;
            return 1;
        }
        if (ch < 0x20 || (ch == '\\' && plain))
            return 0;
        c->p += ch == '\\' ? 2 : 1;
    }
    return 0;
}

/* The exact key `name` and the ':' after it. Its bytes are compared at once where the window holds them; else
 * (a key cut by the window's end, or another key) it is read as a string, which leaves reading where the caller
 * expects it (at the window's end for a cut key). */
static int key(Scan *c, const char *name, Py_ssize_t len) {
    Py_ssize_t a, b;
    blank(c);
    if (c->p + len + 2 <= c->n && c->s[c->p] == '"' && c->s[c->p + 1 + len] == '"'
            && memcmp(c->s + c->p + 1, name, len) == 0) {
        c->p += len + 2;
        return take(c, ':');
    }
    return string(c, &a, &b, 1) && b - a == len && memcmp(c->s + a, name, len) == 0 && take(c, ':');
}
#define KEY(c, name) key(c, name, (Py_ssize_t)sizeof(name) - 1)

/* A decimal number token as it is read: its first 19 significant digits w, the power of ten they are scaled
 * by, its sign; exact is 0 when it has more digits, an exponent beyond 1000, or is not a plain number. */
typedef struct {
    uint64_t w;
    int digits, exp10, negative, exact;
} Decimal;

/* Digits, each taken into d (fraction: after the point, each scales it down by ten). */
static int digits(Scan *c, Decimal *d, int fraction) {
    Py_ssize_t from = c->p;
    while (c->p < c->n && c->s[c->p] >= '0' && c->s[c->p] <= '9') {
        unsigned char ch = c->s[c->p++];
        if (d->digits || ch != '0') {  /* leading zeros are no significant digits */
            if (d->digits == 19)
                d->exact = 0;
            else {
                d->w = 10 * d->w + (uint64_t)(ch - '0');
                d->digits++;
            }
        }
        d->exp10 -= fraction;
    }
    return c->p > from;
}

/* A JSON number (json's NaN, Infinity and -Infinity too): its span, whether it is an integer, and its decimal
 * form (exact only for a plain number). */
static int number(Scan *c, Py_ssize_t *a, int *integer, Decimal *d) {
    blank(c);
    *a = c->p;
    *integer = 0;
    *d = (Decimal){0, 0, 0, 0, 0};
    static const char *words[] = {"NaN", "Infinity", "-Infinity"};
    unsigned char first = c->p < c->n ? c->s[c->p] : 0;
    int word = first == 'N' || first == 'I' || (first == '-' && c->p + 1 < c->n && c->s[c->p + 1] == 'I');
    for (int i = 0; word && i < 3; i++) {
        Py_ssize_t len = (Py_ssize_t)strlen(words[i]);
        if (c->n - c->p >= len && memcmp(c->s + c->p, words[i], len) == 0) {
            c->p += len;
            return 1;
        }
    }
    d->exact = 1;
    if (c->p < c->n && c->s[c->p] == '-') {
        d->negative = 1;
        c->p++;
    }
    if (c->p < c->n && c->s[c->p] == '0')
        c->p++;
    else if (!digits(c, d, 0))
        return 0;
    *integer = 1;
    if (c->p < c->n && c->s[c->p] == '.') {
        c->p++;
        if (!digits(c, d, 1))
            return 0;
        *integer = 0;
    }
    if (c->p < c->n && (c->s[c->p] == 'e' || c->s[c->p] == 'E')) {
        c->p++;
        int minus = c->p < c->n && c->s[c->p] == '-', e = 0;
        if (c->p < c->n && (c->s[c->p] == '+' || c->s[c->p] == '-'))
            c->p++;
        Py_ssize_t from = c->p;
        for (; c->p < c->n && c->s[c->p] >= '0' && c->s[c->p] <= '9'; c->p++)
            if (e <= 1000)
                e = 10 * e + (c->s[c->p] - '0');
        if (c->p == from)
            return 0;
        if (e > 1000)
            d->exact = 0;
        d->exp10 += minus ? -e : e;
        *integer = 0;
    }
    return c->p < c->n;  /* a number the window ends in may go on in the next window */
}

#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64
#define EXTENDED_DOUBLE 1
/* 10^0 .. 10^27, each exact in the x87's 64-bit mantissa (5^27 < 2^64) */
static const long double POW10[] = {1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L,
    1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L, 1e23L, 1e24L,
    1e25L, 1e26L, 1e27L};
#endif

/* The double nearest the decimal number token t[0:len) when one step of extended precision says it for
 * sure; 0 when it cannot tell (the caller then parses the token the usual way, as float() does).
 *
 * A token of at most 19 significant digits is an integer w < 2^64 times 10^e. For |e| <= 27 both are exact
 * in the x87's 64-bit mantissa, so w * 10^e (or w / 10^-e) is rounded once, to the nearest 64-bit value r.
 * Rounding r to a double gives the double nearest the exact value unless r lies on a halfway point between
 * two doubles (its 11 low bits 0x400): every halfway point is on the 64-bit grid, so an r off them is on the
 * same side of each as the exact value. Statistics written by repr() have 17 significant digits: the usual
 * correctly rounded parse then needs big-number arithmetic, this needs one multiplication. */
static int decimal_double(uint64_t w, int exp10, int negative, double *out) {
#ifdef EXTENDED_DOUBLE
    if (w == 0) {
        *out = negative ? -0.0 : 0.0;
        return 1;
    }
    if (exp10 < -27 || exp10 > 27)
        return 0;
    long double x = exp10 < 0 ? (long double)w / POW10[-exp10] : (long double)w * POW10[exp10];
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);  /* the x87 format's first 8 bytes: its 64-bit mantissa */
    if ((bits & 0x7FF) == 0x400)
        return 0;
    *out = negative ? -(double)x : (double)x;
    return 1;
#else
    (void)w, (void)exp10, (void)negative, (void)out;
    return 0;
#endif
}

/* decimal_double of the number token t[0:len), read here. */
static int fast_double(const char *t, Py_ssize_t len, double *out) {
#ifdef EXTENDED_DOUBLE
    const char *p = t, *end = t + len;
    int negative = p < end && *p == '-';
    p += negative;
    uint64_t w = 0;
    int digits = 0, exp10 = 0, point = 0;
    for (; p < end; p++) {
        if (*p == '.' && !point) {
            point = 1;
            continue;
        }
        if (*p < '0' || *p > '9')
            break;
        if (digits || *p != '0') {  /* leading zeros are no significant digits */
            if (digits == 19)
                return 0;
            w = 10 * w + (uint64_t)(*p - '0');
            digits++;
        }
        exp10 -= point;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int minus = p < end && *p == '-', e = 0;
        p += p < end && (*p == '-' || *p == '+');
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if ((e = 10 * e + (*p - '0')) > 1000)
                return 0;
        exp10 += minus ? -e : e;
    }
    if (p != end)
        return 0;
    return decimal_double(w, exp10, negative, out);
#else
    (void)t, (void)len, (void)out;
    return 0;
#endif
}

/* The Python value json gives for the number token s[a:p]; NULL (no error set) when there is none. */
static PyObject *number_value(Scan *c, Py_ssize_t a, int integer) {
    Py_ssize_t len = c->p - a;
    char buffer[64];
    if (len >= (Py_ssize_t)sizeof buffer)
        return NULL;  /* longer than any statistic: json reads it */
    memcpy(buffer, c->s + a, len);
    buffer[len] = 0;
    if (buffer[0] == 'N')
        return PyFloat_FromDouble(Py_NAN);
    if (buffer[0] == 'I' || buffer[1] == 'I')
        return PyFloat_FromDouble(buffer[0] == '-' ? -Py_HUGE_VAL : Py_HUGE_VAL);
    PyObject *value;
    if (integer) {
        value = PyLong_FromString(buffer, NULL, 10);
    } else {
        char *end;
        double x;
        if (fast_double(buffer, len, &x))
            return PyFloat_FromDouble(x);
        x = PyOS_string_to_double(buffer, &end, NULL);
        value = (x == -1.0 && PyErr_Occurred()) || *end ? NULL : PyFloat_FromDouble(x);
    }
    if (value == NULL)
        PyErr_Clear();
    return value;
}

static int grow(Scan *c, Py_ssize_t more) {
    if (c->skel_n + more <= c->skel_cap)
        return 1;
    Py_ssize_t cap = 2 * c->skel_cap + more;
    char *skel = PyMem_Realloc(c->skel, cap);
    if (skel == NULL)
        return 0;
    c->skel = skel;
    c->skel_cap = cap;
    return 1;
}

/* A statistic: its value joins stats; its token leaves the skeleton (a \x01 marks where it was). */
static int statistic(Scan *c, int cut) {
    Py_ssize_t a;
    int integer;
    Decimal d;
    double x;
    if (!number(c, &a, &integer, &d))
        return 0;
    PyObject *value;
    if (d.exact && integer && d.digits <= 18)  /* int() of it, read already */
        value = PyLong_FromLongLong(d.negative ? -(long long)d.w : (long long)d.w);
    else if (d.exact && !integer && decimal_double(d.w, d.exp10, d.negative, &x))
        value = PyFloat_FromDouble(x);
    else
        value = number_value(c, a, integer);
    if (value == NULL)
        return 0;
    int failed = PyList_Append(c->stats, value);
    Py_DECREF(value);
    if (failed) {
        PyErr_Clear();
        return 0;
    }
    if (cut) {
        Py_ssize_t kept = a - c->copied;
        if (!grow(c, kept + 1))
            return 0;
        memcpy(c->skel + c->skel_n, c->s + c->copied, kept);
        c->skel_n += kept;
        c->skel[c->skel_n++] = 1;
        c->copied = c->p;
    }
    return 1;
}

/* A leaf: a tensor record (its four statistics cut) or a number argument (its value four times). */
static int leaf(Scan *c) {
    Py_ssize_t a, b;
    if (!take(c, '{') || !KEY(c, "type") || !string(c, &a, &b, 0) || !take(c, ','))
        return 0;
    if (!string(c, &a, &b, 1) || !take(c, ':'))
        return 0;
    if (b - a == 5 && memcmp(c->s + a, "value", 5) == 0) {
        if (!statistic(c, 0))
            return 0;
        PyObject *value = PyList_GET_ITEM(c->stats, PyList_GET_SIZE(c->stats) - 1);
        for (int i = 0; i < 3; i++)
            if (PyList_Append(c->stats, value)) {
                PyErr_Clear();
                return 0;
            }
        return take(c, '}');
    }
    if (b - a != 5 || memcmp(c->s + a, "dtype", 5) != 0 || !string(c, &a, &b, 0) || !take(c, ',')
        || !KEY(c, "shape") || !take(c, '['))
        return 0;
    if (!take(c, ']')) {
        do {
            int integer;
            Decimal d;
            if (!number(c, &a, &integer, &d) || !integer)
                return 0;
        } while (take(c, ','));
        if (!take(c, ']'))
            return 0;
    }
    if (!take(c, ',') || !KEY(c, "Max") || !statistic(c, 1) || !take(c, ',') || !KEY(c, "Min") || !statistic(c, 1)
        || !take(c, ',') || !KEY(c, "Mean") || !statistic(c, 1) || !take(c, ',') || !KEY(c, "Norm")
        || !statistic(c, 1))
        return 0;
    if (take(c, '}'))
        return 1;  /* no requires_grad (MindSpore's records) */
    if (!take(c, ',') || !KEY(c, "requires_grad"))
        return 0;
    blank(c);
    static const char *flags[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        Py_ssize_t len = (Py_ssize_t)strlen(flags[i]);
        if (c->n - c->p > len && memcmp(c->s + c->p, flags[i], len) == 0) {
            c->p += len;
            return take(c, '}');
        }
    }
    return 0;
}

/* A section's list of leaves, or its object of leaves under distinct plain keys. */
static int section(Scan *c) {
    if (take(c, '[')) {
        if (take(c, ']'))
            return 1;
        do {
            if (!leaf(c))
                return 0;
        } while (take(c, ','));
        return take(c, ']');
    }
    if (!take(c, '{'))
        return 0;
    if (take(c, '}'))
        return 1;
    Py_ssize_t keys[64][2];
    int count = 0;
    do {
        Py_ssize_t a, b;
        if (count == 64 || !string(c, &a, &b, 1) || !take(c, ':'))
            return 0;
        for (int i = 0; i < count; i++)
            if (keys[i][1] - keys[i][0] == b - a && memcmp(c->s + keys[i][0], c->s + a, b - a) == 0)
                return 0;  /* a repeated key: json keeps the last value, in the first one's place */
        keys[count][0] = a;
        keys[count][1] = b;
        count++;
        if (!leaf(c))
            return 0;
    } while (take(c, ','));
    return take(c, '}');
}

/* A flat entry: sections in order, each at most once. */
static int entry(Scan *c) {
    if (!take(c, '{'))
        return 0;
    if (take(c, '}'))
        return 1;
    int next = 0;
    do {
        Py_ssize_t a, b;
        if (!string(c, &a, &b, 1) || !take(c, ':'))
            return 0;
        int found = -1;
        for (int i = next; i < N_SECTIONS && found < 0; i++)
            if ((Py_ssize_t)strlen(SECTIONS[i]) == b - a && memcmp(c->s + a, SECTIONS[i], b - a) == 0)
                found = i;
        if (found < 0 || !section(c))
            return 0;
        next = found + 1;
    } while (take(c, ','));
    return take(c, '}');
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *text, *known;
    PyTypeObject *member_type = &PyTuple_Type;
    Py_ssize_t pos, base;
    if (!PyArg_ParseTuple(args, "UnnO!|O!", &text, &pos, &base, &PyDict_Type, &known, &PyType_Type, &member_type))
        return NULL;
    if (!PyType_IsSubtype(member_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "scan: member must be a tuple type");
        return NULL;
    }
    PyObject *members = PyList_New(0);
    if (members == NULL)
        return NULL;
    int state = STOPPED;
    if (!PyUnicode_IS_ASCII(text))
        return Py_BuildValue("(Nni)", members, pos, state);
    Scan c = {PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), pos, NULL, 0, 0, 0, NULL};
    while (state == STOPPED) {
        Py_ssize_t a, b;
        if (!string(&c, &a, &b, 1) || !take(&c, ':')) {
            state = c.p >= c.n ? CUT : STOPPED;
            break;
        }
        blank(&c);
        Py_ssize_t start = c.p;
        c.skel_n = 0;
        c.copied = start;
        c.stats = PyList_New(0);
        if (c.stats == NULL)
            goto error;
        if (!entry(&c)) {
            Py_CLEAR(c.stats);
            state = c.p >= c.n ? CUT : STOPPED;
            break;
        }
        Py_ssize_t end = c.p;
        if (take(&c, ',')) {
            blank(&c);
        } else if (take(&c, '}')) {
            state = CLOSED;
        } else {
            Py_CLEAR(c.stats);
            state = c.p >= c.n ? CUT : STOPPED;
            break;
        }
        Py_ssize_t rest = end - c.copied;
        if (!grow(&c, rest)) {
            Py_CLEAR(c.stats);
            goto error;
        }
        memcpy(c.skel + c.skel_n, c.s + c.copied, rest);
        PyObject *skeleton = PyBytes_FromStringAndSize(c.skel, c.skel_n + rest);
        PyObject *stats = PyList_AsTuple(c.stats);
        Py_CLEAR(c.stats);
        PyObject *found = skeleton ? PyDict_GetItemWithError(known, skeleton) : NULL;
        if (skeleton == NULL || stats == NULL || (found == NULL && PyErr_Occurred())) {
            Py_XDECREF(skeleton);
            Py_XDECREF(stats);
            goto error;
        }
        if (found == NULL && PyList_GET_SIZE(members) > 0) {
            Py_DECREF(skeleton);  /* an unknown skeleton comes alone: stop before it */
            Py_DECREF(stats);
            state = STOPPED;
            break;
        }
        PyObject *flat = PyTuple_Pack(2, found ? found : skeleton, stats);
        Py_DECREF(skeleton);
        Py_DECREF(stats);
        PyObject *key = PyUnicode_FromStringAndSize((const char *)c.s + a, b - a);
        PyObject *first = PyLong_FromSsize_t(base + start), *last = PyLong_FromSsize_t(base + end);
        PyObject *member = !(flat && key && first && last) ? NULL  /* a named tuple's instance, as tuple.__new__ makes it */
                           : member_type == &PyTuple_Type ? PyTuple_New(5) : member_type->tp_alloc(member_type, 5);
        if (member == NULL) {
            Py_XDECREF(flat);
            Py_XDECREF(key);
            Py_XDECREF(first);
            Py_XDECREF(last);
            goto error;
        }
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(member, 0, key);
        PyTuple_SET_ITEM(member, 1, Py_None);
        PyTuple_SET_ITEM(member, 2, first);
        PyTuple_SET_ITEM(member, 3, last);
        PyTuple_SET_ITEM(member, 4, flat);
        if (PyList_Append(members, member)) {
            Py_DECREF(member);
            goto error;
        }
        Py_DECREF(member);
        pos = c.p;
        if (found == NULL)
            break;
    }
    PyMem_Free(c.skel);
    return Py_BuildValue("(Nni)", members, pos, state);
error:
    PyMem_Free(c.skel);
    Py_DECREF(members);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(text, pos, base, known[, member]) -> (members, pos, state): see the module's source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "STOPPED", STOPPED) || PyModule_AddIntConstant(m, "CLOSED", CLOSED)
                      || PyModule_AddIntConstant(m, "CUT", CUT))) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
