/* BM25's top k in one compiled call: a query's parts summed per row, the rows that can make
 * its top n picked and ordered (bm25_impacts.compiled, BENCHMARKS.md 40-41).
 *
 * top_sums(words, sums, order, n, single, allowed, below, out_rows, out_values, scoring)
 *   words       the query words in query order (a repeated word repeated), each either
 *               - its kept impacts (rows: intp ascending, parts: float64, constant, the rows'
 *                 and the parts' addresses, their length): read at those addresses, the
 *                 tuple keeping them alive (BM25Retriever._impacts); or
 *               - its postings, scored here (idf, live rows, slices, ..., blocks or none): a
 *                 slice per segment holding the word (rows' address: int32 local rows
 *                 ascending, term frequencies' address, whether those are float64 (else
 *                 int32), how many, the segment's first global row, its deleted rows' mask's
 *                 address or 0, its lengths' address, its row count, whether those lengths
 *                 are int32 (else float64)); each live row's part is idf x tfc(tf,
 *                 norm(length)) with bm25s's expressions (`scoring`), the floats
 *                 BM25Retriever._impacts makes; with its blocks, a tuple a slice (blocks'
 *                 address: int32 ascending, their postings' starts: int64, one more, largest
 *                 tfs and shortest lengths: float64, how many), for block-max (`blockmax`);
 *   sums        a zeroed float64 buffer of at least len(order) rows, left zeroed;
 *   order       each row's order key (int64): equal scores, the later row first;
 *   n, single   how many hits; whether the answer's dtype is float32;
 *   allowed     None, or a mask (bool) over the rows;
 *   below       SORTED_BELOW: with parts for fewer than below x rows, the rows met are
 *               followed, else every row is read;
 *   out_rows, out_values   n slots each (intp, float64): the best rows, best first, and
 *               their float64 sums;
 *   scoring     None, or (formula, k1, b, average length[, rows a block]) for words given by
 *               their postings: formula 0 is lucene's and robertson's tf / (norm + tf), 1
 *               atire's (tf x (k1 + 1)) / (tf + norm), norm k1 x ((1 - b) + b x length /
 *               average); with rows a block, block-max where every word has its blocks.
 * Returns how many rows score above 0, pass `allowed` and tie or beat the n-th best (in the
 * answer's dtype): more than n, ties at the n-th; fewer than n, fewer positive scores; and
 * whether block-max answered. The first min(n, that) slots are filled. Each row's parts are
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

/* A word's postings in one segment (or its kept impacts: kind PARTS, rows global). */
enum { PARTS, TF_INT32, TF_FLOAT64 };
typedef struct {
    const void *rows, *values; /* intp rows and float64 parts; or int32 local rows and tfs */
    const char *dead;          /* the segment's deleted rows, or NULL */
    const void *lengths;       /* the segment's row lengths (float64, or int32 token counts) */
    Py_ssize_t len, offset, rows_in; /* postings; the segment's first global row, its rows */
    double idf;
    int kind, int_lengths;
    /* its blocks of BLOCK rows holding the word (ascending local block numbers), where each
     * starts among the postings (nblk + 1 of them), their largest tf and shortest length */
    const int *blk;
    const long long *bstart;
    const double *bmaxtf, *bminlen;
    Py_ssize_t nblk;
} Slice;

typedef struct {
    int formula; /* 0: tf / (norm + tf) (lucene, robertson); 1: (tf x (k1 + 1)) / (tf + norm) (atire) */
    double k1, b, avg;
    Py_ssize_t block; /* rows in a block of the words' blocks, 0 for none */
} Scoring;

/* A posting's part, the expressions of bm25_impacts._NORM and _TFC times the IDF, in their
 * order (built without contraction: the floats NumPy's elementwise operations give). */
static inline double part_of(const Scoring *s, double idf, double tf, double length) {
    double norm = s->k1 * ((1.0 - s->b) + s->b * length / s->avg);
    return idf * (s->formula ? (tf * (s->k1 + 1.0)) / (tf + norm) : tf / (norm + tf));
}

/* The part of posting i (row `local`) of a slice given by its postings. */
static inline double posting_part(const Slice *x, const Scoring *s, Py_ssize_t i, Py_ssize_t local) {
    double tf = x->kind == TF_INT32 ? (double)((const int *)x->values)[i] : ((const double *)x->values)[i];
    double length = x->int_lengths ? (double)((const int *)x->lengths)[local] : ((const double *)x->lengths)[local];
    return part_of(s, x->idf, tf, length);
}

/* Row r offered to the picks from its sum, which is zeroed; -1 where memory ran out. Its order
 * key is read only for a row that can be kept. */
static inline int rank_row(Py_ssize_t r, double *sums, const long long *order, int single, const char *allowed,
                           Picks *picks) {
    double v = sums[r];
    sums[r] = 0.0;
    double key = single ? (double)(float)v : v;
    if (key < picks->floor || key <= 0.0 || (allowed && !allowed[r])) return 0;
    return offer(picks, r, v, key, order[r]);
}

/* The postings of slice x from *cursor on whose rows are below `hi` scattered into sums
 * (rows ascending, none below `lo`), *cursor moved past them; with `met`, each row met anew
 * appended there (t its count). -2 for a row out of order or outside its segment. The rows
 * AHEAD postings on are fetched into the cache meanwhile: at a million rows a posting's sum
 * and length are rarely there. */
#define AHEAD 16
#ifndef BLOCK
#define BLOCK (1 << 16) /* rows: their sums and int32 lengths, 768 KiB, fit a core's L2 */
#endif
static int scatter(const Slice *x, const Scoring *s, double *sums, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *cursor,
                   Py_ssize_t *met, Py_ssize_t *t) {
    Py_ssize_t i = *cursor;
    if (x->kind == PARTS) {
        const Py_ssize_t *at = x->rows;
        const double *part = x->values;
        for (; i < x->len; i++) {
            Py_ssize_t r = at[i];
            if (r >= hi) break;
            if (r < lo) return -2;
            if (i + AHEAD < x->len && at[i + AHEAD] < hi) __builtin_prefetch(&sums[at[i + AHEAD]], 1);
            if (met) met[*t] = r, *t += sums[r] == 0.0; /* kept where the row is new, without a branch */
            sums[r] += part[i];
        }
        *cursor = i;
        return 0;
    }
    const int *at = x->rows;
    double *base = sums + x->offset;
    Py_ssize_t local_lo = lo - x->offset, local_hi = hi - x->offset;
    if (local_hi > x->rows_in) local_hi = x->rows_in;
    for (; i < x->len; i++) {
        Py_ssize_t local = at[i];
        if (local >= local_hi) break;
        if (local < local_lo || local < 0) return -2;
        if (i + AHEAD < x->len && at[i + AHEAD] < local_hi) {
            __builtin_prefetch(x->int_lengths ? (const void *)&((const int *)x->lengths)[at[i + AHEAD]]
                                              : (const void *)&((const double *)x->lengths)[at[i + AHEAD]]);
            __builtin_prefetch(&base[at[i + AHEAD]], 1);
        }
        if (x->dead && x->dead[local]) continue;
        if (met) met[*t] = x->offset + local, *t += base[local] == 0.0;
        base[local] += posting_part(x, s, i, local);
    }
    *cursor = i;
    return 0;
}

/* A query word: its slices (one for kept impacts) and their postings. */
typedef struct {
    const Slice *s;
    Py_ssize_t slices, len;
} Word;

#define SLACK (1.0 + 1e-9) /* a bound's headroom over the rounding of sums in another order */

/* The postings of slice x in its block j scattered into sums (deleted rows skipped); -2 for a
 * row outside the block. */
static int scatter_block(const Slice *x, const Scoring *s, double *sums, Py_ssize_t j, Py_ssize_t lo, Py_ssize_t hi) {
    const int *at = x->rows;
    double *base = sums + x->offset;
    for (long long i = x->bstart[j]; i < x->bstart[j + 1]; i++) {
        int local = at[i];
        if (local < lo || local >= hi) return -2;
        if (x->dead && x->dead[local]) continue;
        base[local] += posting_part(x, s, i, local);
    }
    return 0;
}

/* Rows lo..hi (global) ranked from their sums, which are zeroed; -1 where memory ran out. */
static int rank_rows(Py_ssize_t lo, Py_ssize_t hi, double *sums, const long long *order, int single,
                     const char *allowed, Picks *picks) {
    for (Py_ssize_t r = lo; r < hi; r++)
        if (sums[r] != 0.0 && rank_row(r, sums, order, single, allowed, picks) < 0) return -1;
    return 0;
}

#define FIRST_BLOCKS 16 /* the blocks of largest bounds scored first: a threshold to skip by */

/* Block-max (as BMP does over fixed row ranges): a block's bound is the sum, over the query's
 * words (each occurrence), of each word's part at its largest tf and shortest length in that
 * block, raised by SLACK; a block whose bound (in the answer's dtype) is below the n-th best
 * score so far holds no hit and no tie, and is skipped. The FIRST_BLOCKS blocks of largest
 * bounds are scored first, then every other block in row order while the threshold rises.
 * Each row's parts are added in query order, as the scatter adds them. Only where every word
 * comes with its postings and their blocks; 1 where it ran, 0 where it does not apply, -1
 * where memory ran out, -2 for a malformed block list. */
static int blockmax(const Slice *slices, Py_ssize_t n_slices, const Scoring *sc, double *sums, const long long *order,
                    Py_ssize_t total, Py_ssize_t n, int single, const char *allowed, Picks *picks) {
    Py_ssize_t B = sc->block;
    if (B <= 0 || n <= 0 || n_slices == 0) return 0;
    for (Py_ssize_t x = 0; x < n_slices; x++)
        if (slices[x].kind == PARTS || !slices[x].blk || slices[x].idf < 0) return 0;
    /* the segments (distinct first rows), in row order, and where their blocks start in `ub` */
    Py_ssize_t *group = malloc((size_t)n_slices * sizeof *group), *seg = malloc((size_t)(n_slices + 1) * sizeof *seg);
    Py_ssize_t *base = malloc((size_t)(n_slices + 1) * sizeof *base), *cursor = calloc((size_t)n_slices, sizeof *cursor);
    double *ub = NULL;
    int result = -1;
    if (!group || !seg || !base || !cursor) goto out;
    Py_ssize_t groups = 0;
    for (Py_ssize_t x = 0; x < n_slices; x++) {
        Py_ssize_t g = 0;
        while (g < groups && slices[seg[g]].offset != slices[x].offset) g++;
        if (g == groups) seg[groups++] = x;
        group[x] = g;
    }
    for (Py_ssize_t g = 1; g < groups; g++) /* by first row (insertion: a few segments) */
        for (Py_ssize_t h = g; h > 0 && slices[seg[h - 1]].offset > slices[seg[h]].offset; h--) {
            Py_ssize_t t = seg[h];
            seg[h] = seg[h - 1], seg[h - 1] = t;
        }
    for (Py_ssize_t x = 0; x < n_slices; x++)
        for (Py_ssize_t g = 0; g < groups; g++)
            if (slices[seg[g]].offset == slices[x].offset) group[x] = g;
    base[0] = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        const Slice *y = &slices[seg[g]];
        if (y->offset < 0 || y->offset + y->rows_in > total) {
            result = -2;
            goto out;
        }
        base[g + 1] = base[g] + (y->rows_in + B - 1) / B;
    }
    if (!(ub = calloc((size_t)base[groups] + 1, sizeof *ub))) goto out;
    for (Py_ssize_t x = 0; x < n_slices; x++) {
        const Slice *y = &slices[x];
        Py_ssize_t blocks = base[group[x] + 1] - base[group[x]];
        for (Py_ssize_t j = 0; j < y->nblk; j++) {
            if (y->blk[j] < 0 || y->blk[j] >= blocks || (j && y->blk[j] <= y->blk[j - 1]) || y->bstart[j] < 0 ||
                y->bstart[j + 1] < y->bstart[j] || y->bstart[j + 1] > y->len) {
                result = -2;
                goto out;
            }
            ub[base[group[x]] + y->blk[j]] += part_of(sc, y->idf, y->bmaxtf[j], y->bminlen[j]);
        }
        if (y->nblk && y->bstart[y->nblk] != y->len) {
            result = -2;
            goto out;
        }
    }
    /* the blocks of largest bounds first (their numbers kept best first), then the rest */
    Py_ssize_t firsts[FIRST_BLOCKS], f = 0;
    for (Py_ssize_t g = 0; g < base[groups]; g++) {
        if (ub[g] <= 0.0) continue;
        if (f < FIRST_BLOCKS) firsts[f++] = g;
        else if (ub[g] > ub[firsts[f - 1]]) firsts[f - 1] = g;
        else continue;
        for (Py_ssize_t h = f - 1; h > 0 && ub[firsts[h - 1]] < ub[firsts[h]]; h--) {
            Py_ssize_t t = firsts[h];
            firsts[h] = firsts[h - 1], firsts[h - 1] = t;
        }
    }
    for (Py_ssize_t h = 0; h < f; h++) ub[firsts[h]] = -2.0; /* (scored in the first pass) */
    for (Py_ssize_t pass = 0; pass < 2; pass++)
        for (Py_ssize_t g = 0; g < groups; g++) {
            const Slice *y = &slices[seg[g]];
            Py_ssize_t blocks = base[g + 1] - base[g];
            for (Py_ssize_t x = 0; x < n_slices; x++) cursor[x] = 0;
            for (Py_ssize_t lb = 0; lb < blocks; lb++) {
                double u = ub[base[g] + lb];
                if (pass == 0) {
                    if (u != -2.0) continue; /* not one of the first */
                } else if (u <= 0.0) {
                    continue; /* no word here, or scored in the first pass */
                } else {
                    double key = u * SLACK;
                    if ((single ? (double)(float)key : key) < picks->floor) continue;
                }
                Py_ssize_t lo = lb * B, hi = lo + B < y->rows_in ? lo + B : y->rows_in; /* local rows */
                for (Py_ssize_t x = 0; x < n_slices; x++) { /* query order: each word's postings in the block */
                    if (group[x] != g) continue;
                    const Slice *z = &slices[x];
                    while (cursor[x] < z->nblk && z->blk[cursor[x]] < lb) cursor[x]++;
                    if (cursor[x] < z->nblk && z->blk[cursor[x]] == lb && scatter_block(z, sc, sums, cursor[x], lo, hi) < 0) {
                        result = -2; /* (sums left dirty: the caller drops the buffer) */
                        goto out;
                    }
                }
                if (rank_rows(y->offset + lo, y->offset + hi, sums, order, single, allowed, picks) < 0) goto out;
                if (pass == 0) ub[base[g] + lb] = -1.0; /* done */
            }
        }
    result = 1;
out:
    free(group), free(seg), free(base), free(cursor), free(ub);
    return result;
}

/* The kernel proper, without the GIL: the number of rows at or above the n-th best; -1 where
 * memory ran out, -2 for a row outside 0..total or out of order. The words' slices, in query
 * order, lie one after another from words[0].s. */
static Py_ssize_t top(const Word *wd, Py_ssize_t words, const Scoring *scoring, double *sums, const long long *order,
                      Py_ssize_t total, Py_ssize_t n, int single, const char *allowed, double below,
                      Py_ssize_t *out_rows, double *out_values, int *by_blocks) {
    Py_ssize_t m = 0, t = 0, n_slices = 0;
    for (Py_ssize_t w = 0; w < words; w++) m += wd[w].len, n_slices += wd[w].slices;
    const Slice *slices = words ? wd[0].s : NULL;
    Picks picks;
    if (picks_init(&picks, m < total ? m : total, n) < 0) {
        picks_free(&picks);
        return -1;
    }
    int done = scoring->block > 0 ? blockmax(slices, n_slices, scoring, sums, order, total, n, single, allowed, &picks) : 0;
    if (done < 0) {
        picks_free(&picks);
        return done;
    }
    *by_blocks = done;
    if (!done) {
        int scan = !((double)m < (double)total * below); /* parts for many rows: every row read */
        Py_ssize_t *met = NULL;
        if (!scan && !(met = malloc((size_t)(m + 1) * sizeof *met))) {
            picks_free(&picks);
            return -1;
        }
        /* A block of rows at a time: each word's postings in it, then its rows ranked, so that
         * the block's sums and lengths stay in the cache between words. */
        Py_ssize_t *cursor = calloc((size_t)n_slices + 1, sizeof *cursor);
        if (!cursor) {
            free(met), picks_free(&picks);
            return -1;
        }
        int failed = 0;
        for (Py_ssize_t lo = 0; lo < total && !failed; lo += BLOCK) {
            Py_ssize_t hi = total - lo > BLOCK ? lo + BLOCK : total, from = t;
            for (Py_ssize_t x = 0; x < n_slices; x++)
                if (scatter(&slices[x], scoring, sums, lo, hi, &cursor[x], met, &t) < 0) {
                    failed = -2; /* (sums left dirty: the caller drops the buffer) */
                    break;
                }
            for (Py_ssize_t j = scan ? lo : from; !failed && j < (scan ? hi : t); j++)
                if (rank_row(scan ? j : met[j], sums, order, single, allowed, &picks) < 0) failed = -1;
        }
        for (Py_ssize_t x = 0; x < n_slices && !failed; x++)
            if (cursor[x] < slices[x].len) failed = -2; /* a row past the last */
        free(cursor);
        if (failed) {
            free(met), picks_free(&picks);
            return failed;
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

/* A word given by its postings: (idf, live rows, slices, ...), each slice (rows' address, tfs' address,
 * tfs are float64, postings, first global row, dead mask's address or 0, lengths' address,
 * rows) into out; -1 with an exception set. */
static int raw_slices(PyObject *word, Slice *out, Py_ssize_t *count) {
    double idf = PyFloat_AsDouble(PyTuple_GET_ITEM(word, 0));
    PyObject *list = PyTuple_GET_SIZE(word) > 2 ? PyTuple_GET_ITEM(word, 2) : NULL;
    if (PyErr_Occurred() || !list || !PyTuple_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "top_sums: a word's postings are (idf, live rows, slices tuple, ...)");
        return -1;
    }
    *count = PyTuple_GET_SIZE(list);
    for (Py_ssize_t i = 0; out && i < *count; i++) {
        PyObject *x = PyTuple_GET_ITEM(list, i);
        if (!PyTuple_Check(x) || PyTuple_GET_SIZE(x) < 9) {
            PyErr_SetString(PyExc_TypeError, "top_sums: a slice is (rows, tfs, tfs are float64, postings, offset, "
                                              "dead, lengths, rows in the segment, lengths are int32) as addresses "
                                              "and integers");
            return -1;
        }
        Slice *sl = &out[i];
        sl->rows = PyLong_AsVoidPtr(PyTuple_GET_ITEM(x, 0));
        sl->values = PyLong_AsVoidPtr(PyTuple_GET_ITEM(x, 1));
        sl->kind = PyObject_IsTrue(PyTuple_GET_ITEM(x, 2)) ? TF_FLOAT64 : TF_INT32;
        sl->len = PyLong_AsSsize_t(PyTuple_GET_ITEM(x, 3));
        sl->offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(x, 4));
        sl->dead = PyLong_AsVoidPtr(PyTuple_GET_ITEM(x, 5));
        sl->lengths = PyLong_AsVoidPtr(PyTuple_GET_ITEM(x, 6));
        sl->rows_in = PyLong_AsSsize_t(PyTuple_GET_ITEM(x, 7));
        sl->int_lengths = PyObject_IsTrue(PyTuple_GET_ITEM(x, 8));
        sl->idf = idf;
        sl->blk = NULL, sl->bstart = NULL, sl->bmaxtf = sl->bminlen = NULL, sl->nblk = 0;
        PyObject *blocks = PyTuple_GET_SIZE(word) > 4 ? PyTuple_GET_ITEM(word, 4) : Py_None;
        if (blocks != Py_None) { /* (blocks' address, starts', largest tfs', shortest lengths', how many) a slice */
            PyObject *b = PyTuple_Check(blocks) && PyTuple_GET_SIZE(blocks) == *count ? PyTuple_GET_ITEM(blocks, i) : NULL;
            if (!b || !PyTuple_Check(b) || PyTuple_GET_SIZE(b) < 5) {
                PyErr_SetString(PyExc_TypeError, "top_sums: a word's blocks are a tuple a slice");
                return -1;
            }
            sl->blk = PyLong_AsVoidPtr(PyTuple_GET_ITEM(b, 0));
            sl->bstart = PyLong_AsVoidPtr(PyTuple_GET_ITEM(b, 1));
            sl->bmaxtf = PyLong_AsVoidPtr(PyTuple_GET_ITEM(b, 2));
            sl->bminlen = PyLong_AsVoidPtr(PyTuple_GET_ITEM(b, 3));
            sl->nblk = PyLong_AsSsize_t(PyTuple_GET_ITEM(b, 4));
            if (!PyErr_Occurred() && (sl->nblk < 0 || !sl->bstart || (sl->nblk && (!sl->blk || !sl->bmaxtf || !sl->bminlen)))) {
                PyErr_SetString(PyExc_ValueError, "top_sums: a slice's blocks without their arrays");
                return -1;
            }
        }
        if (PyErr_Occurred()) return -1;
        if (sl->len < 0 || sl->rows_in < 0 || (sl->len && (!sl->rows || !sl->values || !sl->lengths))) {
            PyErr_SetString(PyExc_ValueError, "top_sums: a slice without its arrays");
            return -1;
        }
    }
    return 0;
}

static PyObject *top_sums(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *words_o, *sums_o, *order_o, *allowed_o, *rows_o, *values_o, *scoring_o = Py_None;
    Py_ssize_t n;
    int single;
    double below;
    if (!PyArg_ParseTuple(args, "O!OOnpOdOO|O", &PyList_Type, &words_o, &sums_o, &order_o, &n, &single, &allowed_o,
                          &below, &rows_o, &values_o, &scoring_o))
        return NULL;
    Py_buffer sums, order, allowed = {0}, rows, values;
    int got = 0; /* of those, held in this order */
    Py_ssize_t words = PyList_GET_SIZE(words_o), n_slices = 0;
    Scoring scoring = {0, 0.0, 0.0, 1.0, 0};
    Word *wd = PyMem_Malloc((size_t)(words + 1) * sizeof *wd);
    Py_ssize_t *first = PyMem_Malloc((size_t)(words + 1) * sizeof *first);
    Slice *slices = NULL;
    PyObject *result = NULL;
    if (!wd || !first) {
        PyErr_NoMemory();
        goto done;
    }
    if (scoring_o != Py_None && !PyArg_ParseTuple(scoring_o, "iddd|n", &scoring.formula, &scoring.k1, &scoring.b,
                                                  &scoring.avg, &scoring.block))
        goto done;
    for (Py_ssize_t w = 0; w < words; w++) { /* each word's slices counted */
        PyObject *word = PyList_GET_ITEM(words_o, w);
        Py_ssize_t count = 1;
        if (!PyTuple_Check(word) || PyTuple_GET_SIZE(word) < 2) {
            PyErr_SetString(PyExc_TypeError, "top_sums: words are tuples (see the module's source)");
            goto done;
        }
        if (PyFloat_Check(PyTuple_GET_ITEM(word, 0))) {
            if (scoring_o == Py_None) {
                PyErr_SetString(PyExc_ValueError, "top_sums: a word given by its postings needs `scoring`");
                goto done;
            }
            if (raw_slices(word, NULL, &count) < 0) goto done;
        } else if (PyTuple_GET_SIZE(word) < 6) {
            PyErr_SetString(PyExc_TypeError,
                            "top_sums: kept impacts are (rows, parts, constant, rows' address, parts' address, length)");
            goto done;
        }
        first[w] = n_slices;
        n_slices += count;
    }
    first[words] = n_slices;
    if (!(slices = PyMem_Malloc((size_t)(n_slices + 1) * sizeof *slices))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t w = 0; w < words; w++) {
        PyObject *word = PyList_GET_ITEM(words_o, w);
        Py_ssize_t count = 1;
        Word *x = &wd[w];
        x->s = &slices[first[w]], x->len = 0;
        if (PyFloat_Check(PyTuple_GET_ITEM(word, 0))) { /* its postings */
            if (raw_slices(word, &slices[first[w]], &count) < 0) goto done;
        } else {
            Slice *sl = &slices[first[w]];
            sl->rows = PyLong_AsVoidPtr(PyTuple_GET_ITEM(word, 3));
            sl->values = PyLong_AsVoidPtr(PyTuple_GET_ITEM(word, 4));
            sl->len = PyLong_AsSsize_t(PyTuple_GET_ITEM(word, 5));
            sl->kind = PARTS, sl->dead = NULL, sl->lengths = NULL, sl->offset = 0, sl->rows_in = 0;
            sl->idf = 0.0, sl->int_lengths = 0, sl->blk = NULL, sl->bstart = NULL, sl->bmaxtf = sl->bminlen = NULL;
            sl->nblk = 0;
            if (!PyErr_Occurred() && (!sl->rows || !sl->values || sl->len < 0)) {
                PyErr_SetString(PyExc_ValueError, "top_sums: a word without its arrays");
                goto done;
            }
        }
        if (PyErr_Occurred()) goto done;
        x->slices = count;
        for (Py_ssize_t k = 0; k < count; k++) x->len += x->s[k].len;
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
    Py_ssize_t k;
    int by_blocks = 0;
    Py_BEGIN_ALLOW_THREADS
    k = top(wd, words, &scoring, sums.buf, order.buf, total, n, single, allowed_o != Py_None ? allowed.buf : NULL,
            below, rows.buf, values.buf, &by_blocks);
    Py_END_ALLOW_THREADS
    if (k == -2)
        PyErr_SetString(PyExc_ValueError, "top_sums: a row outside the order keys or out of order (sums left dirty)");
    else
        result = k < 0 ? PyErr_NoMemory() : Py_BuildValue("(nO)", k, by_blocks ? Py_True : Py_False);
done:
    Py_buffer *mine[] = {&sums, &order, &rows, &values, &allowed};
    for (int i = 0; i < got; i++) PyBuffer_Release(mine[i]);
    PyMem_Free(wd), PyMem_Free(first), PyMem_Free(slices);
    return result;
}

static PyMethodDef methods[] = {
    {"top_sums", top_sums, METH_VARARGS, "A BM25 query's top n rows from its words' kept impacts or postings (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25_kernel", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bm25_kernel(void) { return PyModule_Create(&module); }
