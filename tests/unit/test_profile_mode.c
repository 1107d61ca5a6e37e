/* SPDX-License-Identifier: Apache-2.0 */
/* Profile types: --mode parsing, file names, and a snapshot holding several
 * types cut into one profile per type (marker frames added by the sink,
 * stripped again). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "profile_marker.h"
#include "profile_mode.h"
#include "testlib.h"

static void test_parse(void) {
  uint32_t m = 0;
  char err[256] = "";
  CHECK_EQ_INT(pp_profile_types_parse("cpu", &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m, PP_TYPES_CPU_ONLY);
  CHECK_EQ_INT(pp_profile_types_parse("cpu, offcpu,wall", &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m, PP_TYPE_BIT(PP_PROFILE_CPU) | PP_TYPE_BIT(PP_PROFILE_OFFCPU) |
                      PP_TYPE_BIT(PP_PROFILE_WALL));
  CHECK_EQ_INT(pp_profile_types_count(m), 3);
  /* gProfiler's words */
  CHECK_EQ_INT(pp_profile_types_parse("allocation", &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m, PP_TYPE_BIT(PP_PROFILE_ALLOC));
  CHECK_EQ_INT(pp_profile_types_parse("none", &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m, 0);
  CHECK_EQ_INT(pp_profile_types_parse("cpu,,wall", &m, err, sizeof(err)), -1);
  CHECK(strstr(err, "unknown profile type '' in 'cpu,,wall'") != NULL);
  CHECK_EQ_INT(pp_profile_types_parse("offcpu,heap", &m, err, sizeof(err)), -1);
  CHECK(strstr(err, "'heap'") != NULL);
  CHECK_EQ_INT(pp_profile_types_session_flags(PP_TYPE_BIT(PP_PROFILE_OFFCPU)),
               PP_SESSION_NO_CPU | PP_SESSION_OFFCPU);
  CHECK_EQ_INT(pp_profile_types_session_flags(PP_TYPES_CPU_ONLY), 0);
}

static void test_names(void) {
  char infix[32], link[128];
  uint32_t two = PP_TYPE_BIT(PP_PROFILE_CPU) | PP_TYPE_BIT(PP_PROFILE_OFFCPU);
  CHECK_EQ_STR(pp_profile_type_infix(two, PP_PROFILE_CPU, infix, sizeof(infix)), "");
  CHECK_EQ_STR(pp_profile_type_infix(two, PP_PROFILE_OFFCPU, infix, sizeof(infix)), ".offcpu");
  pp_profile_type_link("last_flamegraph.html", infix, link, sizeof(link));
  CHECK_EQ_STR(link, "last_flamegraph.offcpu.html");
  pp_profile_type_link("last_profile.pb.gz", infix, link, sizeof(link));
  CHECK_EQ_STR(link, "last_profile.offcpu.pb.gz");
  /* one type alone keeps gProfiler's names */
  CHECK_EQ_STR(
      pp_profile_type_infix(PP_TYPE_BIT(PP_PROFILE_WALL), PP_PROFILE_WALL, infix, sizeof(infix)),
      "");
  pp_profile_type_link("last_profile.col", infix, link, sizeof(link));
  CHECK_EQ_STR(link, "last_profile.col");
}

static void add(struct pp_profile *p, uint32_t pid, uint32_t type, const char *leaf,
                uint64_t count) {
  uint32_t ids[2], n = 0;
  if (type) ids[n++] = pp_type_marker_frame(p, type);
  ids[n++] =
      pp_profile_intern_frame(p, pp_profile_intern_cstr(p, leaf), PP_NO_STR, 0, PP_FRAME_NATIVE);
  CHECK_EQ_INT(pp_profile_add_stack(p, pid, PP_NO_STR, ids, n, count), 0);
}

static void test_extract(void) {
  struct pp_profile *snap = pp_profile_new(), *out = pp_profile_new();
  add(snap, 10, PP_PROFILE_CPU, "burn", 7);
  add(snap, 10, PP_PROFILE_OFFCPU, "wait_a", 3000);
  add(snap, 11, PP_PROFILE_OFFCPU, "wait_b", 1000);
  struct pp_pid_rec *r = pp_profile_pid_upsert(snap, 11);
  r->appid = pp_profile_intern_cstr(snap, "app-b");

  CHECK_EQ_INT(pp_profile_type_extract(out, snap, PP_PROFILE_OFFCPU, -1), 0);
  CHECK_EQ_INT(pp_profile_stack_count(out), 2);
  CHECK_EQ_INT(pp_profile_total(out), 4000);
  for (size_t i = 0; i < pp_profile_stack_count(out); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(out, i);
    CHECK_EQ_INT(s->nframes, 1); /* the marker is gone */
    CHECK_EQ_INT(pp_type_of_stack(out, s), PP_PROFILE_CPU);
  }
  CHECK_EQ_STR(pp_profile_str(out, pp_profile_pid(out, 11)->appid), "app-b");
  CHECK_EQ_INT(pp_profile_pid(out, 11)->total, 1000);

  CHECK_EQ_INT(pp_profile_type_extract(out, snap, PP_PROFILE_CPU, -1), 0);
  CHECK_EQ_INT(pp_profile_total(out), 7);
  /* a runtime plugin switched to wall: its untagged stacks are wall */
  CHECK_EQ_INT(pp_profile_type_extract(out, snap, PP_PROFILE_WALL, PP_PROFILE_WALL), 0);
  CHECK_EQ_INT(pp_profile_total(out), 7);
  CHECK_EQ_INT(pp_profile_type_extract(out, snap, PP_PROFILE_CPU, PP_PROFILE_WALL), 0);
  CHECK_EQ_INT(pp_profile_total(out), 0);
  pp_profile_free(snap);
  pp_profile_free(out);
}

static void test_header(void) {
  json_t *h =
      json_pack("{s:{s:s},s:s}", "metadata", "profiling_mode", "cpu", "profiling_mode", "cpu");
  pp_profile_type_stamp_header(h, PP_PROFILE_ALLOC);
  CHECK_EQ_STR(json_string_value(json_object_get(h, "profiling_mode")), "allocation");
  CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(h, "metadata"), "profiling_mode")),
               "allocation");
  CHECK_EQ_STR(json_string_value(json_object_get(h, "profile_type")), "alloc");
  CHECK_EQ_STR(json_string_value(json_object_get(h, "profile_unit")), "bytes");
  json_decref(h);
}

static int warnings;
static void count_log(void *ctx, int level, const char *text) {
  if (level >= PP_LOG_WARNING) warnings++;
}

/* The sink keeps a sample's type as a marker; CPU samples stay unmarked. */
static void test_sink(void) {
  struct pp_host_config hc;
  memset(&hc, 0, sizeof(hc));
  struct pp_host h;
  struct pp_host_ctx ctx;
  pp_host_init(&h, &ctx, &hc, count_log, NULL);
  struct pp_profile *p = pp_profile_new(), *out = pp_profile_new();
  struct pp_sink *sink = calloc(1, sizeof(*sink));
  pp_sink_begin(sink, p, &h);
  struct pp_frame f[2] = {{"futex_wait", NULL, 0, PP_FRAME_KERNEL}, {"main", NULL, 0, 0}};
  struct pp_sample smp = {.pid = 9, .frames = f, .nframes = 2, .count = 1};
  CHECK_EQ_INT(h.emit(sink, &smp), 0);
  smp.type = PP_PROFILE_OFFCPU;
  smp.count = 1500;
  CHECK_EQ_INT(h.emit(sink, &smp), 0);
  smp.type = PP_PROFILE_TYPE_COUNT; /* a plugin's bug: refused, counted, warned once */
  CHECK_EQ_INT(h.emit(sink, &smp), -EINVAL);
  pp_sink_end(sink);
  CHECK_EQ_INT(pp_profile_stack_count(p), 2);
  CHECK(warnings >= 1);
  CHECK_EQ_INT(pp_profile_type_extract(out, p, PP_PROFILE_OFFCPU, -1), 0);
  CHECK_EQ_INT(pp_profile_total(out), 1500);
  const struct pp_stack_rec *st = pp_profile_stack(out, 0);
  if (st) {
    CHECK_EQ_INT(st->nframes, 2);
    CHECK_EQ_STR(
        pp_profile_str(out, pp_profile_frame(out, pp_profile_stack_frames(out, st)[0])->name),
        "main");
  }
  CHECK_EQ_INT(pp_profile_type_extract(out, p, PP_PROFILE_CPU, -1), 0);
  CHECK_EQ_INT(pp_profile_total(out), 1);
  free(sink);
  pp_profile_free(p);
  pp_profile_free(out);
  pp_host_fini(&ctx);
}

/* Which in-tree plugin gives which type, by its mode. */
static void test_types_of(void) {
  char py[] = "python", nj[] = "nodejs", jv[] = "java", ph[] = "php";
  char cpu[] = "cpu", perf[] = "perf", perfmap[] = "perfmap", spy[] = "phpspy";
  struct pp_plugin_config pcs[] = {
      {.name = py, .enabled = true, .mode = cpu},
      {.name = nj, .enabled = true, .mode = perf},
      {.name = jv, .enabled = true, .mode = perfmap},
      {.name = ph, .enabled = true, .mode = spy},
  };
  struct pp_config c;
  memset(&c, 0, sizeof(c));
  c.plugins = pcs;
  c.plugin_count = sizeof(pcs) / sizeof(pcs[0]);
  const uint32_t W = PP_TYPE_BIT(PP_PROFILE_WALL), O = PP_TYPE_BIT(PP_PROFILE_OFFCPU),
                 C = PP_TYPE_BIT(PP_PROFILE_CPU);
  c.profile_types = C | W | O;
  struct pp_plugin_types t = pp_profile_types_of(&c, "python", false);
  CHECK_EQ_INT(t.gives, W | O); /* wall replaces its cpu samples; offcpu tagged */
  CHECK(t.untagged_is_wall);
  CHECK_EQ_INT(pp_profile_types_of(&c, "php", false).gives, W | O);
  CHECK_EQ_INT(pp_profile_types_of(&c, "ruby", false).gives, W | O);
  /* modes that only name JIT code for perf */
  CHECK_EQ_INT(pp_profile_types_of(&c, "nodejs", false).gives, C);
  CHECK_EQ_INT(pp_profile_types_of(&c, "java", false).gives, C);
  char v8[] = "v8", agent[] = "agent", gil[] = "gil";
  pcs[1].mode = v8;
  pcs[2].mode = agent;
  pcs[0].mode = gil;
  CHECK_EQ_INT(pp_profile_types_of(&c, "nodejs", false).gives, W | O);
  CHECK_EQ_INT(pp_profile_types_of(&c, "java", false).gives, W | O);
  CHECK_EQ_INT(pp_profile_types_of(&c, "python", false).gives, W);
  c.profile_types = C | O;
  CHECK_EQ_INT(pp_profile_types_of(&c, "nodejs", false).gives, C | O);
  CHECK(!pp_profile_types_of(&c, "nodejs", false).untagged_is_wall);
  CHECK_EQ_INT(pp_profile_types_of(&c, "perf", true).gives, C | O);
}

/* Native allocations come from the system-wide plugin for --pids only;
 * asked for, its native_alloc option gets it CAP_SYS_ADMIN as a step. */
static void test_native_alloc(void) {
  char pf[] = "perf";
  static const struct pp_option opt = {.key = "native_alloc", .type = PP_OPT_BOOL};
  struct pp_bound_option bo = {.opt = &opt, .scalar = NULL};
  struct pp_plugin_config pc = {.name = pf, .enabled = true, .options = &bo, .option_count = 1};
  struct pp_config c;
  memset(&c, 0, sizeof(c));
  c.plugins = &pc;
  c.plugin_count = 1;
  const uint32_t A = PP_TYPE_BIT(PP_PROFILE_ALLOC), C = PP_TYPE_BIT(PP_PROFILE_CPU);
  c.profile_types = C | A;
  CHECK_EQ_INT(pp_profile_types_of(&c, "perf", true).gives, C); /* host-wide: refused */
  CHECK_EQ_INT(pp_profile_types_step_caps(&pc), 0);
  uint32_t pid = 42;
  c.pids = &pid;
  c.pid_count = 1;
  CHECK_EQ_INT(pp_profile_types_of(&c, "perf", true).gives, C | A);
  pp_profile_types_apply(&c, "perf", true);
  CHECK(bo.scalar && strcmp(bo.scalar, "true") == 0);
  CHECK_EQ_INT(pp_profile_types_step_caps(&pc), PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER);
  free(bo.scalar);
  /* what `polyprof check` shows as conditional: a plugin with the option */
  struct pp_plugin desc = {.name = "perf", .options = &opt, .option_count = 1};
  CHECK_EQ_INT(pp_profile_types_step_caps_possible(&desc),
               PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER);
  desc.option_count = 0;
  CHECK_EQ_INT(pp_profile_types_step_caps_possible(&desc), 0);
}

int main(void) {
  test_parse();
  test_types_of();
  test_native_alloc();
  test_names();
  test_extract();
  test_header();
  test_sink();
  return pp_test_finish("test_profile_mode");
}
