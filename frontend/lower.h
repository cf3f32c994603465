/* frontend/lower.h — state shared by the lowering (lower.c) and the builtin
 * function table (builtins.c). Internal to the frontend. */
#ifndef KILN_FRONTEND_LOWER_H
#define KILN_FRONTEND_LOWER_H
#include <stdbool.h>
#include <stdint.h>

#include "frontend/ast.h"
#include "frontend/frontend.h"

/* The longest model name: kernel files are named kiln_<model>_k<N>_<kind>.cubin,
 * and a file name has at most 255 bytes. */
#define FE_MODEL_NAME_MAX 200

/* A compile-time number: consts, literals, keyword values. */
typedef struct fe_num {
    bool is_int;
    int64_t i; /* when is_int */
    double f;  /* always set */
} fe_num;

typedef enum {
    FE_SYM_DIM,    /* dims B */
    FE_SYM_CONST,  /* const D = 4096 */
    FE_SYM_PARAM,  /* input/state/weight */
    FE_SYM_VAR,    /* h = ... */
    FE_SYM_OUTPUT, /* output y ... */
} fe_sym_kind;

typedef struct fe_sym {
    const char *name;
    fe_sym_kind kind;
    src_loc loc; /* the definition (declaration) */
    bool poison; /* its definition failed: uses are silently NULL */
    /* DIM */
    int sym;
    bool bound;
    int64_t bound_value;
    /* CONST; ok is false when its value had an error (uses stay silent) */
    fe_num num;
    bool ok;
    /* PARAM: the parameter node and kind; PARAM/VAR/OUTPUT: current value
     * (NULL after an error, or for an output not yet assigned) */
    ir_op param_kind;
    ir_node *param;
    ir_node *value;
    /* STATE rebinding */
    bool rebound;
    src_loc rebind_loc;
    /* OUTPUT */
    bool has_type;
    ir_type type;
    bool assigned;
    src_loc assign_loc;
    /* warnings: times the name was read as a tensor; a warning was given */
    int uses;
    bool warned;
    /* defined inside an instance of a layer block that has ended: not visible */
    bool hidden;
} fe_sym;

/* A variable bound to a cache write of a state (`kc2 = cache_write(kc, ...)`):
 * checked at the end for a state that never receives the new value. */
typedef struct fe_state_write {
    int var;             /* index of the variable in syms */
    const ir_node *node; /* the CACHE_WRITE */
    const ir_node *state; /* the STATE parameter it writes */
} fe_state_write;

/* A string-keyed map in the scratch arena (open addressing, grown at half
 * load) for the lowering's name lookups. */
typedef struct fe_name_map {
    const char **keys;
    const void **vals;
    int cap, n;
} fe_name_map;

/* Distinct unknown names that get a "did you mean" search; later ones are
 * reported without one, so 20k mistakes cost 20k lookups, not 20k scans. */
#define FE_SUGGEST_MAX 64

typedef struct fe_lower {
    ir_graph *g;
    diag_list *d;
    arena *a; /* scratch: lives for the compile */
    const fe_model *m;
    fe_sym *syms;
    int nsyms, cap;
    const fe_options *opts;
    bool *define_used;
    bool *define_bad; /* the value failed to parse */
    fe_num *define_num;
    bool too_many_dims; /* reported once */
    fe_state_write *writes;
    int nwrites, capwrites;
    /* name -> index in syms (the latest of that name), open addressing */
    int *sym_index; /* index + 1; 0 = empty */
    int sym_cap;
    /* name -> the first statement that defines it, built on the first
     * unknown name; and each unknown name's suggestion, computed once */
    fe_name_map later, suggested;
    fe_name_map tensors; /* a parameter's tensor name -> its symbol's index + 1 */
    int nsuggest;   /* suggestion searches so far (capped: FE_SUGGEST_MAX) */
    uint64_t work;  /* name comparisons and suggestion candidates (fe_options.work) */
    /* inside an instance of a layer block: its index (-1 outside), the index's
     * name and the first symbol the instance defined (those before it are the
     * enclosing model's) */
    int layer;
    const char *layer_index;
    int layer_sym0;
} fe_lower;

/* Most instances of one layer block. */
#define FE_MAX_LAYERS 4096

/* The values of an expression: one for most, several for split and the
 * two-cache cache_write. n == 0: an error was reported already (or the count
 * could not be known); v[i] may be NULL after an error. */
typedef struct fe_vals {
    int n;
    ir_node **v;
} fe_vals;

/* lower.c */
fe_sym *fe_lookup(fe_lower *l, const char *name);
ir_node *fe_eval_tensor(fe_lower *l, const fe_expr *e);
bool fe_eval_num(fe_lower *l, const fe_expr *e, fe_num *out);
bool fe_eval_dim(fe_lower *l, const fe_expr *e, ir_dim *out);
/* Binary elementwise op where either side may be a compile-time number. */
ir_node *fe_binary(fe_lower *l, ir_op op, const fe_expr *a, const fe_expr *b, src_loc loc);
/* "unknown name 'x'; did you mean 'y'?" (or "used before its definition"). */
void fe_unknown_name(fe_lower *l, const char *name, src_loc loc);
const char *fe_type_str(fe_lower *l, const ir_type *t);
const char *fe_dim_str(fe_lower *l, const ir_dim *d);

/* Lowers m into a new graph (verified). Returns 0, or -1 when errors were
 * reported into d (then *out is NULL). */
int fe_lower_model(const fe_model *m, const fe_options *opts, arena *scratch, diag_list *d,
                   ir_graph **out, uint64_t *work);
const char *fe_num_str(fe_lower *l, const fe_num *n);

/* builtins.c */
fe_vals fe_eval_call(fe_lower *l, const fe_expr *call);
/* Best match among the builtin function names (NULL when none is close). */
const char *fe_suggest_builtin(const char *name);
bool fe_is_builtin(const char *name);

/* suggest.c */
int fe_edit_distance(const char *a, const char *b);
/* True when `cand` is a plausible typo of `name`, and closer than *best_d. */
bool fe_suggest_consider(const char *name, const char *cand, int *best_d);

#endif
