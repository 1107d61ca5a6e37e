/* SPDX-License-Identifier: Apache-2.0 */
/* java plugin: parsing what comes back from a JVM (agent dump files, attach
 * replies of every JDK generation, Properties text, VM.flags). All of it is
 * hostile input: malformed lines must be counted and skipped. */
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* the plugin's files, compiled into this test (they are not a library) */
#include "../../plugins/java/attach.c"
#include "../../plugins/java/collect.c"
#include "../../plugins/java/java_metadata.c"
#include "../../plugins/java/jvm_target.c"

struct rec {
  int n;
  char text[16][512];
  uint64_t count[16];
  uint32_t type[16];
  char comm[16][64];
};

static int fake_emit(struct pp_sink *sink, const struct pp_sample *s) {
  struct rec *r = (struct rec *)sink;
  if (r->n >= 16) return -1;
  char *t = r->text[r->n];
  t[0] = '\0';
  for (uint32_t i = 0; i < s->nframes; i++) {
    char f[160];
    snprintf(f, sizeof(f), "%s%s/%u", i ? ";" : "", s->frames[i].name, s->frames[i].kind);
    strncat(t, f, 511 - strlen(t));
  }
  r->count[r->n] = s->count;
  r->type[r->n] = s->type;
  snprintf(r->comm[r->n], sizeof(r->comm[0]), "%s", s->comm ? s->comm : "(null)");
  r->n++;
  return 0;
}

static void test_dump(void) {
  struct pp_host host = {.struct_size = sizeof(host), .emit = fake_emit};
  struct rec rec = {0};
  const char *dump =
      "# polyprof-jvmti 1\n"
      "I\tjdk=17\tarmed=1\n"
      "S\t7\t101\tworker-0\tiHotCold.mix(J)J\x1fjHotCold.hotWork(J)J\x1f"
      "0java/lang/Thread.run()V\n"
      "S\t3\t102\tGC Thread#0\te[no_Java_frame]\n"
      "S\tx\t1\tbad\tjA.b()V\n"   /* bad count */
      "S\t2\t1\tbad\tqA.b()V\n"   /* unknown frame type */
      "S\t2\t1\tmissing-fields\n" /* no frames field */
      "S\t1\t5\tc1\t1Foo.bar(Ljava/lang/String;)V\x1fnjava/lang/Object.wait(J)V\n"
      "O\t90909\t5\tc1\tnjava/lang/Thread.sleep(J)V\n" /* off-CPU, microseconds */
      "O\t0\t5\tc1\tnjava/lang/Thread.sleep(J)V\n"     /* bad count */
      "I\tsamples=13\tdropped=4\n";
  struct java_collect_stats st = {0};
  CHECK_EQ_INT(java_collect_emit(&host, (struct pp_sink *)&rec, 42, dump, strlen(dump), 1, &st), 0);
  CHECK_EQ_INT(rec.n, 4);
  CHECK_EQ_STR(rec.text[0], "HotCold.mix(J)J/6;HotCold.hotWork(J)J/5;java/lang/Thread.run()V/7");
  CHECK_EQ_INT(rec.count[0], 7);
  CHECK_EQ_STR(rec.comm[0], "worker-0");
  CHECK_EQ_STR(rec.text[1], "[no_Java_frame]/13");
  /* ';' stays in the name: the .col writer turns it into '|' */
  CHECK_EQ_STR(rec.text[2], "Foo.bar(Ljava/lang/String;)V/8;java/lang/Object.wait(J)V/5");
  CHECK_EQ_INT(rec.type[2], PP_PROFILE_CPU);
  CHECK_EQ_STR(rec.text[3], "java/lang/Thread.sleep(J)V/5");
  CHECK_EQ_INT(rec.type[3], PP_PROFILE_OFFCPU);
  CHECK_EQ_INT(rec.count[3], 90909);
  CHECK_EQ_INT(st.offcpu_stacks, 1);
  CHECK_EQ_INT(st.bad_lines, 4);
  CHECK_EQ_INT(st.samples, 11);
  CHECK_EQ_INT(st.dropped, 4);

  /* without thread names the host's process comm is used */
  memset(&rec, 0, sizeof(rec));
  memset(&st, 0, sizeof(st));
  java_collect_emit(&host, (struct pp_sink *)&rec, 42, dump, strlen(dump), 0, &st);
  CHECK_EQ_STR(rec.comm[0], "(null)");

  char err[128];
  CHECK_EQ_INT(java_collect_error("# polyprof-jvmti 1\nE\tSIGPROF already has a handler\n", err,
                                  sizeof(err)),
               1);
  CHECK_EQ_STR(err, "SIGPROF already has a handler");
  CHECK_EQ_INT(java_collect_error(dump, err, sizeof(err)), 0);
}

static void test_load_replies(void) {
  char err[256];
  int rc;
  struct java_attach_reply r = {.status = 0, .body = "return code: 0\n"}; /* JDK 9-20 */
  CHECK_EQ_INT(java_load_result(&r, &rc, err, sizeof(err)), 0);
  r.body = "0\n"; /* JDK 8: bare return code */
  CHECK_EQ_INT(java_load_result(&r, &rc, err, sizeof(err)), 0);
  r.body = "return code: 200\n";
  CHECK_EQ_INT(java_load_result(&r, &rc, err, sizeof(err)), -1);
  CHECK_EQ_INT(rc, 200);
  /* JDK 21+: status 0 and an error text */
  r.body = "/x/libpolyprof-jvmti.so was not loaded.\n/x: cannot open shared object file\n";
  CHECK_EQ_INT(java_load_result(&r, &rc, err, sizeof(err)), -1);
  CHECK(strstr(err, "was not loaded.") != NULL && !strchr(err, '\n'));
  r.body = "Dynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading\n";
  CHECK_EQ_INT(java_load_result(&r, &rc, err, sizeof(err)), -1);
  r.status = 100; /* JDK <= 20 failed load */
  r.body = "";
  CHECK_EQ_INT(java_load_result(&r, &rc, err, sizeof(err)), -1);
}

static void test_properties_and_flags(void) {
  const char *props =
      "#Sun Nov 22 04:00:00 UTC 2026\n"
      "java.vm.name=OpenJDK 64-Bit Server VM\n"
      "java.version=17.0.15\n"
      "java.specification.version=17\n"
      "java.home=/usr/lib/jvm/java-17\\:x\n"
      "java.runtime.name=OpenJDK Runtime Environment\n";
  char v[128];
  java_property(props, "java.version", v, sizeof(v));
  CHECK_EQ_STR(v, "17.0.15");
  java_property(props, "java.home", v, sizeof(v));
  CHECK_EQ_STR(v, "/usr/lib/jvm/java-17:x");
  java_property(props, "java.ver", v, sizeof(v)); /* prefixes do not match */
  CHECK_EQ_STR(v, "");
  CHECK_EQ_INT(java_major_version(props), 17);
  CHECK_EQ_INT(java_major_version("java.specification.version=1.8\n"), 8);
  char *json = java_metadata_json(props, "-XX:CICompilerCount=2 -XX:+UseG1GC -XX:-UsePerfData\n");
  CHECK(json != NULL);
  CHECK_CONTAINS(json, "\"java_version\":\"openjdk version \\\"17.0.15\\\"");
  CHECK_CONTAINS(json, "{\"name\":\"CICompilerCount\",\"value\":\"2\"}");
  CHECK_CONTAINS(json, "{\"name\":\"UseG1GC\",\"value\":\"true\"}");
  CHECK_CONTAINS(json, "{\"name\":\"UsePerfData\",\"value\":\"false\"}");
  free(json);
}

static void test_refusal(void) {
  struct java_target_info ti = {.has_libjvm = 1, .signal_dispatcher = 1};
  CHECK(java_target_refusal(&ti, 0) == NULL);
  ti.xrs = 1;
  CHECK(java_target_refusal(&ti, 0) != NULL); /* -Xrs and no socket: never signal */
  CHECK(java_target_refusal(&ti, 1) == NULL); /* its socket exists: no signal needed */
  ti.xrs = 0;
  ti.signal_dispatcher = 0;
  CHECK(java_target_refusal(&ti, 0) != NULL);
  ti.signal_dispatcher = 1;
  ti.openj9 = 1;
  CHECK(java_target_refusal(&ti, 1) != NULL);
  ti.openj9 = 0;
  ti.has_libjvm = 0;
  CHECK(java_target_refusal(&ti, 1) != NULL);
}

int main(void) {
  test_dump();
  test_load_replies();
  test_properties_and_flags();
  test_refusal();
  return pp_test_finish("test_java_parse");
}
