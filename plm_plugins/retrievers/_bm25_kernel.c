/* BM25's exhaustive top k in one compiled call: a query's kept impacts summed per row, the
 * rows that can make its top n picked and ordered (bm25_impacts.compiled, BENCHMARKS.md 40).
 *
 * top_sums(at, part, bounds, sums, order, n, single, allowed, below, out_rows, out_values)
 *   at, part    the kept impacts' rows (intp) and parts (float64): a query word's at each
 *               (start, end) of `bounds`, a list in query order (a repeated word repeated);
 *   sums        a zeroed float64 buffer of at least len(order) rows, left zeroed;
 *   order       each row's order key (int64): equal scores, the later row first;
 *   n, single   how many hits; whether the answer's dtype is float32;
 *   allowed     None, or a mask (bool) over the rows;
 *   below       SORTED_BELOW: with parts for fewer than below x rows, the rows met are
 *               followed, else every row is read;
 *   out_rows, out_values   n slots each (intp, float64): the best rows, best first, and
 *               their float64 sums.
 * Returns how many rows score above 0, pass `allowed` and tie or beat the n-th best (in the
 * answer's dtype): more than n, ties at the n-th; fewer than n, fewer positive scores. The
 * first min(n, that) slots are filled. Each row's parts are added in the order given
 * (sums[r] + part, as np.add.at adds), and ranked as top_n_sparse ranks: the same floats,
 * the same hits. The GIL is released while it runs. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

typedef struct {
    double key; /* the sum in the answer's dtype */
    double value;
    long long order;
    Py_ssize_t row;
} Candidate;

static int ranked_first(const void *x, const void *y) {
    const Candidate *a = x, *b = y; /* best first: key, then order key, then row, descending */
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->order != b->order) return a->order > b->order ? -1 : 1;
    return (a->row > b->row) ? -1 : (a->row < b->row);
}

static void sift_down(double *heap, Py_ssize_t size) {
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t low = i, left = 2 * i + 1;
        if (left < size && heap[left] < heap[low]) low = left;
        if (left + 1 < size && heap[left + 1] < heap[low]) low = left + 1;
        if (low == i) return;
        double t = heap[i];
        heap[i] = heap[low];
        heap[low] = t;
        i = low;
    }
}

static void sift_up(double *heap, Py_ssize_t i) {
    while (i && heap[(i - 1) / 2] > heap[i]) {
        double t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* The kernel proper, without the GIL: -1 where memory ran out, -2 for a row outside 0..total. */
static Py_ssize_t top(const Py_ssize_t *at, const double *part, const Py_ssize_t *bounds, Py_ssize_t words,
                      double *sums, const long long *order, Py_ssize_t total, Py_ssize_t n, int single,
                      const char *allowed, double below, Py_ssize_t *out_rows, double *out_values) {
    Py_ssize_t m = 0, t = 0, h = 0, c = 0, cap, k = 0;
    for (Py_ssize_t w = 0; w < words; w++) m += bounds[2 * w + 1] - bounds[2 * w];
    int scan = !((double)m < (double)total * below); /* parts for many rows: every row read */
    Py_ssize_t *met = NULL;
    if (scan) {
        for (Py_ssize_t w = 0; w < words; w++)
            for (Py_ssize_t i = bounds[2 * w]; i < bounds[2 * w + 1]; i++) {
                if ((size_t)at[i] >= (size_t)total) return -2;
                sums[at[i]] += part[i];
            }
        t = total;
    } else {
        if (!(met = malloc((size_t)(m + 1) * sizeof *met))) return -1;
        for (Py_ssize_t w = 0; w < words; w++)
            for (Py_ssize_t i = bounds[2 * w]; i < bounds[2 * w + 1]; i++) {
                Py_ssize_t r = at[i];
                if ((size_t)r >= (size_t)total) {
                    free(met);
                    return -2;
                }
                met[t] = r;          /* kept where the row is new, without a branch (a row */
                t += sums[r] == 0.0; /* whose sum is back at 0 is met again: read once below) */
                sums[r] += part[i];
            }
    }
    cap = (t < 4 * n + 64) ? t : 4 * n + 64;
    Candidate *kept = malloc((size_t)(cap + 1) * sizeof *kept);
    double *heap = malloc((size_t)(n > 0 ? n : 1) * sizeof *heap); /* the n best so far, a min-heap */
    if (!kept || !heap) {
        free(met), free(kept), free(heap);
        return -1;
    }
    double floor = 0.0; /* the n-th best so far (0 until there are n): a row below it is out */
    for (Py_ssize_t j = 0; j < t; j++) {
        Py_ssize_t r = scan ? j : met[j];
        double v = sums[r];
        sums[r] = 0.0;
        double key = single ? (double)(float)v : v;
        if (key < floor || key <= 0.0 || n <= 0 || (allowed && !allowed[r])) continue;
        if (h < n) {
            heap[h] = key;
            sift_up(heap, h++);
            if (h == n) floor = heap[0];
        } else if (key > floor) {
            heap[0] = key;
            sift_down(heap, n);
            floor = heap[0];
        }
        if (c == cap) { /* room made: the rows now below the floor dropped, or more room */
            Py_ssize_t d = 0;
            for (Py_ssize_t x = 0; x < c; x++)
                if (kept[x].key >= floor) kept[d++] = kept[x];
            c = d;
            if (c > cap / 2) {
                Candidate *more = realloc(kept, (size_t)(2 * cap + 1) * sizeof *kept);
                if (!more) {
                    free(met), free(kept), free(heap);
                    return -1;
                }
                kept = more, cap *= 2;
            }
        }
        kept[c].key = key, kept[c].value = v, kept[c].order = order[r], kept[c].row = r;
        c++;
    }
    for (Py_ssize_t x = 0; x < c; x++)
        if (kept[x].key >= floor) kept[k++] = kept[x];
    qsort(kept, (size_t)k, sizeof *kept, ranked_first);
    for (Py_ssize_t x = 0; x < k && x < n; x++) out_rows[x] = kept[x].row, out_values[x] = kept[x].value;
    free(met), free(kept), free(heap);
    return k;
}

static int buffer_of(PyObject *obj, Py_buffer *view, const char *name, Py_ssize_t itemsize, int writable) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes, not %zd", name, view->itemsize, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *top_sums(PyObject *self, PyObject *args) {
    PyObject *at_o, *part_o, *bounds_o, *sums_o, *order_o, *allowed_o, *rows_o, *values_o;
    Py_ssize_t n;
    int single;
    double below;
    if (!PyArg_ParseTuple(args, "OOO!OOnpOdOO", &at_o, &part_o, &PyList_Type, &bounds_o, &sums_o, &order_o, &n,
                          &single, &allowed_o, &below, &rows_o, &values_o))
        return NULL;
    Py_buffer at, part, sums, order, allowed = {0}, rows, values;
    int got = 0; /* buffers held, in this order */
    PyObject *result = NULL;
    Py_ssize_t words = PyList_GET_SIZE(bounds_o), *bounds = NULL;
    if (buffer_of(at_o, &at, "at", sizeof(Py_ssize_t), 0) < 0) goto done;
    got++;
    if (buffer_of(part_o, &part, "part", sizeof(double), 0) < 0) goto done;
    got++;
    if (buffer_of(sums_o, &sums, "sums", sizeof(double), 1) < 0) goto done;
    got++;
    if (buffer_of(order_o, &order, "order", sizeof(long long), 0) < 0) goto done;
    got++;
    if (buffer_of(rows_o, &rows, "out_rows", sizeof(Py_ssize_t), 1) < 0) goto done;
    got++;
    if (buffer_of(values_o, &values, "out_values", sizeof(double), 1) < 0) goto done;
    got++;
    if (allowed_o != Py_None) {
        if (buffer_of(allowed_o, &allowed, "allowed", 1, 0) < 0) goto done;
        got++;
    }
    Py_ssize_t total = order.len / (Py_ssize_t)sizeof(long long), n_at = at.len / (Py_ssize_t)sizeof(Py_ssize_t);
    if (part.len != at.len || sums.len / (Py_ssize_t)sizeof(double) < total ||
        rows.len / (Py_ssize_t)sizeof(Py_ssize_t) < n || values.len / (Py_ssize_t)sizeof(double) < n ||
        (allowed_o != Py_None && allowed.len < total)) {
        PyErr_SetString(PyExc_ValueError, "top_sums: arrays of mismatched lengths");
        goto done;
    }
    if (!(bounds = PyMem_Malloc((size_t)(2 * words + 1) * sizeof *bounds))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t w = 0; w < words; w++) {
        PyObject *span = PyList_GET_ITEM(bounds_o, w);
        if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) < 2) {
            PyErr_SetString(PyExc_TypeError, "top_sums: bounds are (start, end, ...) tuples");
            goto done;
        }
        bounds[2 * w] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
        bounds[2 * w + 1] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
        if (PyErr_Occurred()) goto done;
        if (bounds[2 * w] < 0 || bounds[2 * w] > bounds[2 * w + 1] || bounds[2 * w + 1] > n_at) {
            PyErr_SetString(PyExc_ValueError, "top_sums: a span outside the impacts");
            goto done;
        }
    }
    Py_ssize_t k;
    Py_BEGIN_ALLOW_THREADS
    k = top(at.buf, part.buf, bounds, words, sums.buf, order.buf, total, n, single,
            allowed_o != Py_None ? allowed.buf : NULL, below, rows.buf, values.buf);
    Py_END_ALLOW_THREADS
    if (k == -2)
        PyErr_SetString(PyExc_ValueError, "top_sums: a row outside the order keys (sums left dirty)");
    else
        result = k < 0 ? PyErr_NoMemory() : PyLong_FromSsize_t(k);
done:
    PyMem_Free(bounds);
    Py_buffer *held[] = {&at, &part, &sums, &order, &rows, &values, &allowed};
    for (int i = 0; i < got; i++) PyBuffer_Release(held[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"top_sums", top_sums, METH_VARARGS, "A BM25 query's top n rows from its kept impacts (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__bm25_kernel(void) { return PyModule_Create(&module); }
