/* tests/runtime/test_profile_out.c — the profile's writers on a synthetic
 * profile (no GPU): the table, JSON and the Chrome trace parse back with the
 * figures put in; the roofline SVG parses as XML (python3's xml.etree) and
 * holds one point per kernel. */
#define _XOPEN_SOURCE 700
#include <jansson.h>

#include "check.h"
#include "runtime/rt_cupti.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_test_util.h"

/* 3 kernels (one without FLOPs) over 4 replays. */
static void synthetic(rt_profile *p)
{
    rt_profile_init(p);
    p->model = "m";
    p->dims = "B=1,S=1,T=1024";
    p->device = "test device";
    p->bw = 4e12;
    p->rate = 800e12;
    p->ceilings = "given";
    p->runs = 4;
    p->nk = 3;
    p->k = arena_alloc(&p->a, 3 * sizeof *p->k);
    /* group 0: a norm, 2 us, 24 kB; group 1: a GEMV, 20 us, 50 MB, 50 MFLOP; group 2: "<odd> & name" */
    p->k[0] = (rt_prof_kernel){"m_k0_row", "row", "row.cuh", "ROW_THREADS=512", "31", 0,
                               {16384, 8192, 8192, 0, 0}, {0, 0, 0, false}, 4, 2.0, 1.9, 2.2};
    p->k[1] = (rt_prof_kernel){"m_k1_matmul", "matmul", "gemv.cuh", "SPLITK=1", "32-34", 1,
                               {50339840, 12288, 50331648, 0, 50331648}, {0, 0, 0, false}, 4, 20.0, 19.0, 21.0};
    p->k[2] = (rt_prof_kernel){"m_k2 <odd> & \"name\"", "attention", "attention_decode.cuh", "SPLITS=16", "36", 2,
                               {4202500, 12288, 0, 4194304, 16777216}, {0, 0, 0, false}, 4, 5.0, 4.5, 5.5};
    p->nev = 12;
    p->ev = arena_alloc(&p->a, 12 * sizeof *p->ev);
    p->replay_start_us = arena_alloc(&p->a, 4 * sizeof(double));
    p->replay_end_us = arena_alloc(&p->a, 4 * sizeof(double));
    for (int r = 0; r < 4; r++) {
        double t = r * 30.0;
        p->ev[3 * r + 0] = (rt_prof_event){0, r, t, t + 2};
        p->ev[3 * r + 1] = (rt_prof_event){1, r, t + 3, t + 23};
        p->ev[3 * r + 2] = (rt_prof_event){2, r, t + 24, t + 29};
        p->replay_start_us[r] = t;
        p->replay_end_us[r] = t + 29;
    }
    p->layer_median_us = 30;
    p->layer_p10_us = 29;
    p->layer_p90_us = 32;
    p->bubbles_median_us = 3;
    p->bubbles_p10_us = 2;
    p->bubbles_p90_us = 4;
    p->detached_runs = 3;
    p->detached_median_us = 26.5;
    p->detached_p10_us = 26;
    p->detached_p90_us = 27.25;
    p->span_median_us = 28.5;
    p->gaps_median_us = 0.5;
    p->gaps_p10_us = 0.25;
    p->gaps_p90_us = 1;
    p->graph_runs = 3;
    p->graph_median_us = 28.25;
    p->graph_p10_us = 28;
    p->graph_p90_us = 29;
    p->graph_events_median_us = 31.5;
    p->layer = (ir_cost){.read = 440418304, .weights = 436224000, .states = 4194304, .flops = 452984832};
    rt_profile_finish(p);
}

static void check_finish(const rt_profile *p)
{
    /* sorted by time; events follow their kernels */
    CHECK(p->k[0].group == 1 && p->k[1].group == 2 && p->k[2].group == 0);
    for (int e = 0; e < p->nev; e++) {
        const rt_prof_kernel *k = &p->k[p->ev[e].kernel];
        double dur = p->ev[e].end_us - p->ev[e].start_us;
        CHECK_MSG(fabs(dur - (k->group == 0 ? 2 : k->group == 1 ? 20 : 5)) < 1e-9, "event %d is kernel %s", e, k->name);
    }
    /* floors: the GEMV (50352128 B) 12.588032 us; the norm 24576 B 0.006144 us; attention 4214788 B
     * 1.053697 us (bytes-bound: 16777216 FLOPs is 0.02 us) */
    CHECK_NEAR(p->k[0].floor.t * 1e6, 12.588032, 1e-9, 0);
    CHECK_NEAR(p->k[2].floor.t * 1e6, 0.006144, 1e-12, 0);
    CHECK_NEAR(p->k[1].floor.t * 1e6, 1.053697, 1e-9, 0);
    CHECK(!p->k[1].floor.flops_bound);
    CHECK_NEAR(p->sum_floor_us, 12.588032 + 0.006144 + 1.053697, 1e-9, 0);
    CHECK_NEAR(p->layer_floor.t * 1e6, 440418304 / 4e12 * 1e6, 1e-9, 0);
    double v[5] = {5, 1, 4, 2, 3};
    CHECK(rt_percentile(v, 5, 50) == 3 && rt_percentile(v, 5, 10) == 1 && rt_percentile(v, 5, 90) == 5);
}

static json_t *load(const char *path)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK_MSG(root != NULL, "%s: %s", path, je.text);
    return root;
}

static void check_json(const char *path)
{
    json_t *root = load(path);
    if (!root) return;
    json_t *ks = json_object_get(root, "kernels");
    CHECK(json_array_size(ks) == 3);
    json_t *k0 = json_array_get(ks, 0);
    CHECK(!strcmp(json_string_value(json_object_get(k0, "name")), "m_k1_matmul"));
    CHECK(!strcmp(json_string_value(json_object_get(k0, "lines")), "32-34"));
    CHECK(!strcmp(json_string_value(json_object_get(k0, "template")), "gemv.cuh"));
    CHECK(json_real_value(json_object_get(k0, "median_us")) == 20.0);
    json_t *c0 = json_object_get(k0, "cost");
    CHECK(json_integer_value(json_object_get(c0, "bytes")) == 50352128);
    CHECK(json_integer_value(json_object_get(c0, "flops")) == 50331648);
    CHECK(!strcmp(json_string_value(json_object_get(c0, "bound")), "bytes"));
    CHECK_NEAR(json_real_value(json_object_get(k0, "pct_floor")), 100 * 12.588032 / 20, 1e-6, 0);
    CHECK_NEAR(json_real_value(json_object_get(k0, "tbps")), 50352128 / 20e-6 / 1e12, 1e-9, 0);
    CHECK_NEAR(json_real_value(json_object_get(k0, "share")), 20.0 / 30, 1e-9, 0);
    json_t *k1 = json_array_get(ks, 1);
    CHECK(!strcmp(json_string_value(json_object_get(k1, "name")), "m_k2 <odd> & \"name\""));
    json_t *l = json_object_get(root, "layer");
    CHECK(json_real_value(json_object_get(l, "median_us")) == 30);
    CHECK(json_integer_value(json_object_get(json_object_get(l, "benchmark_floor"), "bytes")) == 440418304);
    CHECK(json_real_value(json_object_get(json_object_get(root, "bubbles"), "median_us")) == 3);
    json_t *d = json_object_get(l, "without_profiler");
    CHECK(json_integer_value(json_object_get(d, "runs")) == 3 && json_real_value(json_object_get(d, "median_us")) == 26.5 &&
          json_real_value(json_object_get(d, "p10_us")) == 26 && json_real_value(json_object_get(d, "p90_us")) == 27.25);
    json_t *gj = json_object_get(l, "graph_on_gpu");
    CHECK(json_integer_value(json_object_get(gj, "runs")) == 3 && json_real_value(json_object_get(gj, "median_us")) == 28.25 &&
          json_real_value(json_object_get(gj, "p10_us")) == 28 && json_real_value(json_object_get(gj, "p90_us")) == 29 &&
          json_real_value(json_object_get(gj, "events_median_us")) == 31.5);
    json_t *bk = json_object_get(json_object_get(root, "bubbles"), "between_kernels");
    CHECK(json_real_value(json_object_get(bk, "median_us")) == 0.5 && json_real_value(json_object_get(bk, "p10_us")) == 0.25 &&
          json_real_value(json_object_get(bk, "p90_us")) == 1 && json_real_value(json_object_get(bk, "kernels_span_us")) == 28.5);
    CHECK(json_real_value(json_object_get(json_object_get(root, "ceilings"), "read_bw")) == 4e12);
    json_decref(root);
}

static void check_trace(const char *path)
{
    json_t *root = load(path);
    if (!root) return;
    json_t *evs = json_object_get(root, "traceEvents");
    int kernels = 0, replays = 0, meta = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *e = json_array_get(evs, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (ph && !strcmp(ph, "M")) meta++;
        else if (cat && !strcmp(cat, "replay")) replays++;
        else {
            kernels++;
            json_t *a = json_object_get(e, "args");
            CHECK(json_string_value(json_object_get(a, "lines")) != NULL);
            CHECK(json_is_integer(json_object_get(a, "bytes")));
            CHECK(json_is_number(json_object_get(e, "ts")) && json_is_number(json_object_get(e, "dur")));
            if (!strcmp(json_string_value(json_object_get(e, "name")), "m_k1_matmul"))
                CHECK(json_number_value(json_object_get(e, "dur")) == 20);
        }
    }
    CHECK(meta == 2 && replays == 4 && kernels == 12);
    json_decref(root);
}

/* CUPTI's records of 3 replays -> rows, events, spans, bubbles. Each replay
 * (100 us apart): a memset [0, 0.5], kernel a [1, 1 + d] (d = 10, 12, 11),
 * kernel b [9, 14] (overlapping a), another library's kernel [15, 16];
 * the union is 0.5 + 13 + 1 = 14.5 us; wall times 20, 22, 21 us. */
static void check_records(void)
{
    rt_profile p;
    rt_profile_init(&p);
    p.runs = 3;
    p.k = arena_alloc(&p.a, 16 * sizeof *p.k);
    p.k[0] = (rt_prof_kernel){.name = "kiln_m_k0_a", .kind = "matmul", .group = 0};
    p.k[1] = (rt_prof_kernel){.name = "kiln_m_k1_b", .kind = "row", .group = 1};
    rt_cupti_record rec[12];
    int nr = 0;
    double d[3] = {10, 12, 11};
    for (int q = 2; q >= 0; q--) { /* delivered out of order */
        uint64_t b = 1000000 + (uint64_t)q * 100000;
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "cublas_x", b + 15000, b + 16000, 7, 1};
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k1_b", b + 9000, b + 14000, 7, 1};
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k0_a", b + 1000, b + 1000 + (uint64_t)(d[q] * 1000), 7, 1};
        rec[nr++] = (rt_cupti_record){RT_CUPTI_MEMSET, NULL, b, b + 500, 7, 1};
    }
    double wall[3] = {20, 22, 21};
    char err[256];
    CHECK_MSG(rt_profile_add_records(&p, 2, rec, nr, wall, err, sizeof err) == 0, "%s", err);
    CHECK(p.nk == 4 && p.nev == 12);
    CHECK(p.k[0].samples == 3 && p.k[0].median_us == 11 && p.k[0].p10_us == 10 && p.k[0].p90_us == 12);
    /* k1 starts (at 9 us) before k0 ends (at 11..13 us): it is timed from k0's end */
    CHECK(p.k[1].samples == 3 && p.k[1].median_us == 14 - 12 && p.k[1].p10_us == 14 - 13 && p.k[1].p90_us == 14 - 11);
    int memset_row = !strcmp(p.k[2].kind, "memset") ? 2 : 3, other = 5 - memset_row;
    CHECK(!strcmp(p.k[memset_row].kind, "memset") && p.k[memset_row].samples == 3 && p.k[memset_row].median_us == 0.5 &&
          p.k[memset_row].group < 0);
    CHECK(!strcmp(p.k[other].kind, "other") && !strcmp(p.k[other].name, "cublas_x") && p.k[other].group < 0 &&
          p.k[other].group != p.k[memset_row].group);
    for (int q = 0; q < 3; q++) CHECK(p.replay_start_us[q] == q * 100 && p.replay_end_us[q] == q * 100 + 16);
    for (int e = 0; e < 12; e++) CHECK(p.ev[e].run == e / 4 && p.ev[e].start_us >= p.ev[e].run * 100);
    CHECK(p.layer_median_us == 21 && p.layer_p10_us == 20 && p.layer_p90_us == 22);
    CHECK_NEAR(p.bubbles_median_us, 21 - 14.5, 1e-9, 0);
    CHECK_NEAR(p.bubbles_p10_us, 20 - 14.5, 1e-9, 0);
    /* each replay's records span 0..16 us and cover 0..0.5, 1..14 and 15..16: 1.5 us of gaps between them */
    CHECK_NEAR(p.span_median_us, 16, 1e-9, 0);
    CHECK_NEAR(p.gaps_median_us, 1.5, 1e-9, 0);
    CHECK_NEAR(p.gaps_p10_us, 1.5, 1e-9, 0);
    /* sorting keeps each event on its kernel */
    rt_profile_finish(&p);
    for (int e = 0; e < 12; e++) {
        const rt_prof_kernel *k = &p.k[p.ev[e].kernel];
        double du = p.ev[e].end_us - p.ev[e].start_us;
        CHECK(!strcmp(k->kind, "memset") ? du == 0.5 : !strcmp(k->kind, "other") ? du == 1 : k->group == 1 ? du == 5 : du >= 10);
    }
    /* records that do not divide into the replays are refused */
    rt_profile q2;
    rt_profile_init(&q2);
    q2.runs = 5;
    q2.k = arena_alloc(&q2.a, 16 * sizeof *q2.k);
    CHECK(rt_profile_add_records(&q2, 0, rec, 12, wall, err, sizeof err) != 0 && strstr(err, "12 records for 5 replays"));
    rt_profile_free(&q2);
    rt_profile_free(&p);
}

/* CUPTI's graph records: one per replay, the graph's time on the GPU; kernel records among them are skipped */
static void check_graph_records(void)
{
    rt_profile p;
    rt_profile_init(&p);
    p.runs = 3;
    rt_cupti_record rec[5] = {
        {RT_CUPTI_GRAPH, NULL, 5000000, 5041500, 7, 9},
        {RT_CUPTI_KERNEL, "kiln_m_k0_a", 5001000, 5002000, 7, 9},
        {RT_CUPTI_GRAPH, NULL, 1000000, 1040000, 7, 3},
        {RT_CUPTI_GRAPH, NULL, 3000000, 3042000, 7, 6},
        {RT_CUPTI_MEMSET, NULL, 3000100, 3000200, 7, 6},
    };
    double wall[3] = {45, 44.5, 46};
    char err[256];
    CHECK_MSG(rt_profile_add_graph_records(&p, rec, 5, wall, err, sizeof err) == 0, "%s", err);
    CHECK(p.graph_runs == 3 && p.graph_median_us == 41.5 && p.graph_p10_us == 40 && p.graph_p90_us == 42);
    CHECK(p.graph_events_median_us == 45);
    /* a replay without its graph record is refused, the fields left as they were */
    rt_profile q;
    rt_profile_init(&q);
    q.runs = 4;
    CHECK(rt_profile_add_graph_records(&q, rec, 5, wall, err, sizeof err) != 0 && strstr(err, "3 graph records for 4 replays") &&
          q.graph_runs == 0);
    rt_profile_free(&q);
    rt_profile_free(&p);
}

/* Programmatic dependent launch: a kernel that starts while the one before it
 * runs is timed from that one's end, so the times add up to the union. */
static void check_overlap(void)
{
    rt_profile p;
    rt_profile_init(&p);
    p.runs = 2;
    p.k = arena_alloc(&p.a, 8 * sizeof *p.k);
    p.k[0] = (rt_prof_kernel){.name = "kiln_m_k0_a", .kind = "matmul", .group = 0};
    p.k[1] = (rt_prof_kernel){.name = "kiln_m_k1_b", .kind = "row", .group = 1};
    p.k[2] = (rt_prof_kernel){.name = "kiln_m_k2_c", .kind = "row", .group = 2};
    rt_cupti_record rec[6];
    int nr = 0;
    for (int q = 0; q < 2; q++) {
        uint64_t b = 1000000 + (uint64_t)q * 100000;
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k0_a", b, b + 10000, 7, 1};
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k1_b", b + 2000, b + 14000, 7, 1}; /* early: 4 us of its own */
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k2_c", b + 15000, b + 18000, 7, 1}; /* after a gap: 3 us */
    }
    double wall[2] = {19, 19};
    char err[256];
    CHECK_MSG(rt_profile_add_records(&p, 3, rec, nr, wall, err, sizeof err) == 0, "%s", err);
    CHECK(p.k[0].median_us == 10 && p.k[1].median_us == 4 && p.k[2].median_us == 3);
    CHECK_NEAR(p.bubbles_median_us, 19 - 17, 1e-9, 0);
    rt_profile_free(&p);
}

/* Kernels of identical layers share a program and its name: the n-th record
 * of a name in a replay belongs to the n-th kernel of that name. */
static void check_shared_names(void)
{
    rt_profile p;
    rt_profile_init(&p);
    p.runs = 3;
    p.k = arena_alloc(&p.a, 8 * sizeof *p.k);
    p.k[0] = (rt_prof_kernel){.name = "kiln_m_k0_a", .kind = "matmul", .group = 0};
    p.k[1] = (rt_prof_kernel){.name = "kiln_m_k1_b", .kind = "row", .group = 1};
    p.k[2] = (rt_prof_kernel){.name = "kiln_m_k0_a", .kind = "matmul", .group = 2}; /* the second layer's */
    rt_cupti_record rec[9];
    int nr = 0;
    for (int q = 0; q < 3; q++) {
        uint64_t b = 1000000 + (uint64_t)q * 100000;
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k0_a", b, b + 5000, 7, 1};
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k1_b", b + 5000, b + 7000, 7, 1};
        rec[nr++] = (rt_cupti_record){RT_CUPTI_KERNEL, "kiln_m_k0_a", b + 7000, b + 13000, 7, 1};
    }
    double wall[3] = {13, 13, 13};
    char err[256];
    CHECK_MSG(rt_profile_add_records(&p, 3, rec, nr, wall, err, sizeof err) == 0, "%s", err);
    CHECK(p.nk == 3);
    CHECK(p.k[0].samples == 3 && p.k[1].samples == 3 && p.k[2].samples == 3);
    CHECK(p.k[0].median_us == 5 && p.k[1].median_us == 2 && p.k[2].median_us == 6);
    rt_profile_free(&p);
}

int main(void)
{
    check_records();
    check_overlap();
    check_shared_names();
    check_graph_records();
    rt_profile p;
    synthetic(&p);
    check_finish(&p);
    char *dir = make_tmpdir();
    char js[512], tr[512], svg[512], txt[512], cmd[2048];
    snprintf(js, sizeof js, "%s/p.json", dir);
    snprintf(tr, sizeof tr, "%s/t.json", dir);
    snprintf(svg, sizeof svg, "%s/r.svg", dir);
    snprintf(txt, sizeof txt, "%s/p.txt", dir);
    char err[256];
    CHECK(rt_profile_write_json(&p, js, err, sizeof err) == 0);
    CHECK(rt_profile_write_trace(&p, tr, err, sizeof err) == 0);
    CHECK(rt_profile_write_svg(&p, svg, err, sizeof err) == 0);
    check_json(js);
    check_trace(tr);
    /* the SVG: well-formed XML, one <circle class="kernel"> per kernel, the two roofs' labels */
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, xml.etree.ElementTree as E\n"
             "r = E.parse(sys.argv[1]).getroot()\n"
             "ns = \"{http://www.w3.org/2000/svg}\"\n"
             "pts = [c for c in r.iter(ns + \"circle\") if c.get(\"class\") == \"kernel\"]\n"
             "names = sorted(c.get(\"data-kernel\") for c in pts)\n"
             "text = \" \".join(t.text or \"\" for t in r.iter(ns + \"text\"))\n"
             "ok = len(pts) == 3 and names[0].startswith(\"m_k0\") and \"TB/s\" in text and \"TFLOP/s\" in text\n"
             "sys.exit(0 if ok else 1)' %s",
             svg);
    CHECK_MSG(system(cmd) == 0, "the roofline SVG is not well-formed XML with 3 kernel points: %s", svg);
    /* the table: every kernel, both floors, the bubbles */
    FILE *f = fopen(txt, "w");
    CHECK(f != NULL);
    if (f) {
        rt_profile_print(&p, f);
        fclose(f);
        f = fopen(txt, "r");
        char buf[8192] = "";
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        buf[len] = 0;
        fclose(f);
        CHECK(strstr(buf, "m_k1_matmul") && strstr(buf, "m_k0_row") && strstr(buf, "benchmark floor") &&
              strstr(buf, "sum of kernel floors") && strstr(buf, "bubbles: median 3.0 us"));
        /* the GEMV is the first row and shows 63% of its floor */
        char *row = strstr(buf, "m_k1_matmul");
        CHECK(row && row < strstr(buf, "m_k0_row") && strstr(row, " 63%"));
        /* the replays without CUPTI, and what its tracing added to each (30 - 26.5) */
        CHECK(strstr(buf, "without the profiler    26.5 us  (p10 26.0, p90 27.2; 3 more replays with CUPTI detached: its tracing adds 3.5 us to each)"));
        /* the gaps between kernels (0.5 of 30 us), the graph's own time on the GPU and the launch head and tail
         * outside it (31.5 - 28.25) */
        CHECK(strstr(buf, "  between kernels         0.5 us  (p10 0.2, p90 1.0) = 1.7% of the layer") && strstr(buf, "(28.5 us)"));
        CHECK(strstr(buf, "  graph on the GPU       28.2 us  (p10 28.0, p90 29.0; 3 more replays with CUPTI's graph records") &&
              strstr(buf, "31.5 us between their CUDA events: 3.2 us of graph launch head and tail outside it)"));
    }
    /* an unwritable path is an error with a message */
    CHECK(rt_profile_write_json(&p, "/nonexistent/dir/p.json", err, sizeof err) == -1 && strstr(err, "/nonexistent"));
    rt_profile_free(&p);
    if (getenv("KILN_TEST_KEEP")) printf("kept %s\n", dir);
    else rm_tree(dir);
    free(dir);
    return CHECK_DONE();
}
