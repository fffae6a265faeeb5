/* BM25's exhaustive top k in one compiled call: a query's kept impacts summed per row, the
 * rows that can make its top n picked and ordered (bm25_impacts.compiled, BENCHMARKS.md 40).
 *
 * top_sums(words, sums, order, n, single, allowed, below, prune, out_rows, out_values)
 *   words       the query words' kept impacts in query order (a repeated word repeated), each
 *               (rows: intp ascending, parts: float64, constant, largest part: negative where
 *               a part is, the rows' and the parts' addresses, their length): the arrays are
 *               read at those addresses, the tuple keeping them alive (BM25Retriever._impacts);
 *   sums        a zeroed float64 buffer of at least len(order) rows, left zeroed;
 *   order       each row's order key (int64): equal scores, the later row first;
 *   n, single   how many hits; whether the answer's dtype is float32;
 *   allowed     None, or a mask (bool) over the rows;
 *   below       SORTED_BELOW: with parts for fewer than below x rows, the rows met are
 *               followed, else every row is read;
 *   prune       0: every posting scored; else MaxScore may skip the long lists of words that
 *               cannot make a hit where the lists it scores, times (prune x words + 2), are
 *               fewer postings than all the query's (a binary search step against an add);
 *   out_rows, out_values   n slots each (intp, float64): the best rows, best first, and
 *               their float64 sums.
 * Returns how many rows score above 0, pass `allowed` and tie or beat the n-th best (in the
 * answer's dtype): more than n, ties at the n-th; fewer than n, fewer positive scores; and
 * whether MaxScore pruned. The first min(n, that) slots are filled. Each row's parts are
 * added in the order given (sums[r] + part, as np.add.at adds), and ranked as top_n_sparse
 * ranks: the same floats, the same hits. The GIL is released while it runs. */

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

/* The rows kept as candidates and the n best values so far (a min-heap): a row is kept where
 * it ties or beats the n-th best so far, so every row at or above the final n-th is kept. */
typedef struct {
    Candidate *kept;
    Py_ssize_t c, cap;
    double *heap;
    Py_ssize_t h, n;
    double floor; /* the n-th best so far (0 until there are n): a row below it is out */
} Picks;

static int picks_init(Picks *p, Py_ssize_t rows, Py_ssize_t n) {
    p->cap = rows < 4 * n + 64 ? rows : 4 * n + 64;
    if (p->cap < 1) p->cap = 1;
    p->kept = malloc((size_t)(p->cap + 1) * sizeof *p->kept);
    p->heap = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->heap);
    p->c = p->h = 0, p->n = n, p->floor = 0.0;
    return p->kept && p->heap ? 0 : -1;
}

/* Offer row r with its float64 sum v (key: v in the answer's dtype); -1 where memory ran out. */
static int offer(Picks *p, Py_ssize_t r, double v, double key, long long order) {
    if (key < p->floor || key <= 0.0 || p->n <= 0) return 0;
    if (p->h < p->n) {
        p->heap[p->h] = key;
        sift_up(p->heap, p->h++);
        if (p->h == p->n) p->floor = p->heap[0];
    } else if (key > p->floor) {
        p->heap[0] = key;
        sift_down(p->heap, p->n);
        p->floor = p->heap[0];
    }
    if (p->c >= p->cap) { /* room made: the rows now below the floor dropped, or more room */
        Py_ssize_t d = 0;
        for (Py_ssize_t x = 0; x < p->c; x++)
            if (p->kept[x].key >= p->floor) p->kept[d++] = p->kept[x];
        p->c = d;
        if (p->c > p->cap / 2) {
            Candidate *more = realloc(p->kept, (size_t)(2 * p->cap + 1) * sizeof *p->kept);
            if (!more) return -1;
            p->kept = more, p->cap *= 2;
        }
    }
    p->kept[p->c].key = key, p->kept[p->c].value = v, p->kept[p->c].order = order, p->kept[p->c].row = r;
    p->c++;
    return 0;
}

/* The rows at or above the n-th best, best first, into the out slots; how many there are. */
static Py_ssize_t picks_done(Picks *p, Py_ssize_t *out_rows, double *out_values) {
    Py_ssize_t k = 0;
    for (Py_ssize_t x = 0; x < p->c; x++)
        if (p->kept[x].key >= p->floor) p->kept[k++] = p->kept[x];
    qsort(p->kept, (size_t)k, sizeof *p->kept, ranked_first);
    for (Py_ssize_t x = 0; x < k && x < p->n; x++) out_rows[x] = p->kept[x].row, out_values[x] = p->kept[x].value;
    return k;
}

static void picks_free(Picks *p) { free(p->kept), free(p->heap); }

/* Where `row` is in at[:end] (ascending), or -1. */
static Py_ssize_t find(const Py_ssize_t *at, Py_ssize_t end, Py_ssize_t row) {
    Py_ssize_t lo = 0, hi = end;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (at[mid] < row) lo = mid + 1;
        else hi = mid;
    }
    return lo < end && at[lo] == row ? lo : -1;
}

#define SLACK (1.0 + 1e-9) /* a bound's headroom over the rounding of sums in another order */

/* MaxScore where it pays: the words whose bounds (their largest part, times their occurrences)
 * add up to less than a lower bound of the n-th best score cannot make a hit, nor a tie, on
 * their own; the rows of the other (essential) words are the candidates, each scored exactly
 * (its parts found by binary search, added in query order: the scatter's floats). The lower
 * bound of the n-th best score: the n-th best score of the rows of the word of largest bound,
 * scored whole. 1 where it ran, 0 where it does not pay or apply (the
 * caller scatters), -1 where memory ran out. */
static int pruned(const Py_ssize_t **at, const double **part, const Py_ssize_t *len, const double *top,
                  Py_ssize_t words, Py_ssize_t m, double *sums, const long long *order, Py_ssize_t total,
                  Py_ssize_t n, int single, const char *allowed, Py_ssize_t cost, Picks *picks) {
    if (words < 2 || n <= 0 || words > 64) return 0;
    Py_ssize_t unique[64], occurs[64], u = 0, first = -1;
    for (Py_ssize_t w = 0; w < words; w++) {
        if (top[w] < 0) return 0; /* a negative part: no bound */
        Py_ssize_t x = 0;
        while (x < u && at[unique[x]] != at[w]) x++;
        if (x == u) unique[u] = w, occurs[u++] = 0;
        occurs[x]++;
    }
    for (Py_ssize_t x = 1; x < u; x++) /* by bound, ascending */
        for (Py_ssize_t y = x; y > 0 && top[unique[y - 1]] > top[unique[y]]; y--) {
            Py_ssize_t t = unique[y], o = occurs[y];
            unique[y] = unique[y - 1], occurs[y] = occurs[y - 1], unique[y - 1] = t, occurs[y - 1] = o;
        }
    first = unique[u - 1];
    if (len[first] * (words * cost + 2) > m) return 0; /* the largest bound on a long list: little to skip */
    Picks best; /* the n-th best score of that word's rows: each scored whole */
    if (picks_init(&best, len[first], n) < 0) {
        picks_free(&best);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len[first]; i++) {
        Py_ssize_t r = at[first][i];
        if ((size_t)r >= (size_t)total) {
            picks_free(&best);
            return -2;
        }
        if (allowed && !allowed[r]) continue;
        double v = 0.0;
        for (Py_ssize_t w = 0; w < words; w++) {
            Py_ssize_t at_w = at[w] == at[first] ? i : find(at[w], len[w], r);
            if (at_w >= 0) v += part[w][at_w];
        }
        if (offer(&best, r, v, single ? (double)(float)v : v, 0) < 0) {
            picks_free(&best);
            return -1;
        }
    }
    double floor = best.h == n ? best.floor : 0.0;
    picks_free(&best);
    if (floor <= 0.0) return 0;
    double rest = 0.0;
    Py_ssize_t cut = 0; /* unique[:cut] are not essential */
    for (; cut < u - 1; cut++) {
        double more = (rest + top[unique[cut]] * (double)occurs[cut]) * SLACK;
        if (!((single ? (double)(float)more : more) < floor)) break;
        rest += top[unique[cut]] * (double)occurs[cut];
    }
    Py_ssize_t essential = 0;
    for (Py_ssize_t x = cut; x < u; x++) essential += len[unique[x]];
    if (cut == 0 || essential * (words * cost + 2) >= m) return 0; /* the scatter costs less */
    Py_ssize_t *met = malloc((size_t)(essential + 1) * sizeof *met), t = 0;
    if (!met) return -1;
    for (Py_ssize_t x = cut; x < u; x++) /* the candidates: each essential row once */
        for (Py_ssize_t i = 0; i < len[unique[x]]; i++) {
            Py_ssize_t r = at[unique[x]][i];
            if ((size_t)r >= (size_t)total) {
                for (Py_ssize_t j = 0; j < t; j++) sums[met[j]] = 0.0;
                free(met);
                return -2;
            }
            met[t] = r;
            t += sums[r] == 0.0;
            sums[r] = 1.0; /* (a mark, cleared below) */
        }
    int failed = 0;
    for (Py_ssize_t j = 0; j < t; j++) {
        Py_ssize_t r = met[j];
        sums[r] = 0.0;
        if (failed || (allowed && !allowed[r])) continue;
        double v = 0.0;
        for (Py_ssize_t w = 0; w < words; w++) {
            Py_ssize_t at_w = find(at[w], len[w], r);
            if (at_w >= 0) v += part[w][at_w];
        }
        if (v != 0.0 && offer(picks, r, v, single ? (double)(float)v : v, order[r]) < 0) failed = 1;
    }
    free(met);
    return failed ? -1 : 1;
}

/* The kernel proper, without the GIL: the number of rows at or above the n-th best; -1 where
 * memory ran out, -2 for a row outside 0..total. */
static Py_ssize_t top(const Py_ssize_t **at, const double **part, const Py_ssize_t *len, const double *tops,
                      Py_ssize_t words, double *sums, const long long *order, Py_ssize_t total, Py_ssize_t n,
                      int single, const char *allowed, double below, Py_ssize_t prune, Py_ssize_t *out_rows,
                      double *out_values, int *was_pruned) {
    Py_ssize_t m = 0, t = 0;
    for (Py_ssize_t w = 0; w < words; w++) m += len[w];
    Picks picks;
    if (picks_init(&picks, m < total ? m : total, n) < 0) {
        picks_free(&picks);
        return -1;
    }
    int done = prune > 0 ? pruned(at, part, len, tops, words, m, sums, order, total, n, single, allowed, prune, &picks) : 0;
    if (done < 0) {
        picks_free(&picks);
        return done;
    }
    *was_pruned = done;
    if (!done) {
        int scan = !((double)m < (double)total * below); /* parts for many rows: every row read */
        Py_ssize_t *met = NULL;
        if (scan) {
            for (Py_ssize_t w = 0; w < words; w++)
                for (Py_ssize_t i = 0; i < len[w]; i++) {
                    if ((size_t)at[w][i] >= (size_t)total) {
                        picks_free(&picks);
                        return -2;
                    }
                    sums[at[w][i]] += part[w][i];
                }
            t = total;
        } else {
            if (!(met = malloc((size_t)(m + 1) * sizeof *met))) {
                picks_free(&picks);
                return -1;
            }
            for (Py_ssize_t w = 0; w < words; w++)
                for (Py_ssize_t i = 0; i < len[w]; i++) {
                    Py_ssize_t r = at[w][i];
                    if ((size_t)r >= (size_t)total) {
                        free(met), picks_free(&picks);
                        return -2;
                    }
                    met[t] = r;          /* kept where the row is new, without a branch (a row */
                    t += sums[r] == 0.0; /* whose sum is back at 0 is met again: read once below) */
                    sums[r] += part[w][i];
                }
        }
        for (Py_ssize_t j = 0; j < t; j++) {
            Py_ssize_t r = scan ? j : met[j];
            double v = sums[r];
            sums[r] = 0.0;
            if (allowed && !allowed[r]) continue;
            if (offer(&picks, r, v, single ? (double)(float)v : v, order[r]) < 0) {
                free(met), picks_free(&picks);
                return -1;
            }
        }
        free(met);
    }
    Py_ssize_t k = picks_done(&picks, out_rows, out_values);
    picks_free(&picks);
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

static PyObject *top_sums(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *words_o, *sums_o, *order_o, *allowed_o, *rows_o, *values_o;
    Py_ssize_t n, prune;
    int single;
    double below;
    if (!PyArg_ParseTuple(args, "O!OOnpOdnOO", &PyList_Type, &words_o, &sums_o, &order_o, &n, &single, &allowed_o,
                          &below, &prune, &rows_o, &values_o))
        return NULL;
    Py_buffer sums, order, allowed = {0}, rows, values;
    int got = 0; /* of those, held in this order */
    Py_ssize_t words = PyList_GET_SIZE(words_o);
    const Py_ssize_t **at = PyMem_Malloc((size_t)(words + 1) * sizeof *at);
    const double **part = PyMem_Malloc((size_t)(words + 1) * sizeof *part);
    Py_ssize_t *len = PyMem_Malloc((size_t)(words + 1) * sizeof *len);
    double *tops = PyMem_Malloc((size_t)(words + 1) * sizeof *tops);
    PyObject *result = NULL;
    if (!at || !part || !len || !tops) {
        PyErr_NoMemory();
        goto done;
    }
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
    Py_ssize_t total = order.len / (Py_ssize_t)sizeof(long long);
    if (sums.len / (Py_ssize_t)sizeof(double) < total || rows.len / (Py_ssize_t)sizeof(Py_ssize_t) < n ||
        values.len / (Py_ssize_t)sizeof(double) < n || (allowed_o != Py_None && allowed.len < total)) {
        PyErr_SetString(PyExc_ValueError, "top_sums: arrays of mismatched lengths");
        goto done;
    }
    for (Py_ssize_t w = 0; w < words; w++) {
        PyObject *word = PyList_GET_ITEM(words_o, w);
        if (!PyTuple_Check(word) || PyTuple_GET_SIZE(word) < 7) {
            PyErr_SetString(PyExc_TypeError,
                            "top_sums: words are (rows, parts, constant, largest part, rows' address, parts' "
                            "address, length) tuples");
            goto done;
        }
        tops[w] = PyFloat_AsDouble(PyTuple_GET_ITEM(word, 3));
        at[w] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(word, 4));
        part[w] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(word, 5));
        len[w] = PyLong_AsSsize_t(PyTuple_GET_ITEM(word, 6));
        if (PyErr_Occurred()) goto done;
        if (!at[w] || !part[w] || len[w] < 0) {
            PyErr_SetString(PyExc_ValueError, "top_sums: a word without its arrays");
            goto done;
        }
    }
    Py_ssize_t k;
    int was_pruned = 0;
    Py_BEGIN_ALLOW_THREADS
    k = top(at, part, len, tops, words, sums.buf, order.buf, total, n, single,
            allowed_o != Py_None ? allowed.buf : NULL, below, prune, rows.buf, values.buf, &was_pruned);
    Py_END_ALLOW_THREADS
    if (k == -2)
        PyErr_SetString(PyExc_ValueError, "top_sums: a row outside the order keys (sums left dirty)");
    else
        result = k < 0 ? PyErr_NoMemory() : Py_BuildValue("(nO)", k, was_pruned ? Py_True : Py_False);
done:
    Py_buffer *mine[] = {&sums, &order, &rows, &values, &allowed};
    for (int i = 0; i < got; i++) PyBuffer_Release(mine[i]);
    PyMem_Free(at), PyMem_Free(part), PyMem_Free(len), PyMem_Free(tops);
    return result;
}

static PyMethodDef methods[] = {
    {"top_sums", top_sums, METH_VARARGS, "A BM25 query's top n rows from its kept impacts (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25_kernel", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bm25_kernel(void) { return PyModule_Create(&module); }
