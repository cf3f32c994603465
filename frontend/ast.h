/* frontend/ast.h — the syntax tree of a model file.
 *
 * The parser (parser.y) builds it; lower.c turns it into an ir_graph. Every
 * node lives in one arena and carries a src_loc (file, line, col, end_col).
 * A location whose source extent spans several lines is clipped to the end of
 * its first line (the diagnostic renderer underlines one line). */
#ifndef KILN_FRONTEND_AST_H
#define KILN_FRONTEND_AST_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"
#include "util/arena.h"
#include "util/diag.h"

typedef enum {
    FE_E_NUM,   /* 4096, 1e-5 */
    FE_E_NAME,  /* x, EPS, bf16 */
    FE_E_STRING, /* "llama3" (text without the quotes) */
    FE_E_BOOL,  /* true, false */
    FE_E_LIST,  /* [a, b] */
    FE_E_CALL,  /* f(a, b, eps=1e-5) */
    FE_E_BINOP, /* a + b, a @ b */
    FE_E_NEG,   /* -a */
} fe_expr_kind;

typedef struct fe_expr fe_expr;

typedef struct fe_exprs {
    fe_expr **v;
    int n, cap;
} fe_exprs;

typedef struct fe_arg {
    const char *name; /* keyword; NULL for a positional argument */
    src_loc name_loc;
    fe_expr *value;
} fe_arg;

typedef struct fe_args {
    fe_arg *v;
    int n, cap;
} fe_args;

struct fe_expr {
    fe_expr_kind kind;
    src_loc loc;     /* the whole expression (first line) */
    src_loc op_loc;  /* BINOP/NEG: the operator; CALL: the function name */
    const char *text; /* NUM: the lexeme; NAME: the identifier; CALL: the function */
    bool is_int;     /* NUM */
    int64_t ival;    /* NUM when is_int */
    double fval;     /* NUM (also set for integers) */
    bool bval;       /* BOOL */
    char op;         /* BINOP: + - * / @ */
    fe_expr *lhs, *rhs; /* BINOP; NEG uses lhs */
    fe_exprs items;  /* LIST */
    fe_args args;    /* CALL */
    int depth;       /* nesting depth (the parser limits it) */
};

/* Deepest expression nesting accepted (keeps the recursive lowering's stack
 * use bounded on hostile input). */
#define FE_MAX_DEPTH 256

typedef struct fe_name {
    const char *name;
    src_loc loc;
} fe_name;

typedef struct fe_names {
    fe_name *v;
    int n, cap;
} fe_names;

typedef struct fe_type {
    fe_name dtype;   /* as written; checked during lowering */
    bool has_shape;  /* false for a bare `f32` (a scalar) */
    fe_exprs dims;
    src_loc loc;
} fe_type;

typedef struct fe_constdef {
    fe_name name;
    fe_expr *value;
} fe_constdef;

typedef struct fe_constdefs {
    fe_constdef *v;
    int n, cap;
} fe_constdefs;

typedef enum {
    FE_S_DIMS,   /* dims B, S, T */
    FE_S_CONST,  /* const D = 4096, EPS = 1e-5 */
    FE_S_PARAM,  /* input|state|weight NAME : TYPE */
    FE_S_OUTPUT, /* output NAME [: TYPE] [= expr] */
    FE_S_ASSIGN, /* a [, b ...] = expr */
    FE_S_LAYER,  /* layer i < N { stmts } */
} fe_stmt_kind;

typedef struct fe_model fe_model;

typedef struct fe_stmt {
    fe_stmt_kind kind;
    src_loc loc;       /* the statement's first token */
    ir_op param_kind;  /* PARAM: IR_OP_INPUT, IR_OP_STATE or IR_OP_WEIGHT */
    fe_names names;    /* DIMS: the names; PARAM/OUTPUT: one; ASSIGN: the targets */
    fe_constdefs consts; /* CONST */
    fe_type *type;     /* PARAM; OUTPUT when declared (else NULL) */
    fe_expr *value;    /* ASSIGN; OUTPUT when assigned (else NULL) */
    const char *tensor; /* PARAM: the tensor's name pattern (`= "model.layers.{i}.x"`), else NULL */
    src_loc tensor_loc;
    fe_expr *count;    /* LAYER: the number of instances (names.v[0] is the index) */
    fe_model *body;    /* LAYER: its statements */
} fe_stmt;

struct fe_model {
    fe_name name;
    src_loc loc;
    fe_stmt **stmts;
    int nstmts, cap;
};

/* ---- construction (arena-allocated; NULL only when out of memory) ------- */

fe_expr *fe_expr_new(arena *a, fe_expr_kind kind, src_loc loc);
bool fe_exprs_push(arena *a, fe_exprs *l, fe_expr *e);
bool fe_args_push(arena *a, fe_args *l, fe_arg arg);
bool fe_names_push(arena *a, fe_names *l, fe_name n);
bool fe_constdefs_push(arena *a, fe_constdefs *l, fe_constdef c);
bool fe_model_push(arena *a, fe_model *m, fe_stmt *s);

/* ---- parsing (parser.y) -------------------------------------------------- */

/* Parses `text` (len bytes, NUL-terminated) from `file`. Locations point at
 * `file` (the pointer is kept, not copied). Lexical and syntax errors go to d;
 * returns NULL when there were any (or when out of memory). */
fe_model *fe_parse(arena *a, diag_list *d, const char *file, const char *text, size_t len);

/* ---- dump (ast.c) ---------------------------------------------------------- */

void fe_ast_print(const fe_model *m, FILE *out);
void fe_expr_print(const fe_expr *e, FILE *out);

#endif
