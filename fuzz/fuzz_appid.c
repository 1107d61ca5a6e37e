/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: application ids from what a process chose about itself
 * (core/appid.c, appid_ini.c): its /proc/PID/cmdline (psutil-style
 * splitting, runtime detection, the gunicorn/uvicorn/uwsgi/celery/
 * pyspark/python/java/node/ruby rules, -jar, -m, ini files named on the
 * command line) and the text of a uwsgi ini file. Every input is both:
 * a cmdline whose first argument is also the executable, and ini text.
 * Paths are resolved under an empty directory standing for the process's
 * root, so nothing of this host is read.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "appid.h"
#include "enrich.h"
#include "fuzz_input.h"

static char root_dir[] = "/tmp/pp-fuzz-root-XXXXXX";

static void remove_root(void) {
  rmdir(root_dir);
}

static const char *empty_root(void) {
  static int made;
  if (!made) {
    if (!mkdtemp(root_dir)) abort();
    atexit(remove_root);
    made = 1;
  }
  return root_dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* the cmdline as read from /proc, and NUL-terminated text for the
   * string-based parsers */
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  static const char *const filters[] = {"^-Dspark\\.app\\.name=", "^--name$"};
  struct pp_enrich_opts opts = {.appids = true,
                                .app_id_args_filters = filters,
                                .app_id_args_filter_count = 2,
                                .java_spark_appid = size & 1};
  const char *exe = text; /* argv[0], up to its NUL */
  char *id = pp_appid_for(exe, (const char *)data, size, "/srv/app", empty_root(), &opts);
  if (id) {
    if (strlen(id) > 64 * 1024) abort();
    free(id);
  }
  id = pp_appid_for("/usr/bin/python3", (const char *)data, size, "/", NULL, &opts);
  free(id);
  (void)pp_runtime_name(pp_runtime_detect(exe, (const char *)data, size));
  const char *argv[64];
  char *storage = NULL;
  size_t n = pp_split_cmdline((const char *)data, size, &storage, argv, 64);
  if (n > 64) abort();
  for (size_t i = 0; i < n; i++)
    (void)strlen(argv[i]);
  free(storage);
  char *module = NULL;
  if (pp_ini_find_module(text, &module) == 0) free(module);
  free(text);
  return 0;
}
