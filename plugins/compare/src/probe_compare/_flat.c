/* probe_compare.columnar._flat in C: the (key, statistics) of a flat entry, None for any other.
 *
 * configure(sections, tensor_keys, argument_keys)
 *   columnar.py's constants, given once at import: the section names (SECTIONS' first fields, in order),
 *   TENSOR_KEYS (8 names) and ARGUMENT_KEYS (2 names).
 * flat(data) -> (key, statistics) | None
 *   data: an entry's dump.json value, a dict. The result is the Python function's, element for element:
 *   for each non-empty section holding a list (or a dict: its keys' tuple follows the section name) of
 *   dicts whose keys equal tensor_keys or argument_keys in order, the key gets the section name then, per
 *   leaf, (type, dtype, tuple(shape), requires_grad) or (type, type(value), value), and the statistics get
 *   Max, Min, Mean, Norm (the value four times for an argument). Classes are checked exactly, as the Python
 *   checks them: a bool is no number, a subclass of list is no shape. None as soon as anything else is met.
 *   The key may hold unhashable values (a list as dtype): the caller's dict lookup raises TypeError then.
 * leaves(name, signature, stats, leaf_type) -> list
 *   columnar._leaves_python's result, element for element: the leaves of a compact form, each a leaf_type (the
 *   TensorMeta named tuple) built from its signature item (suffix, role, type, dtype, shape, requires_grad,
 *   argument) and its four statistics (the first one four times for an argument). signature and stats must be
 *   tuples, each item a tuple of 7, stats 4 numbers per item or more: a TypeError or ValueError otherwise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define TENSOR_FIELDS 8
#define ARGUMENT_FIELDS 2
#define INLINE_ITEMS 64

/* The names a leaf's keys must equal, in order (a tuple of str), and the last key objects found equal to each
 * (an entry's keys are mostly the same few objects: json and msgspec reuse the text of a key they met). */
typedef struct {
    PyObject *names;
    PyObject *seen[TENSOR_FIELDS];
} Fields;

static PyObject *sections;  /* a tuple of str, set by configure() */
static Fields tensor_fields, argument_fields;

/* A growing array of new references, on the stack up to INLINE_ITEMS: what becomes a tuple of the result. */
typedef struct {
    PyObject **at;
    Py_ssize_t count, size;
    PyObject *inline_items[INLINE_ITEMS];
} Items;

static void items_init(Items *items) {
    items->at = items->inline_items;
    items->count = 0;
    items->size = INLINE_ITEMS;
}

static int items_add(Items *items, PyObject *value) {
    if (items->count == items->size) {
        Py_ssize_t size = 2 * items->size;
        PyObject **at = PyMem_Malloc(size * sizeof(PyObject *));
        if (at == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(at, items->at, items->count * sizeof(PyObject *));
        if (items->at != items->inline_items)
            PyMem_Free(items->at);
        items->at = at;
        items->size = size;
    }
    items->at[items->count++] = Py_NewRef(value);
    return 0;
}

static void items_clear(Items *items) {
    while (items->count > 0)
        Py_DECREF(items->at[--items->count]);
    if (items->at != items->inline_items)
        PyMem_Free(items->at);
    items->at = items->inline_items;
}

/* The items as a new tuple (they move into it); NULL on an error. */
static PyObject *items_tuple(Items *items) {
    PyObject *tuple = PyTuple_New(items->count);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < items->count; i++)
        PyTuple_SET_ITEM(tuple, i, items->at[i]);
    items->count = 0;
    return tuple;
}

static int is_number(PyObject *value) {
    return PyFloat_CheckExact(value) || PyLong_CheckExact(value);
}

/* Whether key i of a leaf, name, equals fields' name i as Python compares them (an exact str by its characters,
 * without a call): 1, 0, or -1 on an error. */
static int same_name(PyObject *name, Fields *fields, Py_ssize_t i) {
    PyObject *want = PyTuple_GET_ITEM(fields->names, i);
    if (name == want || name == fields->seen[i])
        return 1;
    if (!PyUnicode_CheckExact(name)) {
        Py_INCREF(name);
        int same = PyObject_RichCompareBool(name, want, Py_EQ);
        Py_DECREF(name);
        return same;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(name) < 0)  /* a str of the legacy API, before 3.12 */
        return -1;
#endif
    Py_ssize_t length = PyUnicode_GET_LENGTH(name);
    int kind = PyUnicode_KIND(name);
    if (length != PyUnicode_GET_LENGTH(want) || kind != PyUnicode_KIND(want)
        || memcmp(PyUnicode_DATA(name), PyUnicode_DATA(want), (size_t)length * kind) != 0)
        return 0;
    Py_XSETREF(fields->seen[i], Py_NewRef(name));
    return 1;
}

/* Whether item's keys are, in order, fields' names (1), not (0), or an error (-1); its values go to values (new
 * references, one per name) when they are. */
static int fields_match(PyObject *item, Fields *fields, PyObject **values) {
    Py_ssize_t pos = 0, i = 0, n = PyTuple_GET_SIZE(fields->names);
    PyObject *name, *value;
    while (i < n && PyDict_Next(item, &pos, &name, &value)) {
        values[i++] = Py_NewRef(value);
        int same = same_name(name, fields, i - 1);
        if (same != 1) {
            while (i > 0)
                Py_DECREF(values[--i]);
            return same;
        }
    }
    if (i < n) {  /* the dict shrank while its keys were compared */
        while (i > 0)
            Py_DECREF(values[--i]);
        return 0;
    }
    return 1;
}

/* Reads one leaf into key and stats: 1 when it is a flat leaf, 0 when not (the entry has no flat key), -1 on
 * an error. */
static int read_leaf(PyObject *item, Items *key, Items *stats) {
    PyObject *values[TENSOR_FIELDS], *leaf = NULL;
    Py_ssize_t n = PyDict_GET_SIZE(item), count = 0;
    int found, result = 0;
    if (n == TENSOR_FIELDS) {
        if ((found = fields_match(item, &tensor_fields, values)) != 1)
            return found;
        count = TENSOR_FIELDS;
        PyObject *shape = values[2], *grad = values[7];
        if (!PyList_CheckExact(shape) || (grad != Py_None && !PyBool_Check(grad)))
            goto done;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(shape); i++)
            if (!PyLong_CheckExact(PyList_GET_ITEM(shape, i)))
                goto done;
        for (int i = 3; i < 7; i++)
            if (!is_number(values[i]))
                goto done;
        PyObject *sizes = PyList_AsTuple(shape);
        if (sizes == NULL)
            goto fail;
        leaf = PyTuple_Pack(4, values[0], values[1], sizes, grad);
        Py_DECREF(sizes);
        if (leaf == NULL || items_add(key, leaf) < 0)
            goto fail;
        for (int i = 3; i < 7; i++)
            if (items_add(stats, values[i]) < 0)
                goto fail;
    } else if (n == ARGUMENT_FIELDS) {
        if ((found = fields_match(item, &argument_fields, values)) != 1)
            return found;
        count = ARGUMENT_FIELDS;
        PyObject *number = values[1];
        if (!is_number(number))
            goto done;
        leaf = PyTuple_Pack(3, values[0], (PyObject *)Py_TYPE(number), number);
        if (leaf == NULL || items_add(key, leaf) < 0)
            goto fail;
        for (int i = 0; i < 4; i++)
            if (items_add(stats, number) < 0)
                goto fail;
    } else {
        return 0;
    }
    result = 1;
    goto done;
fail:
    result = -1;
done:
    Py_XDECREF(leaf);
    while (count > 0)
        Py_DECREF(values[--count]);
    return result;
}

/* Reads one section's value (list or dict) into key and stats: as read_leaf. */
static int read_section(PyObject *section, PyObject *value, Items *key, Items *stats) {
    int is_dict = PyDict_CheckExact(value);
    if (!is_dict && !PyList_CheckExact(value))
        return 0;
    if ((is_dict ? PyDict_GET_SIZE(value) : PyList_GET_SIZE(value)) == 0)
        return 1;
    if (items_add(key, section) < 0)
        return -1;
    PyObject *items = is_dict ? PyDict_Values(value) : Py_NewRef(value);  /* a list: a dict's values, copied */
    if (items == NULL)
        return -1;
    int result = 1;
    if (is_dict) {
        PyObject *names = PySequence_Tuple(value);
        if (names == NULL || items_add(key, names) < 0)
            result = -1;
        Py_XDECREF(names);
    }
    for (Py_ssize_t i = 0; result == 1 && i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyDict_CheckExact(item)) {
            result = 0;
            break;
        }
        Py_INCREF(item);
        result = read_leaf(item, key, stats);
        Py_DECREF(item);
    }
    Py_DECREF(items);
    return result;
}

static PyObject *flat(PyObject *self, PyObject *data) {
    if (sections == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "probe_compare._flat: configure() was not called");
        return NULL;
    }
    if (!PyDict_Check(data)) {
        PyErr_Format(PyExc_TypeError, "flat() takes an entry's dict, not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    Items key, stats;
    items_init(&key);
    items_init(&stats);
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sections); i++) {
        PyObject *section = PyTuple_GET_ITEM(sections, i);
        PyObject *value = PyDict_GetItemWithError(data, section);
        if (value == NULL) {
            if (PyErr_Occurred())
                goto end;
            continue;
        }
        Py_INCREF(value);
        int read = read_section(section, value, &key, &stats);
        Py_DECREF(value);
        if (read < 0)
            goto end;
        if (read == 0) {
            result = Py_NewRef(Py_None);
            goto end;
        }
    }
    PyObject *key_tuple = items_tuple(&key), *stats_tuple = key_tuple ? items_tuple(&stats) : NULL;
    if (key_tuple != NULL && stats_tuple != NULL)
        result = PyTuple_Pack(2, key_tuple, stats_tuple);
    Py_XDECREF(key_tuple);
    Py_XDECREF(stats_tuple);
end:
    items_clear(&key);
    items_clear(&stats);
    return result;
}

/* Whether names is a tuple of str (size of them, when size is not -1); else a ValueError saying what it must be. */
static int names_tuple(PyObject *names, Py_ssize_t size, const char *what) {
    int all_str = PyTuple_CheckExact(names);
    for (Py_ssize_t i = 0; all_str && i < PyTuple_GET_SIZE(names); i++)
        all_str = PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i));
    if (all_str && (size < 0 || PyTuple_GET_SIZE(names) == size))
        return 1;
    if (size < 0)
        PyErr_Format(PyExc_ValueError, "configure(): %s must be a tuple of names", what);
    else
        PyErr_Format(PyExc_ValueError, "configure(): %s must be a tuple of %zd names", what, size);
    return 0;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *new_sections, *new_tensor, *new_argument;
    if (!PyArg_ParseTuple(args, "OOO:configure", &new_sections, &new_tensor, &new_argument))
        return NULL;
    if (!names_tuple(new_sections, -1, "sections") || !names_tuple(new_tensor, TENSOR_FIELDS, "tensor_keys")
        || !names_tuple(new_argument, ARGUMENT_FIELDS, "argument_keys"))
        return NULL;
    Py_XSETREF(sections, Py_NewRef(new_sections));
    Fields *all[] = {&tensor_fields, &argument_fields};
    PyObject *names[] = {new_tensor, new_argument};
    for (int f = 0; f < 2; f++) {
        Py_XSETREF(all[f]->names, Py_NewRef(names[f]));
        for (int i = 0; i < TENSOR_FIELDS; i++)
            Py_CLEAR(all[f]->seen[i]);
    }
    Py_RETURN_NONE;
}

#define LEAF_FIELDS 15  /* TensorMeta's fields */

static PyObject *leaves(PyObject *self, PyObject *args) {
    PyObject *name, *signature, *stats;
    PyTypeObject *leaf_type;
    if (!PyArg_ParseTuple(args, "UO!O!O!:leaves", &name, &PyTuple_Type, &signature, &PyTuple_Type, &stats,
                          &PyType_Type, &leaf_type))
        return NULL;
    if (!PyType_IsSubtype(leaf_type, &PyTuple_Type) || leaf_type->tp_itemsize != sizeof(PyObject *))
        return PyErr_Format(PyExc_TypeError, "leaves(): leaf_type must be a named tuple");
    Py_ssize_t count = PyTuple_GET_SIZE(signature);
    if (PyTuple_GET_SIZE(stats) < 4 * count)
        return PyErr_Format(PyExc_ValueError, "leaves(): %zd statistics for %zd leaves", PyTuple_GET_SIZE(stats), count);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *desc = PyTuple_GET_ITEM(signature, i);
        if (!PyTuple_CheckExact(desc) || PyTuple_GET_SIZE(desc) != 7) {
            PyErr_Format(PyExc_TypeError, "leaves(): signature item %zd is no tuple of 7", i);
            Py_CLEAR(out);
            break;
        }
        PyObject *leaf = leaf_type->tp_alloc(leaf_type, LEAF_FIELDS);
        PyObject *full = leaf != NULL ? PyUnicode_Concat(name, PyTuple_GET_ITEM(desc, 0)) : NULL;
        if (full == NULL) {
            Py_XDECREF(leaf);
            Py_CLEAR(out);
            break;
        }
        int tensor = PyTuple_GET_ITEM(desc, 6) == Py_None;
        PyObject **at = &PyTuple_GET_ITEM(stats, 4 * i);
        PyObject *items[LEAF_FIELDS] = {
            full, PyTuple_GET_ITEM(desc, 1), PyTuple_GET_ITEM(desc, 2), PyTuple_GET_ITEM(desc, 3),
            PyTuple_GET_ITEM(desc, 4), at[0], tensor ? at[1] : at[0], tensor ? at[2] : at[0],
            tensor ? at[3] : at[0], PyTuple_GET_ITEM(desc, 5), Py_None, Py_None, tensor ? Py_None : at[0],
            tensor ? Py_True : Py_False, Py_None};
        for (int f = 0; f < LEAF_FIELDS; f++)
            PyTuple_SET_ITEM(leaf, f, f ? Py_NewRef(items[f]) : full);
        PyList_SET_ITEM(out, i, leaf);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"leaves", leaves, METH_VARARGS, "leaves(name, signature, stats, leaf_type) -> list: columnar._leaves_python's "
                                     "result, see the module's source"},
    {"configure", configure, METH_VARARGS, "configure(sections, tensor_keys, argument_keys): see the module's source"},
    {"flat", flat, METH_O, "flat(data) -> (key, statistics) | None: columnar._flat's result, see the module's source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_flat", NULL, -1, methods};

PyMODINIT_FUNC PyInit__flat(void) {
    return PyModule_Create(&module);
}
