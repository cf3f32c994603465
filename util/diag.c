/* util/diag.c — collecting and rendering located diagnostics. */
#include "util/diag.h"
#include "util/vec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void diag_list_init(diag_list *d, arena *a)
{
    memset(d, 0, sizeof *d);
    d->arena = a;
}

void diag_list_free(diag_list *d)
{
    free(d->items);
    d->items = NULL;
    d->count = d->cap = d->errors = 0;
}

void diag_list_clear(diag_list *d)
{
    d->count = 0;
    d->errors = 0;
    d->warnings = 0;
}

/* Records one diagnostic; warning: its diag_warning + 1, or 0. */
static void add_v(diag_list *d, diag_severity sev, src_loc loc, int warning, const char *fmt, va_list ap)
{
    int max = d->max_errors > 0 ? d->max_errors : 50;
    if (sev == DIAG_ERROR) {
        d->errors++;
        if (d->errors > max) return;
    }
    if (sev == DIAG_WARNING) d->warnings++;
    if (!VEC_GROW(d->items, d->count, d->cap, NULL)) return; /* out of memory: the error count still says it failed */
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *msg = n >= 0 ? arena_alloc(d->arena, (size_t)n + 1) : NULL;
    if (msg) vsnprintf(msg, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    /* the file name is kept with the diagnostic: a location may point into
     * a graph's arena, and the graph may be freed (a pass that fails) before
     * the diagnostics are printed */
    const char *prev = d->count ? d->items[d->count - 1].loc.file : NULL;
    if (loc.file && !(prev && !strcmp(prev, loc.file))) {
        const char *copy = arena_strdup(d->arena, loc.file);
        loc.file = copy ? copy : "?";
    } else if (loc.file) {
        loc.file = prev;
    }
    d->items[d->count++] = (diag){sev, loc, msg ? msg : "(out of memory)", warning};
}

void diag_add(diag_list *d, diag_severity sev, src_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_v(d, sev, loc, 0, fmt, ap);
    va_end(ap);
}

static const char *const warning_names[] = {
#define X(e, name, summary) name,
    DIAG_WARNINGS(X)
#undef X
};

static const char *const warning_summaries[] = {
#define X(e, name, summary) summary,
    DIAG_WARNINGS(X)
#undef X
};

const char *diag_warning_name(diag_warning w)
{
    return (int)w >= 0 && w < DIAG_W_COUNT ? warning_names[w] : NULL;
}

const char *diag_warning_summary(diag_warning w)
{
    return (int)w >= 0 && w < DIAG_W_COUNT ? warning_summaries[w] : NULL;
}

bool diag_warn(diag_list *d, diag_warning w, src_loc loc, const char *fmt, ...)
{
    if ((int)w < 0 || w >= DIAG_W_COUNT || (d->opts.disabled & (1u << w))) return false;
    va_list ap;
    va_start(ap, fmt);
    add_v(d, d->opts.werror ? DIAG_ERROR : DIAG_WARNING, loc, (int)w + 1, fmt, ap);
    va_end(ap);
    return true;
}

bool diag_warning_flag(diag_options *o, const char *flag)
{
    if (strncmp(flag, "-W", 2) != 0) return false;
    const char *name = flag + 2;
    bool off = strncmp(name, "no-", 3) == 0;
    if (off) name += 3;
    if (strcmp(name, "error") == 0) {
        o->werror = !off;
        return true;
    }
    unsigned bits = 0;
    if (strcmp(name, "all") == 0) bits = (1u << DIAG_W_COUNT) - 1;
    for (int k = 0; k < DIAG_W_COUNT; k++)
        if (strcmp(name, warning_names[k]) == 0) bits = 1u << k;
    if (!bits) return false;
    if (off) o->disabled |= bits;
    else o->disabled &= ~bits;
    return true;
}

static const char *sev_name(diag_severity s)
{
    switch (s) {
    case DIAG_ERROR: return "error";
    case DIAG_WARNING: return "warning";
    default: return "note";
    }
}

/* Find line `line` (1-based) in `src`; returns its start and sets *len. */
static const char *find_line(const char *src, int line, size_t *len)
{
    const char *p = src;
    for (int l = 1; l < line; l++) {
        p = strchr(p, '\n');
        if (!p) return NULL;
        p++;
    }
    const char *e = strchr(p, '\n');
    *len = e ? (size_t)(e - p) : strlen(p);
    if (*len && p[*len - 1] == '\r') (*len)--;
    return p;
}

void diag_print_one(const diag *g, FILE *out, const char *source)
{
    const src_loc *l = &g->loc;
    if (l->file && l->line > 0)
        fprintf(out, "%s:%d:%d: ", l->file, l->line, l->col > 0 ? l->col : 1);
    else if (l->file)
        fprintf(out, "%s: ", l->file);
    fprintf(out, "%s: %s", sev_name(g->severity), g->msg);
    if (g->warning > 0 && g->warning <= DIAG_W_COUNT)
        fprintf(out, " [-W%s%s]", g->severity == DIAG_ERROR ? "error=" : "", warning_names[g->warning - 1]);
    fputc('\n', out);
    if (!source || l->line <= 0 || l->col <= 0) return;
    size_t len;
    const char *text = find_line(source, l->line, &len);
    if (!text) return;
    fprintf(out, "  %.*s\n  ", (int)len, text);
    /* keep tabs so the caret lines up under tabbed source */
    for (int c = 1; c < l->col && (size_t)(c - 1) < len; c++)
        fputc(text[c - 1] == '\t' ? '\t' : ' ', out);
    fputc('^', out);
    for (int c = l->col + 1; c <= l->end_col && (size_t)(c - 1) < len; c++) fputc('~', out);
    fputc('\n', out);
}

void diag_print(const diag_list *d, FILE *out, const char *source)
{
    for (int i = 0; i < d->count; i++) diag_print_one(&d->items[i], out, source);
    int max = d->max_errors > 0 ? d->max_errors : 50;
    if (d->errors > max)
        fprintf(out, "too many errors (%d); stopped reporting after %d\n", d->errors, max);
}
