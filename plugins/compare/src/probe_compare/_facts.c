/* probe_compare.judge._spread in C, for the common entry: how far apart its outputs, inputs and parameters
 * are, from each row's discrepancy and (to see a cancelled sum) its statistics.
 *
 * configure(check, cancelled, parameters)
 *   judge.py's constants, given once at import: _CANCELLED_CHECK, CANCELLED and the parameters' role code.
 * spread(outputs, others, input_rows, errs, target_stats, bench_stats) -> tuple | None
 *   outputs, others, input_rows: the entry's RowLayout fields ((position, unit roundoff) of each output row,
 *   (position, role code) of each input and parameter row, the positions of its input rows); errs: each row's
 *   discrepancy (a list or tuple); target_stats, bench_stats: four numbers per row (Max, Min, Mean, Norm), tuples
 *   as compact forms hold them (any other sequence, and layout fields other than tuples, give None).
 *   The result is judge._spread's, element for element: (out_err, roundoff, outputs, at_out, worst_out, in_err,
 *   param_err, inputs, fresh_in, at_in, worst_in, errs). None where this function leaves the entry to the
 *   Python: a discrepancy that is no finite float; an output whose error is measured against its inputs'
 *   magnitude (a cancelled sum: the Python reads its leaves); a statistic read that is no float nor an int
 *   below 2**53, or an input row without a finite Max or Min on either side; a position out of range.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

static double cancelled_check = -1.0, cancelled = 0.0;  /* set by configure() */
static long parameters_role = -1;  /* judge.PARAMETERS, set by configure() */

/* The number at stats[i] as a double: 1, or 0 when it is none this function reads (an error is cleared). */
static int number_at(PyObject *stats, Py_ssize_t i, double *out) {
    if (i < 0 || i >= PyTuple_GET_SIZE(stats))
        return 0;
    PyObject *value = PyTuple_GET_ITEM(stats, i);
    if (PyFloat_CheckExact(value)) {
        *out = PyFloat_AS_DOUBLE(value);
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (overflow || number > (1LL << 53) || number < -(1LL << 53))  /* exact as a double only below 2**53 */
            return 0;
        *out = (double)number;
        return 1;
    }
    return 0;
}

/* judge._stats_magnitude of row pos: the largest finite |Max| or |Min| of either side, NAN when none is finite.
 * 1, or 0 when a statistic is none number_at reads. */
static int magnitude(PyObject *target, PyObject *bench, Py_ssize_t pos, double *out) {
    double values[4], high = -1.0;
    if (!number_at(target, 4 * pos, &values[0]) || !number_at(target, 4 * pos + 1, &values[1])
        || !number_at(bench, 4 * pos, &values[2]) || !number_at(bench, 4 * pos + 1, &values[3]))
        return 0;
    for (int i = 0; i < 4; i++) {
        double value = fabs(values[i]);
        if (isfinite(value) && value > high)
            high = value;
    }
    *out = high >= 0 ? high : NAN;
    return 1;
}

/* A row position (a Python int) within [0, count): 1 with *out, else 0 (an error is cleared). */
static int position(PyObject *value, Py_ssize_t count, Py_ssize_t *out) {
    if (!PyLong_CheckExact(value))
        return 0;
    Py_ssize_t pos = PyLong_AsSsize_t(value);
    if (pos == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (pos < 0 || pos >= count)
        return 0;
    *out = pos;
    return 1;
}

/* The (first, second) items of a 2-tuple of layout, or 0. */
static int pair_items(PyObject *item, PyObject **first, PyObject **second) {
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
        return 0;
    *first = PyTuple_GET_ITEM(item, 0);
    *second = PyTuple_GET_ITEM(item, 1);
    return 1;
}

/* Appends the 2-tuple (a, b) to list: 0, or -1 on an error. */
static int append_pair(PyObject *list, PyObject *a, PyObject *b) {
    PyObject *pair = PyTuple_Pack(2, a, b);
    if (pair == NULL)
        return -1;
    int failed = PyList_Append(list, pair);
    Py_DECREF(pair);
    return failed;
}

/* 1 when no output is measured against its inputs' magnitude, 0 when one is or a statistic is not read. */
static int nothing_cancelled(PyObject *outputs, PyObject *input_rows, PyObject **errs, Py_ssize_t count,
                             PyObject *target, PyObject *bench) {
    double scale = 0.0;
    Py_ssize_t inputs = PyTuple_GET_SIZE(input_rows);
    for (Py_ssize_t i = 0; i < inputs; i++) {
        Py_ssize_t pos;
        double size;
        if (!position(PyTuple_GET_ITEM(input_rows, i), count, &pos) || !magnitude(target, bench, pos, &size)
            || isnan(size))  /* a NaN among the magnitudes: Python's max() depends on their order */
            return 0;
        if (i == 0 || size > scale)
            scale = size;
    }
    if (!(scale > 0) || !isfinite(scale))
        return 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(outputs); i++) {
        PyObject *at, *unit;
        Py_ssize_t pos;
        double size;
        if (!pair_items(PyTuple_GET_ITEM(outputs, i), &at, &unit) || !position(at, count, &pos))
            return 0;
        if (PyFloat_AS_DOUBLE(errs[pos]) != 0.0
            && (!magnitude(target, bench, pos, &size) || size < cancelled * scale))
            return 0;
    }
    return 1;
}

static PyObject *spread(PyObject *self, PyObject *args) {
    PyObject *outputs, *others, *input_rows, *errs, *target, *bench;
    if (!PyArg_ParseTuple(args, "OOOOOO:spread", &outputs, &others, &input_rows, &errs, &target, &bench))
        return NULL;
    if (cancelled_check < 0) {
        PyErr_SetString(PyExc_RuntimeError, "spread(): configure() was not called");
        return NULL;
    }
    if (!PyTuple_CheckExact(outputs) || !PyTuple_CheckExact(others) || !PyTuple_CheckExact(input_rows)
        || !PyTuple_CheckExact(target) || !PyTuple_CheckExact(bench)
        || (!PyList_CheckExact(errs) && !PyTuple_CheckExact(errs)))
        Py_RETURN_NONE;  /* held otherwise than a RowLayout and a compact form hold them: the Python reads them */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(errs);
    PyObject **items = PySequence_Fast_ITEMS(errs);
    int over = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyFloat_CheckExact(items[i]) || !isfinite(PyFloat_AS_DOUBLE(items[i])))
            Py_RETURN_NONE;
        over |= PyFloat_AS_DOUBLE(items[i]) > cancelled_check;
    }
    if (over && !nothing_cancelled(outputs, input_rows, items, count, target, bench))
        Py_RETURN_NONE;

    double out_err = 0.0, unit_out = 0.0, worst_out = -1.0, in_err = 0.0, param_err = 0.0, worst_in = -1.0;
    Py_ssize_t at_out = -1, at_in = -1;
    PyObject *out_list = PyList_New(0), *in_list = PyList_New(0), *fresh = PyList_New(0);
    if (out_list == NULL || in_list == NULL || fresh == NULL)
        goto failed;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(outputs); i++) {
        PyObject *at, *unit;
        Py_ssize_t pos;
        if (!pair_items(PyTuple_GET_ITEM(outputs, i), &at, &unit) || !position(at, count, &pos)
            || !PyFloat_CheckExact(unit))
            goto python;
        double err = PyFloat_AS_DOUBLE(items[pos]), u = PyFloat_AS_DOUBLE(unit);
        if (append_pair(out_list, at, items[pos]) < 0)
            goto failed;
        if (u > unit_out)
            unit_out = u;
        if (err > worst_out) {
            worst_out = err;
            at_out = pos;
            if (err > out_err)
                out_err = err;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(others); i++) {
        PyObject *at, *code;
        Py_ssize_t pos;
        if (!pair_items(PyTuple_GET_ITEM(others, i), &at, &code) || !position(at, count, &pos)
            || !PyLong_CheckExact(code))
            goto python;
        double err = PyFloat_AS_DOUBLE(items[pos]);
        if (append_pair(in_list, at, items[pos]) < 0)
            goto failed;
        long role = PyLong_AsLong(code);
        if (role == -1 && PyErr_Occurred())
            goto failed;
        if (role == parameters_role) {
            if (err > param_err)
                param_err = err;
        } else if (err > 0) {
            if (append_pair(fresh, items[pos], at) < 0)
                goto failed;
            if (err > in_err)
                in_err = err;
        }
        if (err > worst_in) {
            worst_in = err;
            at_in = pos;
        }
    }
    return Py_BuildValue("(ddNndddNNndO)", out_err, unit_out, out_list, at_out, worst_out, in_err, param_err,
                         in_list, fresh, at_in, worst_in, errs);
python:
    Py_DECREF(out_list);
    Py_DECREF(in_list);
    Py_DECREF(fresh);
    Py_RETURN_NONE;
failed:
    Py_XDECREF(out_list);
    Py_XDECREF(in_list);
    Py_XDECREF(fresh);
    return NULL;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    double check, ratio;
    long role;
    if (!PyArg_ParseTuple(args, "ddl:configure", &check, &ratio, &role))
        return NULL;
    if (!(check >= 0) || !(ratio >= 0)) {
        PyErr_SetString(PyExc_ValueError, "configure(): check and cancelled must be numbers >= 0");
        return NULL;
    }
    cancelled_check = check;
    cancelled = ratio;
    parameters_role = role;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(check, cancelled, parameters): judge.py's constants, see the source"},
    {"spread", spread, METH_VARARGS, "spread(outputs, others, input_rows, errs, target_stats, bench_stats): "
                                     "judge._spread's result or None, see the module's source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_facts", NULL, -1, methods};

PyMODINIT_FUNC PyInit__facts(void) {
    return PyModule_Create(&module);
}
