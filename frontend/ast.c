/* frontend/ast.c — AST construction helpers and the AST dump.
 *
 * The dump is a stable, indented S-expression form used by
 * `kiln compile --emit=ast` and the AST golden test:
 *
 *   (model llama3_layer
 *     (dims B S T) @2:3
 *     (const (D 4096) (EPS 1e-5)) @3:3
 *     (input x bf16[B S D]) @4:3
 *     (assign (h) (call rmsnorm x ln1 (eps= EPS))) @10:3
 *     (output y (+ x1 (call linear ...))) @17:3)
 *
 * Numbers print as written in the source; each statement ends with its
 * line:column. */
#include "frontend/ast.h"
#include "util/vec.h"

#include <string.h>

fe_expr *fe_expr_new(arena *a, fe_expr_kind kind, src_loc loc)
{
    fe_expr *e = arena_alloc(a, sizeof *e);
    if (!e) return NULL;
    e->kind = kind;
    e->loc = loc;
    e->op_loc = loc;
    return e;
}

/* Append to an arena-backed vector: the old storage stays in the arena. */
static bool vec_push(arena *a, void **v, int *n, int *cap, size_t elem, const void *item)
{
    if (!vec_grow(v, cap, *n, elem, a)) return false;
    memcpy((char *)*v + (size_t)*n * elem, item, elem);
    (*n)++;
    return true;
}

bool fe_exprs_push(arena *a, fe_exprs *l, fe_expr *e)
{
    return vec_push(a, (void **)&l->v, &l->n, &l->cap, sizeof e, &e);
}

bool fe_args_push(arena *a, fe_args *l, fe_arg arg)
{
    return vec_push(a, (void **)&l->v, &l->n, &l->cap, sizeof arg, &arg);
}

bool fe_names_push(arena *a, fe_names *l, fe_name n)
{
    return vec_push(a, (void **)&l->v, &l->n, &l->cap, sizeof n, &n);
}

bool fe_constdefs_push(arena *a, fe_constdefs *l, fe_constdef c)
{
    return vec_push(a, (void **)&l->v, &l->n, &l->cap, sizeof c, &c);
}

bool fe_model_push(arena *a, fe_model *m, fe_stmt *s)
{
    return vec_push(a, (void **)&m->stmts, &m->nstmts, &m->cap, sizeof s, &s);
}

/* ---- dump ------------------------------------------------------------------ */

void fe_expr_print(const fe_expr *e, FILE *out)
{
    if (!e) {
        fputs("<null>", out);
        return;
    }
    switch (e->kind) {
    case FE_E_NUM: fputs(e->text, out); break;
    case FE_E_NAME: fputs(e->text, out); break;
    case FE_E_STRING: fprintf(out, "\"%s\"", e->text); break;
    case FE_E_BOOL: fputs(e->bval ? "true" : "false", out); break;
    case FE_E_LIST:
        fputc('[', out);
        for (int i = 0; i < e->items.n; i++) {
            if (i) fputc(' ', out);
            fe_expr_print(e->items.v[i], out);
        }
        fputc(']', out);
        break;
    case FE_E_CALL:
        fprintf(out, "(call %s", e->text);
        for (int i = 0; i < e->args.n; i++) {
            fputc(' ', out);
            if (e->args.v[i].name) {
                fprintf(out, "(%s= ", e->args.v[i].name);
                fe_expr_print(e->args.v[i].value, out);
                fputc(')', out);
            } else {
                fe_expr_print(e->args.v[i].value, out);
            }
        }
        fputc(')', out);
        break;
    case FE_E_BINOP:
        fprintf(out, "(%c ", e->op);
        fe_expr_print(e->lhs, out);
        fputc(' ', out);
        fe_expr_print(e->rhs, out);
        fputc(')', out);
        break;
    case FE_E_NEG:
        fputs("(neg ", out);
        fe_expr_print(e->lhs, out);
        fputc(')', out);
        break;
    }
}

static void print_type(const fe_type *t, FILE *out)
{
    fputs(t->dtype.name, out);
    if (!t->has_shape) return;
    fputc('[', out);
    for (int i = 0; i < t->dims.n; i++) {
        if (i) fputc(' ', out);
        fe_expr_print(t->dims.v[i], out);
    }
    fputc(']', out);
}

static const char *param_kind_name(ir_op k)
{
    return k == IR_OP_INPUT ? "input" : k == IR_OP_STATE ? "state" : "weight";
}

static void print_stmts(const fe_model *m, int indent, FILE *out)
{
    for (int i = 0; i < m->nstmts; i++) {
        const fe_stmt *s = m->stmts[i];
        fprintf(out, "\n%*s(", indent, "");
        switch (s->kind) {
        case FE_S_DIMS:
            fputs("dims", out);
            for (int j = 0; j < s->names.n; j++) fprintf(out, " %s", s->names.v[j].name);
            break;
        case FE_S_CONST:
            fputs("const", out);
            for (int j = 0; j < s->consts.n; j++) {
                fprintf(out, " (%s ", s->consts.v[j].name.name);
                fe_expr_print(s->consts.v[j].value, out);
                fputc(')', out);
            }
            break;
        case FE_S_PARAM:
            fprintf(out, "%s %s ", param_kind_name(s->param_kind), s->names.v[0].name);
            print_type(s->type, out);
            if (s->tensor) fprintf(out, " \"%s\"", s->tensor);
            break;
        case FE_S_LAYER:
            fprintf(out, "layer %s ", s->names.v[0].name);
            fe_expr_print(s->count, out);
            if (s->body) print_stmts(s->body, indent + 2, out);
            break;
        case FE_S_OUTPUT:
            fprintf(out, "output %s", s->names.v[0].name);
            if (s->type) {
                fputs(" : ", out);
                print_type(s->type, out);
            }
            if (s->value) {
                fputc(' ', out);
                fe_expr_print(s->value, out);
            }
            break;
        case FE_S_ASSIGN:
            fputs("assign (", out);
            for (int j = 0; j < s->names.n; j++)
                fprintf(out, "%s%s", j ? " " : "", s->names.v[j].name);
            fputs(") ", out);
            fe_expr_print(s->value, out);
            break;
        }
        fprintf(out, ") @%d:%d", s->loc.line, s->loc.col);
    }
}

void fe_ast_print(const fe_model *m, FILE *out)
{
    fprintf(out, "(model %s", m->name.name ? m->name.name : "?");
    print_stmts(m, 2, out);
    fputs(")\n", out);
}
