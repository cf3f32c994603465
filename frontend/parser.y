/* frontend/parser.y — the grammar of a model file.
 *
 *   file      : 'model' IDENT '{' stmt* '}'
 *   stmt      : 'dims' IDENT (',' IDENT)*
 *             | 'const' IDENT '=' expr (',' IDENT '=' expr)*
 *             | ('input' | 'state' | 'weight') IDENT ':' type ('=' STRING)?
 *             | 'layer' IDENT '<' expr '{' stmt* '}'
 *             | 'output' IDENT (':' type)? ('=' expr)?      (at least one of them)
 *             | IDENT (',' IDENT)* '=' expr
 *             | ';'
 *   type      : IDENT ('[' (expr (',' expr)*)? ']')?
 *   expr      : expr ('+' | '-') expr | expr ('*' | '/' | '@') expr | '-' expr | primary
 *   primary   : NUMBER | IDENT | STRING | 'true' | 'false' | '(' expr ')'
 *             | '[' (expr (',' expr)*)? ']'
 *             | IDENT '(' (arg (',' arg)*)? ')'
 *   arg       : expr | IDENT '=' expr | 'dims' '=' expr
 *
 * Newlines are insignificant: the grammar needs no separator between
 * statements (an identifier right after a complete expression always starts
 * a new one); `;` is an optional, empty statement.
 *
 * Error recovery is at statement level: `stmt: error`. A token filter between
 * flex and bison (fe_yylex below) decides where a new statement may begin
 * after an error: at a statement keyword, `}` or `;`, or at an identifier
 * that is the first token on its line and follows a token that ends an
 * expression. Tokens are discarded until such a point, so a broken statement
 * yields one error and the next statements are parsed as usual. */

%code requires {
#include "frontend/ast.h"
struct fe_parser;
}

%code provides {
int fe_yyparse(struct fe_parser *p);
}

%{
#include <stdlib.h>
#include <string.h>

#include "frontend/parse.h"
%}

%define api.pure full
%define api.prefix {fe_yy}
%define parse.error detailed
%locations
%parse-param {struct fe_parser *p}
%lex-param {struct fe_parser *p}

%union {
    const char *name;
    struct {
        const char *text;
        bool is_int;
        int64_t ival;
        double fval;
    } num;
    fe_expr *expr;
    fe_exprs exprs;
    fe_args args;
    fe_arg arg;
    fe_stmt *stmt;
    fe_names names;
    fe_constdefs consts;
    fe_type *type;
    fe_model *body;
    int kind;
}

%{
static int fe_yylex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, struct fe_parser *p);
static void fe_yyerror(FE_YYLTYPE *lloc, struct fe_parser *p, const char *msg);

static src_loc L(struct fe_parser *p, FE_YYLTYPE l)
{
    int end = l.first_line == l.last_line ? l.last_column : fe_parser_line_end(p, l.first_line);
    return fe_parser_loc(p, l.first_line, l.first_column, end);
}

static fe_expr *mk_expr(struct fe_parser *p, fe_expr_kind k, FE_YYLTYPE l)
{
    fe_expr *e = fe_expr_new(p->arena, k, L(p, l));
    if (!e) p->oom = true;
    return e;
}

static fe_stmt *mk_stmt(struct fe_parser *p, fe_stmt_kind k, FE_YYLTYPE l)
{
    fe_stmt *s = arena_alloc(p->arena, sizeof *s);
    if (!s) {
        p->oom = true;
        return NULL;
    }
    s->kind = k;
    s->loc = L(p, l);
    return s;
}

static fe_name mk_name(struct fe_parser *p, const char *name, FE_YYLTYPE l)
{
    return (fe_name){name, L(p, l)};
}

/* Record e's nesting depth; one error where it first passes the limit. */
static void set_depth(struct fe_parser *p, fe_expr *e, int child_depth)
{
    if (!e) return;
    e->depth = child_depth + 1;
    if (e->depth == FE_MAX_DEPTH + 1) {
        diag_error(p->diags, e->loc, "expression nested too deeply (more than %d levels)",
                   FE_MAX_DEPTH);
        p->errors++;
    }
}

static int depth_of(const fe_expr *e) { return e ? e->depth : 0; }

static int max_depth(const fe_expr *const *v, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++)
        if (depth_of(v[i]) > d) d = depth_of(v[i]);
    return d;
}

static fe_expr *mk_binop(struct fe_parser *p, char op, fe_expr *a, fe_expr *b, FE_YYLTYPE all,
                         FE_YYLTYPE opl)
{
    fe_expr *e = mk_expr(p, FE_E_BINOP, all);
    if (!e) return NULL;
    e->op = op;
    e->lhs = a;
    e->rhs = b;
    e->op_loc = L(p, opl);
    set_depth(p, e, depth_of(a) > depth_of(b) ? depth_of(a) : depth_of(b));
    return e;
}

#define CHECK_OOM(x) do { if (!(x)) p->oom = true; } while (0)
%}

%token MODEL "'model'" DIMS "'dims'" CONST "'const'"
%token INPUT "'input'" STATE "'state'" WEIGHT "'weight'" OUTPUT "'output'"
%token TRUE "'true'" FALSE "'false'"
%token LAYER "'layer'"
%token <name> IDENT "identifier"
%token <name> STRING "string"
%token <num> NUMBER "number"

%type <stmt> stmt
%type <expr> expr primary
%type <exprs> expr_list
%type <args> args
%type <arg> arg
%type <names> dim_names targets
%type <consts> const_defs
%type <type> type
%type <kind> param_kind
%type <body> layer_body

%left '+' '-'
%left '*' '/' '@'
%precedence NEG

%%

file
    : MODEL IDENT '{' stmts '}'
        { p->model->name = mk_name(p, $2, @2); p->model->loc = L(p, @1); }
    ;

stmts
    : %empty
    | stmts stmt
        { if ($2) CHECK_OOM(fe_model_push(p->arena, p->model, $2)); }
    ;

stmt
    : DIMS dim_names
        { $$ = mk_stmt(p, FE_S_DIMS, @1); if ($$) $$->names = $2; }
    | CONST const_defs
        { $$ = mk_stmt(p, FE_S_CONST, @1); if ($$) $$->consts = $2; }
    | param_kind IDENT ':' type
        {
            $$ = mk_stmt(p, FE_S_PARAM, @1);
            if ($$) {
                $$->param_kind = (ir_op)$1;
                CHECK_OOM(fe_names_push(p->arena, &$$->names, mk_name(p, $2, @2)));
                $$->type = $4;
            }
        }
    | param_kind IDENT ':' type '=' STRING
        {
            $$ = mk_stmt(p, FE_S_PARAM, @1);
            if ($$) {
                $$->param_kind = (ir_op)$1;
                CHECK_OOM(fe_names_push(p->arena, &$$->names, mk_name(p, $2, @2)));
                $$->type = $4;
                $$->tensor = $6;
                $$->tensor_loc = L(p, @6);
            }
        }
    | LAYER IDENT '<' expr '{' layer_body '}'
        {
            $$ = mk_stmt(p, FE_S_LAYER, @1);
            if ($$) {
                CHECK_OOM(fe_names_push(p->arena, &$$->names, mk_name(p, $2, @2)));
                $$->count = $4;
                $$->body = $6;
            }
        }
    | OUTPUT IDENT '=' expr
        {
            $$ = mk_stmt(p, FE_S_OUTPUT, @1);
            if ($$) {
                CHECK_OOM(fe_names_push(p->arena, &$$->names, mk_name(p, $2, @2)));
                $$->value = $4;
            }
        }
    | OUTPUT IDENT ':' type
        {
            $$ = mk_stmt(p, FE_S_OUTPUT, @1);
            if ($$) {
                CHECK_OOM(fe_names_push(p->arena, &$$->names, mk_name(p, $2, @2)));
                $$->type = $4;
            }
        }
    | OUTPUT IDENT ':' type '=' expr
        {
            $$ = mk_stmt(p, FE_S_OUTPUT, @1);
            if ($$) {
                CHECK_OOM(fe_names_push(p->arena, &$$->names, mk_name(p, $2, @2)));
                $$->type = $4;
                $$->value = $6;
            }
        }
    | targets '=' expr
        { $$ = mk_stmt(p, FE_S_ASSIGN, @1); if ($$) { $$->names = $1; $$->value = $3; } }
    | ';'
        { $$ = NULL; }
    | error
        {
            /* Keep the lookahead when a statement may start there; otherwise
             * drop it and let the token filter skip to such a point. */
            if (yychar == FE_YYEMPTY || !p->last_sync) {
                yyclearin;
                p->skipping = true;
            }
            $$ = NULL;
        }
    ;

layer_body
    : %empty
        { $$ = arena_alloc(p->arena, sizeof *$$); CHECK_OOM($$); }
    | layer_body stmt
        { $$ = $1; if ($$ && $2) CHECK_OOM(fe_model_push(p->arena, $$, $2)); }
    ;

dim_names
    : IDENT
        { $$ = (fe_names){0}; CHECK_OOM(fe_names_push(p->arena, &$$, mk_name(p, $1, @1))); }
    | dim_names ',' IDENT
        { $$ = $1; CHECK_OOM(fe_names_push(p->arena, &$$, mk_name(p, $3, @3))); }
    ;

targets
    : IDENT
        { $$ = (fe_names){0}; CHECK_OOM(fe_names_push(p->arena, &$$, mk_name(p, $1, @1))); }
    | targets ',' IDENT
        { $$ = $1; CHECK_OOM(fe_names_push(p->arena, &$$, mk_name(p, $3, @3))); }
    ;

const_defs
    : IDENT '=' expr
        {
            $$ = (fe_constdefs){0};
            CHECK_OOM(fe_constdefs_push(p->arena, &$$, (fe_constdef){mk_name(p, $1, @1), $3}));
        }
    | const_defs ',' IDENT '=' expr
        {
            $$ = $1;
            CHECK_OOM(fe_constdefs_push(p->arena, &$$, (fe_constdef){mk_name(p, $3, @3), $5}));
        }
    ;

param_kind
    : INPUT  { $$ = IR_OP_INPUT; }
    | STATE  { $$ = IR_OP_STATE; }
    | WEIGHT { $$ = IR_OP_WEIGHT; }
    ;

type
    : IDENT
        {
            $$ = arena_alloc(p->arena, sizeof *$$);
            CHECK_OOM($$);
            if ($$) { $$->dtype = mk_name(p, $1, @1); $$->loc = L(p, @$); }
        }
    | IDENT '[' ']'
        {
            $$ = arena_alloc(p->arena, sizeof *$$);
            CHECK_OOM($$);
            if ($$) { $$->dtype = mk_name(p, $1, @1); $$->has_shape = true; $$->loc = L(p, @$); }
        }
    | IDENT '[' expr_list ']'
        {
            $$ = arena_alloc(p->arena, sizeof *$$);
            CHECK_OOM($$);
            if ($$) {
                $$->dtype = mk_name(p, $1, @1);
                $$->has_shape = true;
                $$->dims = $3;
                $$->loc = L(p, @$);
            }
        }
    ;

expr
    : expr '+' expr          { $$ = mk_binop(p, '+', $1, $3, @$, @2); }
    | expr '-' expr          { $$ = mk_binop(p, '-', $1, $3, @$, @2); }
    | expr '*' expr          { $$ = mk_binop(p, '*', $1, $3, @$, @2); }
    | expr '/' expr          { $$ = mk_binop(p, '/', $1, $3, @$, @2); }
    | expr '@' expr          { $$ = mk_binop(p, '@', $1, $3, @$, @2); }
    | '-' expr %prec NEG
        {
            $$ = mk_expr(p, FE_E_NEG, @$);
            if ($$) { $$->lhs = $2; $$->op_loc = L(p, @1); set_depth(p, $$, depth_of($2)); }
        }
    | primary
    ;

primary
    : NUMBER
        {
            $$ = mk_expr(p, FE_E_NUM, @1);
            if ($$) {
                $$->text = $1.text;
                $$->is_int = $1.is_int;
                $$->ival = $1.ival;
                $$->fval = $1.fval;
            }
        }
    | IDENT
        { $$ = mk_expr(p, FE_E_NAME, @1); if ($$) $$->text = $1; }
    | STRING
        { $$ = mk_expr(p, FE_E_STRING, @1); if ($$) $$->text = $1; }
    | TRUE
        { $$ = mk_expr(p, FE_E_BOOL, @1); if ($$) $$->bval = true; }
    | FALSE
        { $$ = mk_expr(p, FE_E_BOOL, @1); if ($$) $$->bval = false; }
    | '(' expr ')'
        { $$ = $2; set_depth(p, $$, depth_of($2)); }
    | '[' ']'
        { $$ = mk_expr(p, FE_E_LIST, @$); }
    | '[' expr_list ']'
        {
            $$ = mk_expr(p, FE_E_LIST, @$);
            if ($$) { $$->items = $2; set_depth(p, $$, max_depth((const fe_expr *const *)$2.v, $2.n)); }
        }
    | IDENT '(' ')'
        { $$ = mk_expr(p, FE_E_CALL, @$); if ($$) { $$->text = $1; $$->op_loc = L(p, @1); } }
    | IDENT '(' args ')'
        {
            $$ = mk_expr(p, FE_E_CALL, @$);
            if ($$) {
                $$->text = $1;
                $$->op_loc = L(p, @1);
                $$->args = $3;
                int d = 0;
                for (int i = 0; i < $3.n; i++)
                    if (depth_of($3.v[i].value) > d) d = depth_of($3.v[i].value);
                set_depth(p, $$, d);
            }
        }
    ;

expr_list
    : expr                   { $$ = (fe_exprs){0}; CHECK_OOM(fe_exprs_push(p->arena, &$$, $1)); }
    | expr_list ',' expr     { $$ = $1; CHECK_OOM(fe_exprs_push(p->arena, &$$, $3)); }
    ;

args
    : arg                    { $$ = (fe_args){0}; CHECK_OOM(fe_args_push(p->arena, &$$, $1)); }
    | args ',' arg           { $$ = $1; CHECK_OOM(fe_args_push(p->arena, &$$, $3)); }
    ;

arg
    : expr                   { $$ = (fe_arg){NULL, {0}, $1}; }
    | IDENT '=' expr         { $$ = (fe_arg){$1, L(p, @1), $3}; }
    | DIMS '=' expr          { $$ = (fe_arg){"dims", L(p, @1), $3}; } /* rope(x, pos, dims=R): the keyword as an option name */
    ;

%%

/* the scanner (lexer.l); yyscan_t is a void pointer */
int fe_lxlex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, void *scanner);

src_loc fe_parser_loc(const fe_parser *p, int line, int col, int end_col)
{
    return (src_loc){p->file, line, col, end_col < col ? col : end_col};
}

int fe_parser_line_end(const fe_parser *p, int line)
{
    const char *s = p->text, *end = p->text + p->len;
    for (int l = 1; l < line && s < end; s++)
        if (*s == '\n') l++;
    int col = 0, last = 1;
    for (; s < end && *s != '\n' && *s != '#'; s++) {
        col++;
        if (*s != ' ' && *s != '\t' && *s != '\r') last = col;
    }
    return last;
}

/* Tokens after which an identifier cannot continue the statement. */
static bool ends_expr(int tok)
{
    return tok == IDENT || tok == NUMBER || tok == STRING || tok == ')' || tok == ']' || tok == TRUE ||
           tok == FALSE;
}

static bool starts_stmt(int tok)
{
    return tok == DIMS || tok == CONST || tok == INPUT || tok == STATE || tok == WEIGHT ||
           tok == OUTPUT || tok == LAYER || tok == '}' || tok == ';' || tok == FE_YYEOF;
}

/* The token filter: records what error recovery needs, and while
 * p->skipping discards tokens up to a point where a statement may begin. */
static int fe_yylex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, struct fe_parser *p)
{
    for (;;) {
        int t = fe_lxlex(lval, lloc, p->scanner);
        if (t == 0) {
            /* end of file: point just past the last token */
            t = FE_YYEOF;
            if (p->last_tok) {
                lloc->first_line = lloc->last_line = p->last_end_line;
                lloc->first_column = lloc->last_column = p->last_end_col + 1;
            } else {
                lloc->first_line = lloc->last_line = 1;
                lloc->first_column = lloc->last_column = 1;
            }
        }
        bool first = !p->last_tok || lloc->first_line > p->last_end_line;
        bool sync = starts_stmt(t) || (t == IDENT && (p->last_tok == ';' ||
                                                      (first && ends_expr(p->last_tok))));
        if (t == '{' && !p->opened) {
            p->opened = true;
            p->model_name = p->last_tok == IDENT ? p->last_text : NULL;
        }
        p->last_tok = t;
        p->last_end_line = lloc->last_line;
        p->last_end_col = lloc->last_column;
        p->last_text = t == IDENT ? lval->name : t == NUMBER ? lval->num.text : NULL;
        if (p->skipping && !sync) continue;
        p->skipping = false;
        p->last_sync = sync;
        p->last_first_on_line = first;
        return t;
    }
}

static void fe_yyerror(FE_YYLTYPE *lloc, struct fe_parser *p, const char *msg)
{
    p->errors++;
    src_loc loc = L(p, *lloc);
    /* bison's stack overflows (YYMAXDEPTH) only on absurd nesting */
    if (strcmp(msg, "memory exhausted") == 0) {
        diag_error(p->diags, loc, "expression nested too deeply (the parser's stack is full)");
        return;
    }
    /* At the end of the file inside the model, say what is missing. */
    if (p->last_tok == FE_YYEOF && p->opened && strcmp(msg, "syntax error, unexpected end of file") == 0) {
        diag_error(p->diags, loc, "%s, expecting '}' to close model '%s'", msg,
                   p->model_name ? p->model_name : "?");
        return;
    }
    /* Name the offending token: "unexpected identifier 'ln1'". */
    const char *kinds[] = {"unexpected identifier", "unexpected number"};
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(msg, kinds[i]);
        if (at && p->last_text) {
            size_t pre = (size_t)(at - msg) + strlen(kinds[i]);
            diag_error(p->diags, loc, "%.*s '%s'%s", (int)pre, msg, p->last_text, msg + pre);
            return;
        }
    }
    diag_error(p->diags, loc, "%s", msg);
}
