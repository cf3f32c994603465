/* Symbolic dimensions: canonical form, arithmetic, exact division, printing
 * and evaluation. */
#include <string.h>

#include "check.h"
#include "ir/ir.h"

static const char *const syms[] = {"B", "S", "T"};

static const char *show(ir_dim d, char *buf)
{
    ir_dim_print(&d, syms, buf, 128);
    return buf;
}

int main(void)
{
    char buf[128];
    ir_dim B = ir_dim_sym(0), S = ir_dim_sym(1), T = ir_dim_sym(2), r1, r2, r3;

    /* B*S*4096 == B*S*32*128 regardless of association or order */
    CHECK(ir_dim_mul(B, S, &r1) && ir_dim_mul(r1, ir_dim_const(4096), &r1));
    CHECK(ir_dim_mul(ir_dim_const(32), S, &r2) && ir_dim_mul(r2, ir_dim_const(128), &r2) && ir_dim_mul(r2, B, &r2));
    CHECK(ir_dim_eq(&r1, &r2));
    CHECK(strcmp(show(r1, buf), "4096*B*S") == 0);

    /* (S + T) - S == T, and T - T == 0 */
    CHECK(ir_dim_add(S, T, &r1) && ir_dim_sub(r1, S, &r1));
    CHECK(ir_dim_eq(&r1, &T));
    CHECK(ir_dim_sub(T, T, &r1));
    int64_t v = -1;
    CHECK(ir_dim_is_const(&r1, &v) && v == 0);
    CHECK(strcmp(show(r1, buf), "0") == 0);

    /* printing order: higher degree first, constants last, signs */
    CHECK(ir_dim_mul(B, S, &r1) && ir_dim_add(r1, ir_dim_const(3), &r1) && ir_dim_sub(r1, T, &r1));
    CHECK_MSG(strcmp(show(r1, buf), "B*S - T + 3") == 0, "got %s", buf);
    CHECK(ir_dim_mul(S, S, &r2));
    CHECK(strcmp(show(r2, buf), "S*S") == 0);
    CHECK(strcmp(show(ir_dim_const(-7), buf), "-7") == 0);

    /* exact division only */
    CHECK(ir_dim_mul(B, ir_dim_const(8), &r1) && ir_dim_div(r1, ir_dim_const(4), &r2));
    CHECK(ir_dim_mul(B, ir_dim_const(2), &r3) && ir_dim_eq(&r2, &r3));
    CHECK(!ir_dim_div(B, ir_dim_const(2), &r2));          /* B/2 is not exact */
    CHECK(!ir_dim_div(ir_dim_const(7), ir_dim_const(2), &r2));
    CHECK(!ir_dim_div(B, ir_dim_const(0), &r2));          /* division by zero */
    CHECK(ir_dim_mul(B, S, &r1) && ir_dim_div(r1, S, &r2) && ir_dim_eq(&r2, &B));
    CHECK(ir_dim_add(B, S, &r1) && ir_dim_div(r1, r1, &r2) && ir_dim_is_const(&r2, &v) && v == 1);
    CHECK(ir_dim_add(B, S, &r1) && !ir_dim_div(r1, B, &r2));

    /* evaluation */
    int64_t vals[3] = {2, 5, 1024};
    CHECK(ir_dim_mul(B, S, &r1) && ir_dim_add(r1, T, &r1) && ir_dim_eval(&r1, vals, &v) && v == 1034);
    int64_t huge[3] = {INT64_MAX / 2, 3, 0};
    CHECK(ir_dim_mul(B, S, &r1) && !ir_dim_eval(&r1, huge, &v)); /* overflow is reported */

    /* overflowing coefficients are refused, not wrapped */
    CHECK(!ir_dim_mul(ir_dim_const(INT64_MAX), ir_dim_const(2), &r1));

    /* too many terms */
    ir_dim acc = ir_dim_const(0);
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) {
        ir_dim sq;
        ok = ir_dim_mul(ir_dim_sym(i), ir_dim_sym(i), &sq) && ir_dim_add(acc, sq, &acc) &&
             ir_dim_add(acc, ir_dim_sym(i), &acc);
    }
    CHECK(ok && acc.nterms == 6);
    CHECK(!ir_dim_add(acc, ir_dim_const(1), &r1));

    return CHECK_DONE();
}
