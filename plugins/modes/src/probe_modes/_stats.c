/* The statistics mode's column form in C: its metric columns and discrepancies of many rows at once, from
 * flat lists of numbers, without numpy (whose import alone costs a compare a quarter of a second).
 *
 * metrics(target, bench) -> (Max diff, MaxRelativeErr, Min diff, MinRelativeErr, Mean diff, ..., NormRelativeErr)
 *   target, bench: lists of 4 numbers per row (Max, Min, Mean, Norm), flat. Eight lists of floats, one value per
 *   row: statistics.py's _metrics_numpy, element for element.
 * discrepancies(target, bench, counts, target_big, bench_big) -> list of floats
 *   counts: each row's number of elements; *_big: each row's dtype's largest finite value on that side (0 for
 *   integers). statistics.py's _discrepancies_numpy, element for element.
 * A list of another length, or an item that is no number, raises (TypeError, ValueError): the caller then takes
 * the numpy path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>

#define SATURATED 0.0625 /* statistics.SATURATED, 2 ** -4 (checked by the tests) */

/* The items of list ``values`` as doubles (PyMem_Free it), or NULL with an exception set. */
static double *doubles(PyObject *values, Py_ssize_t expected, const char *what) {
    if (!PyList_Check(values) || PyList_GET_SIZE(values) != expected) {
        PyErr_Format(PyExc_ValueError, "%s: a list of %zd numbers expected", what, expected);
        return NULL;
    }
    double *out = PyMem_Malloc(sizeof(double) * (expected ? expected : 1));
    if (out == NULL)
        return (double *)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < expected; i++) {
        PyObject *item = PyList_GET_ITEM(values, i);
        out[i] = PyFloat_CheckExact(item) ? PyFloat_AS_DOUBLE(item) : PyFloat_AsDouble(item);
        if (out[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

/* A new list of n floats from ``values``, or NULL. */
static PyObject *float_list(const double *values, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyFloat_FromDouble(values[i]);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *metrics(PyObject *self, PyObject *args) {
    PyObject *target_list, *bench_list;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &target_list, &PyList_Type, &bench_list))
        return NULL;
    Py_ssize_t size = PyList_GET_SIZE(target_list);
    if (size % 4)
        return PyErr_Format(PyExc_ValueError, "target: 4 numbers per row expected, got %zd", size);
    Py_ssize_t rows = size / 4;
    double *a = doubles(target_list, size, "target"), *b = a ? doubles(bench_list, size, "bench") : NULL;
    double *columns = b ? PyMem_Malloc(sizeof(double) * 8 * (rows ? rows : 1)) : NULL;
    PyObject *result = NULL;
    if (b != NULL && columns == NULL)
        PyErr_NoMemory();
    if (columns != NULL) {
        for (Py_ssize_t r = 0; r < rows; r++) {
            for (int s = 0; s < 4; s++) {
                double x = a[4 * r + s], y = b[4 * r + s];
                int same = x == y || (isnan(x) && isnan(y));
                columns[(2 * s) * rows + r] = x == y ? 0.0 : x - y;
                columns[(2 * s + 1) * rows + r] = same ? 0.0 : (isnan(x) || isnan(y)) ? NAN
                                                  : y == 0.0 ? INFINITY : fabs((x - y) / y);
            }
        }
        result = PyTuple_New(8);
        for (int c = 0; result != NULL && c < 8; c++) {
            PyObject *column = float_list(columns + c * rows, rows);
            if (column == NULL)
                Py_CLEAR(result);
            else
                PyTuple_SET_ITEM(result, c, column);
        }
    }
    PyMem_Free(a);
    PyMem_Free(b);
    PyMem_Free(columns);
    return result;
}

static int saturated(double value, double big) {
    return isinf(value) || (big > 0.0 && fabs(value) >= SATURATED * big);
}

/* The larger of two numbers as numpy.maximum gives it (NaN when either is NaN). */
static double maximum(double x, double y) {
    return (isnan(x) || isnan(y)) ? NAN : (x > y ? x : y);
}

/* One row's discrepancy (a, b: its four statistics on each side). */
static double discrepancy(const double *a, const double *b, double count, double big_a, double big_b) {
    int kept[4], broken = 0, all_equal = 1;
    for (int s = 0; s < 4; s++) {
        double x = a[s], y = b[s];
        kept[s] = !((isnan(x) && isnan(y)) || (x == y && isinf(x))
                    || (saturated(x, big_a) && saturated(y, big_b) && (x > 0.0) == (y > 0.0)));
        broken |= kept[s] && !(isfinite(x) && isfinite(y));
        all_equal &= x == y;
    }
    if (all_equal)
        return 0.0;
    if (broken)
        return INFINITY;
    double magnitude = -INFINITY;
    for (int s = 0; s < 2; s++) {
        double extreme = kept[s] ? maximum(fabs(a[s]), fabs(b[s])) : 0.0;
        if (isnan(extreme) || extreme == INFINITY)  /* numpy.nan_to_num(posinf=0.0) */
            extreme = 0.0;
        magnitude = maximum(magnitude, extreme);
    }
    double rms = kept[3] ? b[3] / sqrt(count > 1.0 ? count : 1.0) : magnitude;
    double scales[4] = {magnitude, magnitude, rms, b[3]};
    double worst = -INFINITY;
    for (int s = 0; s < 4; s++) {
        double off = scales[s] > 0.0 ? fabs(a[s] - b[s]) / scales[s] : INFINITY;
        worst = maximum(worst, kept[s] && a[s] != b[s] ? off : 0.0);
    }
    return worst;
}

static PyObject *discrepancies(PyObject *self, PyObject *args) {
    PyObject *target_list, *bench_list, *count_list, *big_a_list, *big_b_list;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyList_Type, &target_list, &PyList_Type, &bench_list,
                          &PyList_Type, &count_list, &PyList_Type, &big_a_list, &PyList_Type, &big_b_list))
        return NULL;
    Py_ssize_t rows = PyList_GET_SIZE(count_list);
    double *a = doubles(target_list, 4 * rows, "target"), *b = a ? doubles(bench_list, 4 * rows, "bench") : NULL;
    double *count = b ? doubles(count_list, rows, "counts") : NULL;
    double *big_a = count ? doubles(big_a_list, rows, "target_big") : NULL;
    double *big_b = big_a ? doubles(big_b_list, rows, "bench_big") : NULL;
    double *worst = big_b ? PyMem_Malloc(sizeof(double) * (rows ? rows : 1)) : NULL;
    PyObject *result = NULL;
    if (big_b != NULL && worst == NULL)
        PyErr_NoMemory();
    if (worst != NULL) {
        for (Py_ssize_t r = 0; r < rows; r++)
            worst[r] = discrepancy(a + 4 * r, b + 4 * r, count[r], big_a[r], big_b[r]);
        result = float_list(worst, rows);
    }
    PyMem_Free(a);
    PyMem_Free(b);
    PyMem_Free(count);
    PyMem_Free(big_a);
    PyMem_Free(big_b);
    PyMem_Free(worst);
    return result;
}

static PyMethodDef methods[] = {
    {"metrics", metrics, METH_VARARGS, "metrics(target, bench): the eight metric columns, see the module's source"},
    {"discrepancies", discrepancies, METH_VARARGS,
     "discrepancies(target, bench, counts, target_big, bench_big): each row's discrepancy, see the module's source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stats", NULL, -1, methods};

PyMODINIT_FUNC PyInit__stats(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObject(m, "SATURATED", PyFloat_FromDouble(SATURATED)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
