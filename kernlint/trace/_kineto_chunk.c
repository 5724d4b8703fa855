/*
 * kernlint.trace._kineto_chunk: one chunk of kineto trace events (a JSON array of event objects, as
 * kernlint.trace.columns joins them) decoded straight into the columns kernlint keeps.
 *
 * decode_chunk(buf) -> tuple | None; decode_events_at and skip_events read a trace's event array in place (a
 * streamed trace, kernlint.trace.event_stream); nest_walk is the nesting walk of kernlint.trace.table.
 *
 * The answer is exact by construction where there is one: anything outside the plain case (a field of a
 * type the Python path would have to judge, a repeated key, an escaped key, a number that does not fit,
 * invalid or unusual JSON, a lone surrogate, nesting deeper than MAX_DEPTH) gives None, and the caller
 * decodes that chunk with the Python path, which keeps every damage rule. No Python object is made per
 * event: the columns come back as packed native-endian arrays (bytes objects numpy wraps with frombuffer)
 * and each distinct string of a column is made once.
 *
 * The tuple: (kept, others, i64, f64, i32, u8, uniques, arg_rows, arg_lengths, arg_blob)
 *   kept     events kept (not metadata / flow: the SKIPPED_PHASES / SKIPPED_CATS of columns.py)
 *   others   events left out
 *   i64      int64[10][kept]: bytes, device, stream, device_type, addr (defaults 0, -1, -1, -1, 0), then
 *            correlation, external_id, python_id, python_parent_id, graph_node (-1 where absent)
 *   f64      float64[2][kept]: ts, dur (NaN where absent or null)
 *   i32      int32[5][kept]: codes of name, cat, pid, tid, launch_kernel into `uniques`
 *   u8       uint8[7][kept] (0 / 1): complete (ph == "X"), bad ts, bad dur, bad name, bad cat, bad pid, bad tid
 *   uniques  5 lists of distinct str, first seen first (name, cat, pid, tid, launch_kernel)
 *   arg_rows int64[m]: the kept events (chunk-local index) whose args hold a shape argument
 *   arg_lengths int64[m][4] and arg_blob: the raw JSON of Input Dims (else Input dims), Input type,
 *            Concrete Inputs, Input Strides of those events, concatenated (length 0 where absent)
 *
 * C99, no third-party code. Floats: the exact fast path (a mantissa below 2**53 times or over an exact power
 * of ten up to 1e22: one correctly rounded IEEE operation), else PyOS_string_to_double (Python's own
 * correctly rounded, locale-independent conversion): the value Python's float() and msgspec give.
 *
 * Only the limited C API of Python 3.11 is used (setup.py builds it with Py_LIMITED_API: one abi3 wheel for
 * every CPython from 3.11 on); memory is the C library's (PyMem_Raw* is not in that API; it is malloc too).
 * The facts this file shares with the Python path (the event and argument keys, the phases and categories
 * left out, the columns with their sources, defaults and stand-ins) are its tables below; tables() gives them
 * to tests/test_native_tables.py, which asserts them against the Python side's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OK 0
#define FALLBACK 1
#define NOMEM 2

#define MAX_DEPTH 256          /* nesting of skipped values; deeper: the Python path */
#define TWO_53 9007199254740992ULL

typedef const unsigned char *cptr;

/* ------------------------------------------------------------------------------------------------ */
/* Growable memory                                                                                   */

typedef struct {
    unsigned char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra)
{
    size_t need, cap;
    void *p;
    if (extra > SIZE_MAX - b->len)
        return NOMEM;
    need = b->len + extra;
    if (need <= b->cap)
        return OK;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    p = realloc(b->data, cap);
    if (p == NULL)
        return NOMEM;
    b->data = p;
    b->cap = cap;
    return OK;
}

static int buf_append(Buf *b, const void *src, size_t n)
{
    if (buf_reserve(b, n) != OK)
        return NOMEM;
    if (n)
        memcpy(b->data + b->len, src, n);
    b->len += n;
    return OK;
}

static void buf_free(Buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Room for one more item in a growable array of `size`-byte items holding `count` of `*cap` (doubling from
 * `first`). */
static int room_for_one(void **items, size_t *cap, size_t count, size_t size, size_t first)
{
    size_t n;
    void *p;
    if (count < *cap)
        return OK;
    n = *cap ? *cap * 2 : first;
    if (n > SIZE_MAX / size)
        return NOMEM;
    p = realloc(*items, n * size);
    if (p == NULL)
        return NOMEM;
    *items = p;
    *cap = n;
    return OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* Interned strings of one column: decoded UTF-8 bytes -> code (first seen first)                   */

typedef struct {
    const unsigned char *s;
    size_t len;
    uint64_t hash;
    int owned;
} Entry;

typedef struct {
    Entry *entries;
    size_t count, cap;
    int32_t *slots;    /* open addressing, -1 empty; nslots a power of two, at most half full */
    size_t nslots;
} Table;

/* Drawn from os.urandom when the module loads: names crafted to share their slots under a known hash
   cannot be made without it (each round below is a bijection of the state, so the seed reaches every bit). */
static uint64_t hash_seed = 0x9E3779B97F4A7C15ULL;

static uint64_t hash_bytes(const unsigned char *s, size_t n)
{
    uint64_t h = hash_seed ^ (uint64_t)n;
    uint64_t w;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    w = 0;
    if (n)
        memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h;
}

static void table_free(Table *t)
{
    size_t i;
    for (i = 0; i < t->count; i++)
        if (t->entries[i].owned)
            free((void *)t->entries[i].s);
    free(t->entries);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

static int table_rehash(Table *t, size_t nslots)
{
    int32_t *slots;
    size_t i, mask = nslots - 1;
    if (nslots > SIZE_MAX / sizeof(int32_t))
        return NOMEM;
    slots = malloc(nslots * sizeof(int32_t));
    if (slots == NULL)
        return NOMEM;
    memset(slots, 0xff, nslots * sizeof(int32_t));
    for (i = 0; i < t->count; i++) {
        size_t j = (size_t)t->entries[i].hash & mask;
        while (slots[j] >= 0)
            j = (j + 1) & mask;
        slots[j] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return OK;
}

static inline int bytes_equal(const unsigned char *a, const unsigned char *b, size_t n)
{
    uint64_t x, y;
    while (n >= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    while (n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

/* The code of `s` (copied when new and `copy`: it does not live in the chunk's buffer). */
static int table_intern(Table *t, const unsigned char *s, size_t len, int copy, int32_t *code)
{
    uint64_t h = hash_bytes(s, len);
    size_t mask, j;
    Entry *e;
    if (t->nslots == 0 && table_rehash(t, 64) != OK)
        return NOMEM;
    mask = t->nslots - 1;
    j = (size_t)h & mask;
    while (t->slots[j] >= 0) {
        e = &t->entries[t->slots[j]];
        if (e->hash == h && e->len == len && bytes_equal(e->s, s, len)) {
            *code = t->slots[j];
            return OK;
        }
        j = (j + 1) & mask;
    }
    if (t->count >= INT32_MAX - 1)
        return FALLBACK;
    if (room_for_one((void **)&t->entries, &t->cap, t->count, sizeof(Entry), 64) != OK)
        return NOMEM;
    e = &t->entries[t->count];
    e->hash = h;
    e->len = len;
    e->owned = 0;
    e->s = s;
    if (copy) {
        unsigned char *own = malloc(len ? len : 1);
        if (own == NULL)
            return NOMEM;
        if (len)
            memcpy(own, s, len);
        e->s = own;
        e->owned = 1;
    }
    t->slots[j] = (int32_t)t->count;
    *code = (int32_t)t->count;
    t->count++;
    if (t->count * 2 > t->nslots && t->nslots <= SIZE_MAX / 2)
        return table_rehash(t, t->nslots * 2);
    return OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* JSON scanning                                                                                     */

enum { V_ABSENT = 0, V_NULL, V_STR, V_INT, V_FLOAT, V_BOOL, V_ARRAY, V_OBJECT };

typedef struct {
    int kind;
    size_t start, stop;          /* the value's raw JSON: base[start:stop] */
    /* strings: the text between the quotes, and whether it holds an escape */
    cptr s;
    size_t len;
    int esc;
    /* numbers: the digits (integer and fraction) as one integer, the sign and the decimal exponent */
    uint64_t mant;
    int neg, mant_overflow;
    long frac_digits, exp10;
    int64_t i;                   /* V_INT that fits int64 (big == 0); a numeric V_STR's value */
    int big;
    int numeric;                 /* a V_STR Scalar argument: STR_INT (its value in i) or STR_NOT_A_NUMBER */
} Value;

enum { STR_INT = 1, STR_NOT_A_NUMBER = 2 };

typedef struct {
    cptr base, p, end;
} Cursor;

static inline void skip_ws(Cursor *c)
{
    cptr p = c->p, end = c->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    c->p = p;
}

static int hex4(cptr p, unsigned *out)
{
    unsigned v = 0;
    int k;
    for (k = 0; k < 4; k++) {
        unsigned char ch = p[k];
        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            v |= (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            v |= (unsigned)(ch - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* Length of the valid UTF-8 sequence (2 to 4 bytes) at p, 0 if invalid (overlong, surrogate, > U+10FFFF,
 * cut short): the rules of Python's strict UTF-8 decoder. */
static size_t utf8_seq(cptr p, cptr end)
{
    unsigned char c0 = p[0];
    size_t avail = (size_t)(end - p);
    if (c0 >= 0xC2 && c0 <= 0xDF) {
        if (avail < 2 || (p[1] & 0xC0) != 0x80)
            return 0;
        return 2;
    }
    if (c0 >= 0xE0 && c0 <= 0xEF) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (c0 == 0xE0)
            lo = 0xA0;
        else if (c0 == 0xED)
            hi = 0x9F;
        if (avail < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80)
            return 0;
        return 3;
    }
    if (c0 >= 0xF0 && c0 <= 0xF4) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (c0 == 0xF0)
            lo = 0x90;
        else if (c0 == 0xF4)
            hi = 0x8F;
        if (avail < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

/* c->p at the opening quote. Validates escapes (surrogates must pair), UTF-8 and control characters. */
static int scan_string(Cursor *c, Value *v)
{
    cptr p = c->p + 1, end = c->end;
    v->kind = V_STR;
    v->start = (size_t)(c->p - c->base);
    v->s = p;
    v->esc = 0;
    for (;;) {
        unsigned char ch;
        /* plain ASCII, 8 bytes at a time: no quote, backslash, control or non-ASCII byte */
        while (end - p >= 8) {
            uint64_t w, q, b, ctl, hit;
            memcpy(&w, p, 8);
            q = w ^ 0x2222222222222222ULL;                 /* '"' -> 0 */
            b = w ^ 0x5C5C5C5C5C5C5C5CULL;                 /* '\\' -> 0 */
            q = (q - 0x0101010101010101ULL) & ~q;
            b = (b - 0x0101010101010101ULL) & ~b;
            ctl = (w - 0x2020202020202020ULL) & ~w;        /* bytes < 0x20 (or >= 0x80) */
            hit = (q | b | ctl | w) & 0x8080808080808080ULL;
            if (hit) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                /* The lowest flagged byte is the first special one (a borrow only flags bytes above a
                 * true match): skip the plain bytes before it. */
                p += __builtin_ctzll(hit) >> 3;
#endif
                break;
            }
            p += 8;
        }
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p >= end)
            return FALLBACK;
        ch = *p;
        if (ch == '"') {
            v->len = (size_t)(p - v->s);
            c->p = p + 1;
            v->stop = (size_t)(c->p - c->base);
            return OK;
        }
        if (ch == '\\') {
            v->esc = 1;
            if (end - p < 2)
                return FALLBACK;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                continue;
            case 'u': {
                unsigned u, lo;
                if (end - p < 6 || !hex4(p + 2, &u))
                    return FALLBACK;
                p += 6;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xDC00
                        || lo > 0xDFFF)
                        return FALLBACK;
                    p += 6;
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    return FALLBACK;
                }
                continue;
            }
            default:
                return FALLBACK;
            }
        }
        if (ch < 0x20)
            return FALLBACK;
        {
            size_t k = utf8_seq(p, end);
            if (k == 0)
                return FALLBACK;
            p += k;
        }
    }
}

static void put_utf8(unsigned char **o, unsigned cp)
{
    unsigned char *q = *o;
    if (cp < 0x80) {
        *q++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *q++ = (unsigned char)(0xC0 | (cp >> 6));
        *q++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *q++ = (unsigned char)(0xE0 | (cp >> 12));
        *q++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *q++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *q++ = (unsigned char)(0xF0 | (cp >> 18));
        *q++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *q++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *q++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    *o = q;
}

/* The decoded UTF-8 of a string scanned by scan_string (escapes already validated) into `out`. The
 * decoded text is never longer than the escaped one. */
static int decode_escaped(const Value *v, Buf *out)
{
    cptr p = v->s, end = v->s + v->len;
    unsigned char *o;
    out->len = 0;
    if (buf_reserve(out, v->len + 1) != OK)
        return NOMEM;
    o = out->data;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        switch (p[1]) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        default: {   /* 'u' */
            unsigned u = 0, lo = 0;
            hex4(p + 2, &u);
            if (u >= 0xD800 && u <= 0xDBFF) {
                hex4(p + 8, &lo);
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            put_utf8(&o, u);
            p += 6;
            continue;
        }
        }
        p += 2;
    }
    out->len = (size_t)(o - out->data);
    return OK;
}

static inline int is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

/* A JSON number (strict grammar); its value is worked out only where a field needs it. */
static int scan_number(Cursor *c, Value *v)
{
    cptr p = c->p, end = c->end;
    uint64_t m = 0;
    int over = 0, is_float = 0, eneg = 0, digits = 0;
    long frac = 0, e = 0;
    v->start = (size_t)(p - c->base);
    v->neg = 0;
    if (*p == '-') {
        v->neg = 1;
        p++;
    }
    if (p >= end)
        return FALLBACK;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p)) {
            if (digits < 19) {   /* 19 significant digits always fit in uint64 */
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                over = 1;
            }
            p++;
        }
    } else {
        return FALLBACK;
    }
    if (p < end && *p == '.') {
        is_float = 1;
        p++;
        if (p >= end || !is_digit(*p))
            return FALLBACK;
        while (p < end && is_digit(*p)) {
            if (m == 0 && *p == '0') {
                /* a leading zero: not a significant digit */
            } else if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                over = 1;
            }
            if (frac < 1000000)
                frac++;
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p))
            return FALLBACK;
        while (p < end && is_digit(*p)) {
            if (e < 1000000)
                e = e * 10 + (*p - '0');
            p++;
        }
        if (eneg)
            e = -e;
    }
    c->p = p;
    v->stop = (size_t)(p - c->base);
    v->mant = m;
    v->mant_overflow = over;
    v->frac_digits = frac;
    v->exp10 = e;
    v->big = 0;
    v->i = 0;
    if (is_float) {
        v->kind = V_FLOAT;
    } else {
        v->kind = V_INT;
        if (over || m > (v->neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
            v->big = 1;
        else if (v->neg)
            v->i = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
        else
            v->i = (int64_t)m;
    }
    return OK;
}

/* A JSON number only validated (in a skipped value). */
static int skip_number(Cursor *c)
{
    cptr p = c->p, end = c->end;
    if (*p == '-')
        p++;
    if (p >= end)
        return FALLBACK;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && is_digit(*p))
            p++;
    else
        return FALLBACK;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p))
            return FALLBACK;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return FALLBACK;
        while (p < end && is_digit(*p))
            p++;
    }
    c->p = p;
    return OK;
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The double of a JSON number: an int within 2**53 exactly; a float correctly rounded. FALLBACK for ints
 * beyond 2**53 (the Python path rounds those itself) and for values beyond the double range. */
static int number_to_double(cptr base, const Value *v, double *out)
{
    double d;
    if (v->kind == V_INT) {
        if (v->big || v->i > (int64_t)TWO_53 || v->i < -(int64_t)TWO_53)
            return FALLBACK;
        *out = (double)v->i;   /* exact: -0 is the int 0, whose float is 0.0 */
        return OK;
    }
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    if (!v->mant_overflow && v->mant <= TWO_53) {
        long e = v->exp10 - v->frac_digits;
        if (e >= -22 && e <= 22) {
            d = (double)v->mant;
            d = e >= 0 ? d * POW10[e] : d / POW10[-e];
            *out = v->neg ? -d : d;
            return OK;
        }
    }
#endif
    {
        char small[128];
        char *text = small, *stop = NULL;
        size_t n = v->stop - v->start;
        if (n >= sizeof(small)) {
            text = PyMem_Malloc(n + 1);
            if (text == NULL)
                return NOMEM;
        }
        memcpy(text, base + v->start, n);
        text[n] = '\0';
        d = PyOS_string_to_double(text, &stop, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            if (text != small)
                PyMem_Free(text);
            return FALLBACK;
        }
        if (stop != text + n) {
            if (text != small)
                PyMem_Free(text);
            return FALLBACK;
        }
        if (text != small)
            PyMem_Free(text);
    }
    if (!isfinite(d))
        return FALLBACK;
    *out = d;
    return OK;
}

static int match_lit(Cursor *c, const char *lit, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return FALLBACK;
    c->p += n;
    return OK;
}

/* An array or object, validated and skipped (c->p at its opening bracket). */
static int skip_container(Cursor *c)
{
    unsigned char stack[MAX_DEPTH];
    int top = 0;
    Value tmp;
    cptr end = c->end;
    stack[top++] = *c->p;
    c->p++;
    goto opened;

opened:   /* just after an opening bracket: a close, or the first element */
    skip_ws(c);
    if (c->p >= end)
        return FALLBACK;
    if (*c->p == (stack[top - 1] == '{' ? '}' : ']')) {
        c->p++;
        top--;
        goto after_value;
    }
    goto element;

element:   /* a key and value (object) or a value (array) */
    if (stack[top - 1] == '{') {
        if (c->p >= end || *c->p != '"' || scan_string(c, &tmp) != OK)
            return FALLBACK;
        skip_ws(c);
        if (c->p >= end || *c->p != ':')
            return FALLBACK;
        c->p++;
        skip_ws(c);
    }
    if (c->p >= end)
        return FALLBACK;
    switch (*c->p) {
    case '{': case '[':
        if (top >= MAX_DEPTH)
            return FALLBACK;
        stack[top++] = *c->p;
        c->p++;
        goto opened;
    case '"':
        if (scan_string(c, &tmp) != OK)
            return FALLBACK;
        break;
    case 'n':
        if (match_lit(c, "null", 4) != OK)
            return FALLBACK;
        break;
    case 't':
        if (match_lit(c, "true", 4) != OK)
            return FALLBACK;
        break;
    case 'f':
        if (match_lit(c, "false", 5) != OK)
            return FALLBACK;
        break;
    default:
        if (*c->p != '-' && !is_digit(*c->p))
            return FALLBACK;
        if (skip_number(c) != OK)
            return FALLBACK;
    }
    goto after_value;

after_value:
    if (top == 0)
        return OK;
    skip_ws(c);
    if (c->p >= end)
        return FALLBACK;
    if (*c->p == ',') {
        c->p++;
        skip_ws(c);
        goto element;
    }
    if (*c->p == (stack[top - 1] == '{' ? '}' : ']')) {
        c->p++;
        top--;
        goto after_value;
    }
    return FALLBACK;
}

/* Any JSON value at c->p (after white space): scalars scanned, containers skipped. */
static int read_value(Cursor *c, Value *v)
{
    if (c->p >= c->end)
        return FALLBACK;
    v->start = (size_t)(c->p - c->base);
    switch (*c->p) {
    case '"':
        return scan_string(c, v);
    case '{': case '[':
        v->kind = *c->p == '{' ? V_OBJECT : V_ARRAY;
        if (skip_container(c) != OK)
            return FALLBACK;
        break;
    case 'n':
        v->kind = V_NULL;
        if (match_lit(c, "null", 4) != OK)
            return FALLBACK;
        break;
    case 't':
        v->kind = V_BOOL;
        if (match_lit(c, "true", 4) != OK)
            return FALLBACK;
        break;
    case 'f':
        v->kind = V_BOOL;
        if (match_lit(c, "false", 5) != OK)
            return FALLBACK;
        break;
    default:
        if (*c->p != '-' && !is_digit(*c->p))
            return FALLBACK;
        return scan_number(c, v);
    }
    v->stop = (size_t)(c->p - c->base);
    return OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* Events                                                                                            */

/* The tables shared with the Python path (tables() exports them; tests/test_native_tables.py asserts them
 * against kernlint.trace.schema, kernlint.trace.columns and kernlint.trace.native_chunk). */

/* Event keys: RawEvent's fields, in the order of their ids (event_key matches them). */
enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS, N_EVENT_KEYS };
static const char *const EVENT_KEYS[N_EVENT_KEYS] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"};

/* Argument keys: RawArgs' field and its raw kineto name (schema.ARG_FIELDS), in the order of their ids
 * (arg_key matches the raw names), and how read_arg reads the value: an id (a non-negative int or null), a
 * Scalar int (an int, a numeric text, null), raw JSON (any value, kept as its text), a text (a string or
 * null: the launch's kernel name). */
enum {
    A_EXTERNAL_ID, A_CORRELATION, A_INPUT_DIMS, A_INPUT_DIMS_2021, A_INPUT_TYPES, A_INPUT_STRIDES,
    A_CONCRETE_INPUTS, A_ADDR, A_NBYTES, A_DEVICE_TYPE, A_DEVICE_ID, A_DEVICE, A_STREAM, A_MEMCPY_BYTES,
    A_PYTHON_ID, A_PYTHON_PARENT_ID, A_KERNEL, A_GRAPH_NODE_ID, A_GRAPH_NODE_ID_ALT, N_ARG_KEYS
};
enum { ARG_ID, ARG_SCALAR, ARG_RAW, ARG_TEXT };
static const char *const ARG_KINDS[] = {"id", "scalar", "raw", "text"};

typedef struct {
    const char *field, *raw;
    int kind;
} ArgKey;

static const ArgKey ARG_KEYS[N_ARG_KEYS] = {
    {"external_id", "External id", ARG_ID},
    {"correlation", "correlation", ARG_ID},
    {"input_dims", "Input Dims", ARG_RAW},
    {"input_dims_2021", "Input dims", ARG_RAW},
    {"input_types", "Input type", ARG_RAW},
    {"input_strides", "Input Strides", ARG_RAW},
    {"concrete_inputs", "Concrete Inputs", ARG_RAW},
    {"addr", "Addr", ARG_SCALAR},
    {"nbytes", "Bytes", ARG_SCALAR},
    {"device_type", "Device Type", ARG_SCALAR},
    {"device_id", "Device Id", ARG_SCALAR},
    {"device", "device", ARG_SCALAR},
    {"stream", "stream", ARG_SCALAR},
    {"memcpy_bytes", "bytes", ARG_SCALAR},
    {"python_id", "Python id", ARG_ID},
    {"python_parent_id", "Python parent id", ARG_ID},
    {"launch_kernel", "kernel", ARG_TEXT},
    {"graph_node_id", "graph node id", ARG_ID},
    {"graph_node_id_alt", "graphNodeId", ARG_ID},
};

/* Phases and categories of events that are left out (columns.SKIPPED_PHASES, columns.SKIPPED_CATS). */
static const char SKIPPED_PHASES[] = "Msftben";   /* each a one-letter phase */
#define N_SKIPPED_CATS 2
static const char *const SKIPPED_CATS[N_SKIPPED_CATS] = {"ac2g", "flow"};
static const char COMPLETE_PHASE[] = "X";         /* the `complete` flag: ph == "X" */

/* The int64 columns (native_chunk.INT_FIELDS, then ID_FIELDS): the argument read, the one read where that is
 * absent or null (-1: none), and the value where both are (or the event has no args object). */
typedef struct {
    const char *name;
    int first, second;
    int64_t dflt;
} IntColumn;

static const IntColumn INT_COLUMNS[5] = {
    {"bytes", A_NBYTES, A_MEMCPY_BYTES, 0},
    {"device", A_DEVICE, A_DEVICE_ID, -1},
    {"stream", A_STREAM, -1, -1},
    {"device_type", A_DEVICE_TYPE, -1, -1},
    {"addr", A_ADDR, -1, 0},
};
static const IntColumn ID_COLUMNS[5] = {
    {"correlation", A_CORRELATION, -1, -1},
    {"external_id", A_EXTERNAL_ID, -1, -1},
    {"python_id", A_PYTHON_ID, -1, -1},
    {"python_parent_id", A_PYTHON_PARENT_ID, -1, -1},
    {"graph_node", A_GRAPH_NODE_ID, A_GRAPH_NODE_ID_ALT, -1},
};

/* The text columns (native_chunk.TEXT_FIELDS; their tables below are T_*), and the text of an event whose
 * value is unusable or absent (pid / tid: columns.BAD_THREAD). */
enum { T_NAME, T_CAT, T_PID, T_TID, T_KERNEL };
static const char *const TEXT_COLUMNS[5] = {"name", "cat", "pid", "tid", "launch_kernel"};
static const char *const BAD_TEXT[5] = {"", "", "?", "?", ""};

/* The u8 rows (native_chunk.add_decoded reads them in this order). */
enum { F_COMPLETE, F_BAD_TS, F_BAD_DUR, F_BAD_NAME, F_BAD_CAT, F_BAD_PID, F_BAD_TID, N_FLAGS };
static const char *const FLAGS[N_FLAGS] = {"complete", "bad_ts", "bad_dur", "bad_name", "bad_cat", "bad_pid",
                                           "bad_tid"};

/* The shape arguments of an event, as arg_lengths and arg_blob give them (columns.OpArgsStore: DIMS, TYPES,
 * CONCRETE, STRIDES): the argument, or the second where the first is absent (-1: none). */
static const int SHAPE_ARGS[4][2] = {
    {A_INPUT_DIMS, A_INPUT_DIMS_2021}, {A_INPUT_TYPES, -1}, {A_CONCRETE_INPUTS, -1}, {A_INPUT_STRIDES, -1},
};

/* Keys by length, then bytes (memcmp of a constant length: inlined). */
#define IS(lit) (memcmp(s, lit, sizeof(lit) - 1) == 0)

static int event_key(cptr s, size_t len)
{
    switch (len) {
    case 2:
        return IS("ph") ? K_PH : IS("ts") ? K_TS : -1;
    case 3:
        return IS("pid") ? K_PID : IS("tid") ? K_TID : IS("cat") ? K_CAT : IS("dur") ? K_DUR : -1;
    case 4:
        return IS("name") ? K_NAME : IS("args") ? K_ARGS : -1;
    default:
        return -1;
    }
}

static int arg_key(cptr s, size_t len)
{
    switch (len) {
    case 4:
        return IS("Addr") ? A_ADDR : -1;
    case 5:
        return IS("Bytes") ? A_NBYTES : IS("bytes") ? A_MEMCPY_BYTES : -1;
    case 6:
        return IS("device") ? A_DEVICE : IS("stream") ? A_STREAM : IS("kernel") ? A_KERNEL : -1;
    case 9:
        return IS("Python id") ? A_PYTHON_ID : IS("Device Id") ? A_DEVICE_ID : -1;
    case 10:
        return IS("Input Dims") ? A_INPUT_DIMS : IS("Input type") ? A_INPUT_TYPES
             : IS("Input dims") ? A_INPUT_DIMS_2021 : -1;
    case 11:
        return IS("External id") ? A_EXTERNAL_ID : IS("correlation") ? A_CORRELATION
             : IS("Device Type") ? A_DEVICE_TYPE : IS("graphNodeId") ? A_GRAPH_NODE_ID_ALT : -1;
    case 13:
        return IS("Input Strides") ? A_INPUT_STRIDES : IS("graph node id") ? A_GRAPH_NODE_ID : -1;
    case 15:
        return IS("Concrete Inputs") ? A_CONCRETE_INPUTS : -1;
    case 16:
        return IS("Python parent id") ? A_PYTHON_PARENT_ID : -1;
    default:
        return -1;
    }
}
#undef IS

typedef struct {
    uint32_t seen;                 /* event keys present */
    uint32_t arg_seen;             /* argument keys present */
    Value f[N_EVENT_KEYS];
    Value a[N_ARG_KEYS];
    double ts, dur;
} Event;

/* What a kept event contributes, as it is stored until the chunk's columns are made. */
typedef struct {
    double ts, dur;
    int64_t ints[5];
    int64_t ids[5];
    int32_t codes[5];
    unsigned char flags[N_FLAGS];
} Record;

typedef struct {
    int64_t row;
    size_t start[4], stop[4];      /* start == stop: absent */
} ArgRow;

typedef struct {
    Cursor c;
    Record *recs;
    size_t nrecs, caprecs;
    size_t others;
    Table tables[5];               /* name, cat, pid, tid, launch_kernel */
    Buf argrows;                   /* ArgRow[] */
    Buf scratch;                   /* a decoded escaped string */
    /* Per int column of the kept events: a numeric text was seen (the Python path then converts the whole
     * column through float64), an int beyond 2**53 was seen (which that conversion would round). */
    int int_text[5], int_big[5];
    /* pid / tid: the last int and its code, by table (only T_PID and T_TID are used) */
    int64_t last_int[5];
    int32_t last_int_code[5];
} Ctx;

static int check_time(Ctx *x, const Value *v, double *out)
{
    if (v->kind == V_NULL) {
        *out = NAN;
        return OK;
    }
    if (v->kind != V_INT && v->kind != V_FLOAT)
        return FALLBACK;
    return number_to_double(x->c.base, v, out);
}

/* The text of a Scalar int argument that ROCm traces write ("bytes": "8192", "stream": "0x0"), where what
 * the Python path makes of it is certain: float(text) of at most 15 decimal digits (optional '-') is that
 * integer exactly (below 2**53); "0x" and hex digits is never a float (ValueError: the default). Anything
 * else (spaces, exponents, "inf", underscores, other digits float() takes): 0, the Python path. */
static int numeric_text(Value *v)
{
    cptr s = v->s, end = v->s + v->len;
    int neg = 0;
    int64_t value = 0;
    if (v->esc || v->len == 0)
        return 0;
    if (v->len > 2 && s[0] == '0' && s[1] == 'x') {
        for (s += 2; s < end; s++)
            if (!(is_digit(*s) || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))
                return 0;
        v->numeric = STR_NOT_A_NUMBER;
        return 1;
    }
    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (s == end || end - s > 15)
        return 0;
    for (; s < end; s++) {
        if (!is_digit(*s))
            return 0;
        value = value * 10 + (*s - '0');
    }
    v->i = neg ? -value : value;
    v->numeric = STR_INT;
    return 1;
}

/* An argument read into e->a[id]; FALLBACK where its type is not the plain one. */
static int read_arg(Ctx *x, Event *e, int id)
{
    Value *v = &e->a[id];
    v->numeric = 0;
    if (read_value(&x->c, v) != OK)
        return FALLBACK;
    switch (ARG_KEYS[id].kind) {
    case ARG_RAW:
        return OK;   /* raw JSON, any value */
    case ARG_ID:
        if (v->kind == V_NULL)
            return OK;
        if (v->kind != V_INT || v->big || v->i < 0)
            return FALLBACK;
        return OK;
    case ARG_TEXT:
        return v->kind == V_NULL || v->kind == V_STR ? OK : FALLBACK;
    default:   /* ARG_SCALAR: the Scalar ints */
        if (v->kind == V_NULL)
            return OK;
        if (v->kind == V_STR)
            return numeric_text(v) ? OK : FALLBACK;
        return v->kind == V_INT && !v->big ? OK : FALLBACK;
    }
}

/* The members of the object at the cursor (which is at its '{'): for each, the key (an escaped key or any
 * syntax outside strict JSON is FALLBACK) and then `member`, which reads the value. Its non-OK result ends
 * the walk and is returned. */
typedef int (*MemberFn)(Ctx *x, Event *e, const Value *key);

static int walk_object(Ctx *x, Event *e, MemberFn member)
{
    Cursor *c = &x->c;
    Value key;
    int rc;
    if (c->p >= c->end || *c->p != '{')
        return FALLBACK;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return OK;
    }
    for (;;) {
        if (c->p >= c->end || *c->p != '"' || scan_string(c, &key) != OK || key.esc)
            return FALLBACK;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':')
            return FALLBACK;
        c->p++;
        skip_ws(c);
        if ((rc = member(x, e, &key)) != OK)
            return rc;
        skip_ws(c);
        if (c->p >= c->end)
            return FALLBACK;
        if (*c->p == ',') {
            c->p++;
            skip_ws(c);
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            return OK;
        }
        return FALLBACK;
    }
}

static int skip_member(Ctx *x)
{
    Value skipped;
    return read_value(&x->c, &skipped) == OK ? OK : FALLBACK;
}

static int args_member(Ctx *x, Event *e, const Value *key)
{
    int id = arg_key(key->s, key->len);
    if (id < 0)
        return skip_member(x);
    if (e->arg_seen & (1u << id))
        return FALLBACK;
    e->arg_seen |= 1u << id;
    return read_arg(x, e, id) == OK ? OK : FALLBACK;
}

static int event_member(Ctx *x, Event *e, const Value *key)
{
    Cursor *c = &x->c;
    int id = event_key(key->s, key->len);
    Value *v;
    if (id < 0)
        return skip_member(x);
    v = &e->f[id];
    if (e->seen & (1u << id))
        return FALLBACK;
    e->seen |= 1u << id;
    if (id == K_ARGS && c->p < c->end && *c->p == '{') {
        v->kind = V_OBJECT;
        return walk_object(x, e, args_member) == OK ? OK : FALLBACK;
    }
    if (read_value(c, v) != OK)
        return FALLBACK;
    switch (id) {
    case K_PH: case K_CAT: case K_NAME:
        return v->kind == V_STR || v->kind == V_NULL ? OK : FALLBACK;
    case K_PID: case K_TID:
        return v->kind == V_STR || v->kind == V_NULL || (v->kind == V_INT && !v->big) ? OK : FALLBACK;
    case K_TS:
        return check_time(x, v, &e->ts);
    case K_DUR:
        return check_time(x, v, &e->dur);
    default:   /* K_ARGS, not an object */
        return v->kind == V_NULL ? OK : FALLBACK;
    }
}

static int parse_event(Ctx *x, Event *e)
{
    e->seen = e->arg_seen = 0;
    return walk_object(x, e, event_member);
}

/* The decoded bytes of a string value: a view of the buffer, or the scratch buffer (then *copy = 1). */
static int string_bytes(Ctx *x, const Value *v, cptr *s, size_t *len, int *copy)
{
    if (!v->esc) {
        *s = v->s;
        *len = v->len;
        *copy = 0;
        return OK;
    }
    if (decode_escaped(v, &x->scratch) != OK)
        return NOMEM;
    *s = x->scratch.data;
    *len = x->scratch.len;
    *copy = 1;
    return OK;
}

static int equals_text(Ctx *x, const Value *v, const char *text, size_t n, int *eq)
{
    cptr s;
    size_t len;
    int copy;
    if (string_bytes(x, v, &s, &len, &copy) != OK)
        return NOMEM;
    *eq = len == n && memcmp(s, text, n) == 0;
    return OK;
}

static int intern_value(Ctx *x, int table, const Value *v, int32_t *code)
{
    cptr s;
    size_t len;
    int copy;
    if (string_bytes(x, v, &s, &len, &copy) != OK)
        return NOMEM;
    return table_intern(&x->tables[table], s, len, copy, code);
}

/* pid / tid: a string as it is, an int as its decimal text (str(int)), "?" (bad) where absent or null. */
static int intern_thread(Ctx *x, int table, const Event *e, int key, int32_t *code, unsigned char *bad)
{
    const Value *v = &e->f[key];
    *bad = 0;
    if (!(e->seen & (1u << key)) || v->kind == V_NULL) {
        *bad = 1;
        return table_intern(&x->tables[table], (cptr)BAD_TEXT[table], strlen(BAD_TEXT[table]), 0, code);
    }
    if (v->kind == V_STR)
        return intern_value(x, table, v, code);
    if (x->last_int_code[table] >= 0 && x->last_int[table] == v->i) {   /* the previous event's id */
        *code = x->last_int_code[table];
        return OK;
    }
    {
        int rc;
        char digits[24];
        size_t n = sizeof(digits);
        uint64_t mag = v->i < 0 ? (uint64_t)0 - (uint64_t)v->i : (uint64_t)v->i;
        do {
            digits[--n] = (char)('0' + mag % 10);
            mag /= 10;
        } while (mag);
        if (v->i < 0)
            digits[--n] = '-';
        rc = table_intern(&x->tables[table], (cptr)digits + n, sizeof(digits) - n, 1, code);
        if (rc == OK) {
            x->last_int[table] = v->i;
            x->last_int_code[table] = *code;
        }
        return rc;
    }
}

static int intern_text(Ctx *x, int table, const Event *e, int key, int32_t *code, unsigned char *bad)
{
    const Value *v = &e->f[key];
    if ((e->seen & (1u << key)) && v->kind == V_STR) {
        *bad = 0;
        return intern_value(x, table, v, code);
    }
    *bad = 1;
    return table_intern(&x->tables[table], (cptr)BAD_TEXT[table], strlen(BAD_TEXT[table]), 0, code);
}

/* An id or int argument: its value (1), or absent / null (0: *out = dflt). A numeric text sets *text
 * (its value, or dflt for a text that is not a number). */
static int int_arg(const Event *e, int id, int64_t dflt, int64_t *out, int *text)
{
    const Value *v = &e->a[id];
    if (!(e->arg_seen & (1u << id)) || v->kind == V_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->kind == V_STR) {
        *text = 1;
        *out = v->numeric == STR_INT ? v->i : dflt;
    } else {
        *out = v->i;
    }
    return 1;
}

/* An int argument with its default (absent and null alike); `text` set where it was a numeric text. */
static int64_t int_or(const Event *e, int id, int64_t dflt, int *text)
{
    int64_t v;
    int_arg(e, id, dflt, &v, text);
    return v;
}

/* A column's value: its first argument where present and not null, else its second (where it has one), else
 * its default. */
static int64_t column_value(const Event *e, const IntColumn *col, int *text)
{
    int64_t v;
    if (col->second < 0)
        return int_or(e, col->first, col->dflt, text);
    if (int_arg(e, col->first, col->dflt, &v, text))
        return v;
    return int_or(e, col->second, col->dflt, text);
}

static int keep_event(Ctx *x, const Event *e)
{
    Record *r;
    int rc;
    int has_args = (e->seen & (1u << K_ARGS)) && e->f[K_ARGS].kind == V_OBJECT;
    if (room_for_one((void **)&x->recs, &x->caprecs, x->nrecs, sizeof(Record), 1024) != OK)
        return NOMEM;
    r = &x->recs[x->nrecs];
    memset(r->flags, 0, sizeof(r->flags));
    if ((e->seen & (1u << K_PH)) && e->f[K_PH].kind == V_STR) {
        int eq;
        if (equals_text(x, &e->f[K_PH], COMPLETE_PHASE, sizeof(COMPLETE_PHASE) - 1, &eq) != OK)
            return NOMEM;
        r->flags[F_COMPLETE] = (unsigned char)eq;
    }
    if ((e->seen & (1u << K_TS)) && e->f[K_TS].kind != V_NULL) {
        r->ts = e->ts;
    } else {
        r->ts = NAN;
        r->flags[F_BAD_TS] = 1;
    }
    if ((e->seen & (1u << K_DUR)) && e->f[K_DUR].kind != V_NULL) {
        r->dur = e->dur;
    } else {
        r->dur = NAN;
        r->flags[F_BAD_DUR] = 1;
    }
    if ((rc = intern_text(x, T_NAME, e, K_NAME, &r->codes[T_NAME], &r->flags[F_BAD_NAME])) != OK)
        return rc;
    if ((rc = intern_text(x, T_CAT, e, K_CAT, &r->codes[T_CAT], &r->flags[F_BAD_CAT])) != OK)
        return rc;
    if ((rc = intern_thread(x, T_PID, e, K_PID, &r->codes[T_PID], &r->flags[F_BAD_PID])) != OK)
        return rc;
    if ((rc = intern_thread(x, T_TID, e, K_TID, &r->codes[T_TID], &r->flags[F_BAD_TID])) != OK)
        return rc;
    if (has_args && (e->arg_seen & (1u << A_KERNEL)) && e->a[A_KERNEL].kind == V_STR)
        rc = intern_value(x, T_KERNEL, &e->a[A_KERNEL], &r->codes[T_KERNEL]);
    else
        rc = table_intern(&x->tables[T_KERNEL], (cptr)BAD_TEXT[T_KERNEL], strlen(BAD_TEXT[T_KERNEL]), 0,
                          &r->codes[T_KERNEL]);
    if (rc != OK)
        return rc;
    if (has_args) {
        int text[5] = {0, 0, 0, 0, 0}, ids_text = 0, k;
        for (k = 0; k < 5; k++) {
            r->ints[k] = column_value(e, &INT_COLUMNS[k], &text[k]);
            r->ids[k] = column_value(e, &ID_COLUMNS[k], &ids_text);   /* ids are never text (read_arg) */
        }
        for (k = 0; k < 5; k++) {
            x->int_text[k] |= text[k];
            if (!text[k] && (r->ints[k] > (int64_t)TWO_53 || r->ints[k] < -(int64_t)TWO_53))
                x->int_big[k] = 1;
        }
    } else {
        int k;
        for (k = 0; k < 5; k++) {
            r->ints[k] = INT_COLUMNS[k].dflt;
            r->ids[k] = ID_COLUMNS[k].dflt;
        }
    }
    if (has_args) {
        uint32_t mask = 0;
        int k, j;
        for (k = 0; k < 4; k++)
            for (j = 0; j < 2; j++)
                if (SHAPE_ARGS[k][j] >= 0)
                    mask |= 1u << SHAPE_ARGS[k][j];
        if (e->arg_seen & mask) {
            ArgRow row;
            int which[4];
            for (k = 0; k < 4; k++)
                which[k] = SHAPE_ARGS[k][1] < 0 || (e->arg_seen & (1u << SHAPE_ARGS[k][0])) ? SHAPE_ARGS[k][0]
                                                                                             : SHAPE_ARGS[k][1];
            row.row = (int64_t)x->nrecs;
            for (k = 0; k < 4; k++) {
                if (e->arg_seen & (1u << which[k])) {
                    row.start[k] = e->a[which[k]].start;
                    row.stop[k] = e->a[which[k]].stop;
                } else {
                    row.start[k] = row.stop[k] = 0;
                }
            }
            if (buf_append(&x->argrows, &row, sizeof(row)) != OK)
                return NOMEM;
        }
    }
    x->nrecs++;
    return OK;
}

static int is_skipped(Ctx *x, const Event *e, int *skipped)
{
    *skipped = 0;
    if ((e->seen & (1u << K_PH)) && e->f[K_PH].kind == V_STR) {
        cptr s;
        size_t len;
        int copy;
        if (string_bytes(x, &e->f[K_PH], &s, &len, &copy) != OK)
            return NOMEM;
        if (len == 1 && memchr(SKIPPED_PHASES, s[0], sizeof(SKIPPED_PHASES) - 1) != NULL) {
            *skipped = 1;
            return OK;
        }
    }
    if ((e->seen & (1u << K_CAT)) && e->f[K_CAT].kind == V_STR) {
        int eq = 0, k;
        for (k = 0; k < N_SKIPPED_CATS && !eq; k++)
            if (equals_text(x, &e->f[K_CAT], SKIPPED_CATS[k], strlen(SKIPPED_CATS[k]), &eq) != OK)
                return NOMEM;
        *skipped = eq;
    }
    return OK;
}

/* Up to max_events elements of the trace's event array, from c->p (just after the array's '[' when
 * `first`, else just after a ','). *status: EV_FULL (max_events read, c->p after the ',' that follows the
 * last), EV_DONE (the array closed, c->p after its ']'). FALLBACK for anything else, a truncated buffer
 * included: the caller tells those apart with skip_events. */
enum { EV_FULL = 0, EV_DONE = 1 };

static int parse_events_at(Ctx *x, Py_ssize_t max_events, int first, int *status)
{
    Cursor *c = &x->c;
    Event e;
    int rc, skipped, k;
    Py_ssize_t count = 0;
    skip_ws(c);
    if (first && c->p < c->end && *c->p == ']') {
        c->p++;
        *status = EV_DONE;
        return OK;
    }
    for (;;) {
        if ((rc = parse_event(x, &e)) != OK)
            return rc;
        if ((rc = is_skipped(x, &e, &skipped)) != OK)
            return rc;
        if (skipped)
            x->others++;
        else if ((rc = keep_event(x, &e)) != OK)
            return rc;
        count++;
        skip_ws(c);
        if (c->p >= c->end)
            return FALLBACK;
        if (*c->p == ',') {
            c->p++;
            if (count == max_events) {
                *status = EV_FULL;
                break;
            }
            skip_ws(c);
            continue;
        }
        if (*c->p == ']') {
            c->p++;
            *status = EV_DONE;
            break;
        }
        return FALLBACK;
    }
    for (k = 0; k < 5; k++)
        if (x->int_text[k] && x->int_big[k])
            return FALLBACK;
    return OK;
}

/* One whole chunk: a JSON array of events and nothing after it (white space aside). */
static int parse_chunk(Ctx *x)
{
    Cursor *c = &x->c;
    int rc, status;
    skip_ws(c);
    if (c->p >= c->end || *c->p != '[')
        return FALLBACK;
    c->p++;
    if ((rc = parse_events_at(x, PY_SSIZE_T_MAX, 1, &status)) != OK)
        return rc;
    skip_ws(c);
    return c->p == c->end ? OK : FALLBACK;
}

/* ------------------------------------------------------------------------------------------------ */
/* Results                                                                                           */

static PyObject *new_bytes(size_t size, char **data)
{
    PyObject *b;
    if (size > (size_t)PY_SSIZE_T_MAX)
        return PyErr_NoMemory();
    b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (b != NULL)
        *data = PyBytes_AsString(b);
    return b;
}

static PyObject *build_uniques(Table *t)
{
    size_t i;
    PyObject *list = PyList_New((Py_ssize_t)t->count);
    if (list == NULL)
        return NULL;
    for (i = 0; i < t->count; i++) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)t->entries[i].s, (Py_ssize_t)t->entries[i].len,
                                           "strict");
        if (s == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, s);   /* steals s; cannot fail: a new list, i in range */
    }
    return list;
}

static PyObject *build_result(Ctx *x)
{
    size_t n = x->nrecs, i, k, m = x->argrows.len / sizeof(ArgRow), blob_len = 0;
    const ArgRow *rows = (const ArgRow *)x->argrows.data;
    PyObject *i64 = NULL, *f64 = NULL, *i32 = NULL, *u8 = NULL, *uniques = NULL, *arg_rows = NULL;
    PyObject *arg_lengths = NULL, *blob = NULL, *result = NULL;
    char *pi64 = NULL, *pf64 = NULL, *pi32 = NULL, *pu8 = NULL, *prows = NULL, *plengths = NULL;
    char *pblob = NULL;
    if (n > SIZE_MAX / 80 || m > SIZE_MAX / 32) {
        PyErr_NoMemory();
        return NULL;
    }
    for (i = 0; i < m; i++)
        for (k = 0; k < 4; k++)
            blob_len += rows[i].stop[k] - rows[i].start[k];   /* disjoint ranges of the buffer */
    if ((i64 = new_bytes(n * 10 * sizeof(int64_t), &pi64)) == NULL
        || (f64 = new_bytes(n * 2 * sizeof(double), &pf64)) == NULL
        || (i32 = new_bytes(n * 5 * sizeof(int32_t), &pi32)) == NULL
        || (u8 = new_bytes(n * N_FLAGS, &pu8)) == NULL
        || (arg_rows = new_bytes(m * sizeof(int64_t), &prows)) == NULL
        || (arg_lengths = new_bytes(m * 4 * sizeof(int64_t), &plengths)) == NULL
        || (blob = new_bytes(blob_len, &pblob)) == NULL)
        goto done;
    {
        int64_t *oi = (int64_t *)pi64;
        double *of = (double *)pf64;
        int32_t *oc = (int32_t *)pi32;
        unsigned char *ou = (unsigned char *)pu8;
        for (i = 0; i < n; i++) {
            const Record *r = &x->recs[i];
            for (k = 0; k < 5; k++) {
                oi[k * n + i] = r->ints[k];
                oi[(5 + k) * n + i] = r->ids[k];
                oc[k * n + i] = r->codes[k];
            }
            of[i] = r->ts;
            of[n + i] = r->dur;
            for (k = 0; k < N_FLAGS; k++)
                ou[k * n + i] = r->flags[k];
        }
    }
    {
        int64_t *orow = (int64_t *)prows, *olen = (int64_t *)plengths;
        char *ob = pblob;
        for (i = 0; i < m; i++) {
            orow[i] = rows[i].row;
            for (k = 0; k < 4; k++) {
                size_t len = rows[i].stop[k] - rows[i].start[k];
                olen[i * 4 + k] = (int64_t)len;
                if (len)
                    memcpy(ob, x->c.base + rows[i].start[k], len);
                ob += len;
            }
        }
    }
    uniques = PyTuple_New(5);
    if (uniques == NULL)
        goto done;
    for (k = 0; k < 5; k++) {
        PyObject *list = build_uniques(&x->tables[k]);
        if (list == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {   /* not expected: validated */
                PyErr_Clear();
                result = Py_None;
                Py_INCREF(result);
            }
            goto done;
        }
        PyTuple_SetItem(uniques, (Py_ssize_t)k, list);   /* steals list; cannot fail */
    }
    result = Py_BuildValue("(nnOOOOOOOO)", (Py_ssize_t)n, (Py_ssize_t)x->others, i64, f64, i32, u8, uniques,
                           arg_rows, arg_lengths, blob);
done:
    Py_XDECREF(i64);
    Py_XDECREF(f64);
    Py_XDECREF(i32);
    Py_XDECREF(u8);
    Py_XDECREF(uniques);
    Py_XDECREF(arg_rows);
    Py_XDECREF(arg_lengths);
    Py_XDECREF(blob);
    return result;
}

static void ctx_free(Ctx *x)
{
    int k;
    free(x->recs);
    x->recs = NULL;
    for (k = 0; k < 5; k++)
        table_free(&x->tables[k]);
    buf_free(&x->argrows);
    buf_free(&x->scratch);
}

PyDoc_STRVAR(decode_chunk_doc,
"decode_chunk(buf) -> tuple | None\n\n"
"One chunk of kineto events (a JSON array of event objects) as columns: (kept, others, i64, f64, i32, u8,\n"
"uniques, arg_rows, arg_lengths, arg_blob); None where anything is outside the plain case (the Python path\n"
"then decodes the chunk). See the module source for the layout.");

static void ctx_init(Ctx *x, cptr base, Py_ssize_t len, Py_ssize_t start)
{
    int k;
    memset(x, 0, sizeof(*x));
    for (k = 0; k < 5; k++)
        x->last_int_code[k] = -1;
    x->c.base = base;
    x->c.p = base + start;
    x->c.end = base + len;
}

/* What a decode answers after parsing (rc): the columns, with (status, next) before them when
 * `with_position`; None for the Python path; NULL with MemoryError. Frees the context. */
static PyObject *decode_answer(Ctx *x, int rc, int status, int with_position)
{
    PyObject *result = NULL, *columns;
    if (rc == OK) {
        columns = build_result(x);
        if (columns == NULL || columns == Py_None || !with_position)
            result = columns;
        else
            result = Py_BuildValue("(inN)", status, (Py_ssize_t)(x->c.p - x->c.base), columns);
    } else if (rc == NOMEM) {
        PyErr_NoMemory();
    } else {
        result = Py_None;
        Py_INCREF(result);
    }
    ctx_free(x);
    return result;
}

static PyObject *decode_chunk(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    Ctx x;
    PyObject *result;
    (void)module;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0)
        return NULL;
    ctx_init(&x, (cptr)view.buf, view.len, 0);
    result = decode_answer(&x, parse_chunk(&x), EV_DONE, 0);
    PyBuffer_Release(&view);
    return result;
}

/* (buf, start, max_events, first) of decode_events_at and skip_events; -1 with an exception set. */
static int at_arguments(PyObject *args, Py_buffer *view, Py_ssize_t *start, Py_ssize_t *max_events, int *first)
{
    if (!PyArg_ParseTuple(args, "y*nnp", view, start, max_events, first))
        return -1;
    if (*start < 0 || *start > view->len || *max_events < 1) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "start out of range or max_events < 1");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(decode_events_at_doc,
"decode_events_at(buf, start, max_events, first) -> (status, next, columns) | None\n\n"
"Up to max_events elements of a trace's event array, read in place from buf[start:] (start: just after the\n"
"array's '[' when first, else just after a ','), as decode_chunk's tuple. status 0: max_events were read and\n"
"next is just after the ',' that follows them; 1: the array ended and next is just after its ']'. None where\n"
"anything is outside the plain case or buf ends first (skip_events tells which).");

static PyObject *decode_events_at(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, max_events;
    int first, rc, status = EV_FULL;
    Ctx x;
    PyObject *result;
    (void)module;
    if (at_arguments(args, &view, &start, &max_events, &first) != 0)
        return NULL;
    ctx_init(&x, (cptr)view.buf, view.len, start);
    rc = parse_events_at(&x, max_events, first, &status);
    result = decode_answer(&x, rc, status, 1);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(skip_events_doc,
"skip_events(buf, start, max_events, first) -> (status, next, count, stop) | None\n\n"
"The extent of up to max_events elements of a trace's event array from buf[start:], as decode_events_at\n"
"reads them, each validated as JSON but not decoded: count elements, the last ending at stop; status and\n"
"next as decode_events_at gives them. None where the JSON is invalid or buf ends first.");

static PyObject *skip_events(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, max_events, count = 0, stop;
    int first, status = EV_FULL;
    Cursor c;
    Value v;
    (void)module;
    if (at_arguments(args, &view, &start, &max_events, &first) != 0)
        return NULL;
    c.base = (cptr)view.buf;
    c.p = c.base + start;
    c.end = c.base + view.len;
    stop = start;
    skip_ws(&c);
    if (first && c.p < c.end && *c.p == ']') {
        c.p++;
        status = EV_DONE;
        goto found;
    }
    for (;;) {
        if (read_value(&c, &v) != OK)
            goto none;
        count++;
        stop = (Py_ssize_t)(c.p - c.base);
        skip_ws(&c);
        if (c.p >= c.end)
            goto none;
        if (*c.p == ',') {
            c.p++;
            if (count == max_events)
                break;
            skip_ws(&c);
            continue;
        }
        if (*c.p == ']') {
            c.p++;
            status = EV_DONE;
            break;
        }
        goto none;
    }
found:
    PyBuffer_Release(&view);
    return Py_BuildValue("(innn)", status, (Py_ssize_t)(c.p - c.base), count, stop);
none:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ */
/* The nesting walk (kernlint.trace.table._nest_thread_walk, the definition, event by event)          */

typedef struct {
    double end;
    int64_t row;
} Open;   /* an open interval on a kind's stack */

typedef struct {
    Open *items;
    size_t len, cap;
} Stack;

#define MAX_KINDS 8

static int get_array(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t length, int writable)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) != 0)
        return -1;
    if (view->itemsize != itemsize || (length >= 0 && view->len != length * itemsize)
        || view->len % itemsize != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "an array of the wrong item size or length");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(nest_walk_doc,
"nest_walk(part, ts, end, dur, flags, outs, top, op_kind) -> None\n\n"
"The nesting of one thread's events by a stack per kind, event by event, written in place: part (int64 rows\n"
"in order), ts, end, dur (float64 per row of the table), flags (a tuple of bool arrays per row, one per\n"
"kind), outs (a tuple of int64 arrays per row, one per kind: the innermost open event of that kind), top\n"
"(int64 per row: the outermost open event of kind op_kind; op_kind -1: none). As\n"
"kernlint.trace.table._nest_thread_walk.");

static PyObject *nest_walk(PyObject *module, PyObject *args)
{
    PyObject *part_o, *ts_o, *end_o, *dur_o, *flags_o, *outs_o, *top_o;
    int op_kind;
    Py_buffer part = {0}, ts = {0}, end = {0}, dur = {0}, top = {0};
    Py_buffer flags[MAX_KINDS], outs[MAX_KINDS];
    Stack stacks[MAX_KINDS];
    Py_ssize_t nk = 0, got_flags = 0, got_outs = 0, n, m, i, k;
    int failed = 1;
    (void)module;
    memset(stacks, 0, sizeof(stacks));
    if (!PyArg_ParseTuple(args, "OOOOO!O!Oi", &part_o, &ts_o, &end_o, &dur_o, &PyTuple_Type, &flags_o,
                          &PyTuple_Type, &outs_o, &top_o, &op_kind))
        return NULL;
    nk = PyTuple_Size(flags_o);
    if (nk > MAX_KINDS || PyTuple_Size(outs_o) != nk || op_kind >= nk) {
        PyErr_SetString(PyExc_ValueError, "flags and outs: one per kind, at most 8");
        return NULL;
    }
    if (get_array(part_o, &part, 8, -1, 0) != 0)
        return NULL;
    m = part.len / 8;
    if (get_array(ts_o, &ts, 8, -1, 0) != 0)
        goto done;
    n = ts.len / 8;
    if (get_array(end_o, &end, 8, n, 0) != 0)
        goto done;
    if (get_array(dur_o, &dur, 8, n, 0) != 0)
        goto done;
    if (get_array(top_o, &top, 8, n, 1) != 0)
        goto done;
    for (; got_flags < nk; got_flags++)
        if (get_array(PyTuple_GetItem(flags_o, got_flags), &flags[got_flags], 1, n, 0) != 0)
            goto done;
    for (; got_outs < nk; got_outs++)
        if (get_array(PyTuple_GetItem(outs_o, got_outs), &outs[got_outs], 8, n, 1) != 0)
            goto done;
    {
        const int64_t *rows = part.buf;
        const double *t_ = ts.buf, *e_ = end.buf, *d_ = dur.buf;
        int64_t *top_ = top.buf;
        for (i = 0; i < m; i++)
            if (rows[i] < 0 || rows[i] >= n) {
                PyErr_SetString(PyExc_ValueError, "a row out of range");
                goto done;
            }
        for (i = 0; i < m; i++) {
            int64_t row = rows[i];
            double t = t_[row];
            for (k = 0; k < nk; k++) {
                Stack *s = &stacks[k];
                while (s->len && t >= s->items[s->len - 1].end)
                    s->len--;
                if (s->len)
                    ((int64_t *)outs[k].buf)[row] = s->items[s->len - 1].row;
            }
            if (op_kind >= 0 && stacks[op_kind].len)
                top_[row] = stacks[op_kind].items[0].row;
            if (d_[row] <= 0)
                continue;
            for (k = 0; k < nk; k++) {
                Stack *s = &stacks[k];
                if (!((const unsigned char *)flags[k].buf)[row])
                    continue;
                if (room_for_one((void **)&s->items, &s->cap, s->len, sizeof(Open), 64) != OK) {
                    PyErr_NoMemory();
                    goto done;
                }
                s->items[s->len].end = e_[row];
                s->items[s->len++].row = row;
            }
        }
    }
    failed = 0;
done:
    for (k = 0; k < MAX_KINDS; k++)
        free(stacks[k].items);
    for (k = 0; k < got_flags; k++)
        PyBuffer_Release(&flags[k]);
    for (k = 0; k < got_outs; k++)
        PyBuffer_Release(&outs[k]);
    if (part.obj) PyBuffer_Release(&part);
    if (ts.obj) PyBuffer_Release(&ts);
    if (end.obj) PyBuffer_Release(&end);
    if (dur.obj) PyBuffer_Release(&dur);
    if (top.obj) PyBuffer_Release(&top);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ */
/* The tables, for the tests                                                                         */

/* A tuple of n strings; NULL with an exception set. */
static PyObject *str_tuple(const char *const *items, Py_ssize_t n)
{
    Py_ssize_t i;
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(items[i]);
        if (s == NULL || PyTuple_SetItem(t, i, s) != 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

/* The raw name of argument `id`, or None for -1. */
static PyObject *arg_name(int id)
{
    if (id < 0)
        Py_RETURN_NONE;
    return PyUnicode_FromString(ARG_KEYS[id].raw);
}

/* ((name, first argument's raw name, second's or None, default), ...) of n int columns. */
static PyObject *int_columns(const IntColumn *cols, Py_ssize_t n)
{
    Py_ssize_t i;
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *first = arg_name(cols[i].first), *second = arg_name(cols[i].second), *item = NULL;
        if (first != NULL && second != NULL)
            item = Py_BuildValue("(sOOL)", cols[i].name, first, second, (long long)cols[i].dflt);
        Py_XDECREF(first);
        Py_XDECREF(second);
        if (item == NULL || PyTuple_SetItem(t, i, item) != 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

/* The argument keys: ((field, raw name, kind), ...) in the order of their ids. */
static PyObject *arg_keys(void)
{
    Py_ssize_t i;
    PyObject *t = PyTuple_New(N_ARG_KEYS);
    if (t == NULL)
        return NULL;
    for (i = 0; i < N_ARG_KEYS; i++) {
        PyObject *item = Py_BuildValue("(sss)", ARG_KEYS[i].field, ARG_KEYS[i].raw, ARG_KINDS[ARG_KEYS[i].kind]);
        if (item == NULL || PyTuple_SetItem(t, i, item) != 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

static PyObject *shape_args(void)
{
    Py_ssize_t k;
    PyObject *t = PyTuple_New(4);
    if (t == NULL)
        return NULL;
    for (k = 0; k < 4; k++) {
        PyObject *first = arg_name(SHAPE_ARGS[k][0]), *second = arg_name(SHAPE_ARGS[k][1]), *item = NULL;
        if (first != NULL && second != NULL)
            item = PyTuple_Pack(2, first, second);
        Py_XDECREF(first);
        Py_XDECREF(second);
        if (item == NULL || PyTuple_SetItem(t, k, item) != 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

PyDoc_STRVAR(tables_doc,
"tables() -> dict\n\n"
"The facts this module shares with the Python path, as its decoding uses them: event_keys (RawEvent's fields),\n"
"arg_keys ((field, raw name, kind) of RawArgs), skipped_phases, skipped_cats, complete_phase, int_columns and\n"
"id_columns ((name, argument, fallback argument or None, default) per column, in the order of the i64 rows),\n"
"text_columns, bad_text (the stand-in text per text column), flags (the u8 rows), shape_args ((argument,\n"
"fallback or None) per field of arg_lengths), max_kinds (nest_walk), max_depth. SystemError where a key\n"
"matcher disagrees with its table.");

static PyObject *tables(PyObject *module, PyObject *unused)
{
    char letters[sizeof(SKIPPED_PHASES) - 1][2];
    const char *phase_names[sizeof(SKIPPED_PHASES) - 1];
    size_t i;
    PyObject *parts[10] = {NULL}, *result = NULL;
    (void)module;
    (void)unused;
    /* the matchers (switches on length and bytes, for speed) find every key of their table at its id */
    for (i = 0; i < N_EVENT_KEYS; i++)
        if (event_key((cptr)EVENT_KEYS[i], strlen(EVENT_KEYS[i])) != (int)i) {
            PyErr_Format(PyExc_SystemError, "event_key does not match %s", EVENT_KEYS[i]);
            return NULL;
        }
    for (i = 0; i < N_ARG_KEYS; i++)
        if (arg_key((cptr)ARG_KEYS[i].raw, strlen(ARG_KEYS[i].raw)) != (int)i) {
            PyErr_Format(PyExc_SystemError, "arg_key does not match %s", ARG_KEYS[i].raw);
            return NULL;
        }
    for (i = 0; i < sizeof(SKIPPED_PHASES) - 1; i++) {
        letters[i][0] = SKIPPED_PHASES[i];
        letters[i][1] = '\0';
        phase_names[i] = letters[i];
    }
    if ((parts[0] = str_tuple(EVENT_KEYS, N_EVENT_KEYS)) == NULL
        || (parts[1] = arg_keys()) == NULL
        || (parts[2] = str_tuple(phase_names, (Py_ssize_t)(sizeof(SKIPPED_PHASES) - 1))) == NULL
        || (parts[3] = str_tuple(SKIPPED_CATS, N_SKIPPED_CATS)) == NULL
        || (parts[4] = int_columns(INT_COLUMNS, 5)) == NULL
        || (parts[5] = int_columns(ID_COLUMNS, 5)) == NULL
        || (parts[6] = str_tuple(TEXT_COLUMNS, 5)) == NULL
        || (parts[7] = str_tuple(BAD_TEXT, 5)) == NULL
        || (parts[8] = str_tuple(FLAGS, N_FLAGS)) == NULL
        || (parts[9] = shape_args()) == NULL)
        goto done;
    result = Py_BuildValue("{sOsOsOsOsssOsOsOsOsOsOsisi}", "event_keys", parts[0], "arg_keys", parts[1],
                           "skipped_phases", parts[2], "skipped_cats", parts[3], "complete_phase", COMPLETE_PHASE,
                           "int_columns", parts[4], "id_columns", parts[5], "text_columns", parts[6],
                           "bad_text", parts[7], "flags", parts[8], "shape_args", parts[9],
                           "max_kinds", MAX_KINDS, "max_depth", MAX_DEPTH);
done:
    for (i = 0; i < 10; i++)
        Py_XDECREF(parts[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"tables", tables, METH_NOARGS, tables_doc},
    {"nest_walk", nest_walk, METH_VARARGS, nest_walk_doc},
    {"decode_chunk", decode_chunk, METH_O, decode_chunk_doc},
    {"decode_events_at", decode_events_at, METH_VARARGS, decode_events_at_doc},
    {"skip_events", skip_events, METH_VARARGS, skip_events_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kernlint.trace._kineto_chunk",
    "Kineto trace events decoded straight into kernlint's columns (see decode_chunk).", 0, methods,
    NULL, NULL, NULL, NULL,
};

static void seed_hash(void)
{
    PyObject *os = PyImport_ImportModule("os");
    PyObject *bytes = os ? PyObject_CallMethod(os, "urandom", "i", 8) : NULL;
    if (bytes && PyBytes_Check(bytes) && PyBytes_Size(bytes) == 8)
        memcpy(&hash_seed, PyBytes_AsString(bytes), 8);
    else
        PyErr_Clear();   /* no randomness at hand: the fixed seed, as before (only slower on crafted names) */
    Py_XDECREF(bytes);
    Py_XDECREF(os);
}

PyMODINIT_FUNC PyInit__kineto_chunk(void)
{
    seed_hash();
    return PyModule_Create(&module_def);
}
