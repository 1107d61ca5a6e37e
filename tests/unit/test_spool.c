/* SPDX-License-Identifier: Apache-2.0 */
/* Spool: atomic entries, age order, cap with oldest-first eviction, private
 * directory; URL redaction and random ids of the HTTP helpers. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/gzip.h"
#include "support/safe_file.h"
#include "testlib.h"
#include "upload/http.h"
#include "upload/spool.h"

static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
  if (d) closedir(d);
  return n;
}

int main(void) {
  char dir[] = "/tmp/pp-spool-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char sub[256];
  snprintf(sub, sizeof(sub), "%s/a/spool", dir);
  char err[256] = "";
  struct pp_spool *s = pp_spool_open(sub, 1000, err, sizeof(err));
  CHECK(s != NULL);
  struct stat st;
  CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
  CHECK_EQ_INT(pp_spool_count(s, NULL), 0);
  char path[4200], id[33];
  CHECK_EQ_INT(pp_spool_oldest(s, path, sizeof(path), id), -ENOENT);

  /* bodies are real gzip (the spool refuses a cut-off one): 277 random
   * bytes stay a stored block, 300 bytes in all */
  static char body[1100];
  unsigned char raw[277], *gz = NULL;
  size_t gzlen = 0;
  srand(7);
  for (size_t i = 0; i < sizeof(raw); i++)
    raw[i] = (unsigned char)rand();
  CHECK_EQ_INT(pp_gzip(raw, sizeof(raw), 1, &gz, &gzlen), 0);
  CHECK_EQ_INT(gzlen, 300);
  memcpy(body, gz, gzlen);
  free(gz);
  CHECK_EQ_INT(pp_spool_put(s, 200, "bbbb", body, 300), 0);
  CHECK_EQ_INT(pp_spool_put(s, 100, "aaaa", body, 300), 0); /* older end time sorts first */
  CHECK_EQ_INT(pp_spool_put(s, 300, "cccc", body, 300), 0);
  size_t bytes = 0;
  CHECK_EQ_INT(pp_spool_count(s, &bytes), 3);
  CHECK_EQ_INT(bytes, 900);
  CHECK_EQ_INT(pp_spool_oldest(s, path, sizeof(path), id), 0);
  CHECK_EQ_STR(id, "aaaa");
  /* the cap: a fourth entry evicts the oldest */
  CHECK_EQ_INT(pp_spool_put(s, 400, "dddd", body, 300), 0);
  CHECK_EQ_INT(pp_spool_count(s, &bytes), 3);
  CHECK(bytes <= 1000);
  CHECK_EQ_INT(pp_spool_oldest(s, path, sizeof(path), id), 0);
  CHECK_EQ_STR(id, "bbbb");
  unsigned char *b = NULL;
  size_t len = 0;
  CHECK_EQ_INT(pp_spool_read(s, path, &b, &len), 0);
  CHECK_EQ_INT(len, 300);
  free(b);
  CHECK_EQ_INT(pp_spool_remove(s, path), 0);
  CHECK_EQ_INT(pp_spool_count(s, NULL), 2);
  /* larger than the whole cap: refused, nothing evicted */
  CHECK_EQ_INT(pp_spool_put(s, 500, "eeee", body, 1001), -EFBIG);
  CHECK_EQ_INT(pp_spool_count(s, NULL), 2);
  CHECK_EQ_INT(count_files(sub, ".tmp-"), 0);
  pp_spool_free(s);

  /* a reopened spool sees what an earlier run left, and removes the temp
   * files a crash left (old and current names) */
  char junk[4300];
  snprintf(junk, sizeof(junk), "%s/.tmp-0000000001-000001-zzzz.json.gz", sub);
  FILE *jf = fopen(junk, "w");
  CHECK(jf && fwrite(body, 1, 200, jf) == 200 && fclose(jf) == 0);
  snprintf(junk, sizeof(junk), "%s/" PP_SAFE_TEMP_PREFIX "spool.0123456789abcdef", sub);
  jf = fopen(junk, "w");
  CHECK(jf && fwrite(body, 1, 200, jf) == 200 && fclose(jf) == 0);
  s = pp_spool_open(sub, 1000, err, sizeof(err));
  CHECK_EQ_INT(pp_spool_count(s, &bytes), 2);
  CHECK_EQ_INT(bytes, 600);
  CHECK_EQ_INT(count_files(sub, ".tmp-") + count_files(sub, PP_SAFE_TEMP_PREFIX), 0);

  /* a cut-off entry is refused (never sent as a profile) */
  CHECK_EQ_INT(pp_spool_oldest(s, path, sizeof(path), id), 0);
  CHECK(truncate(path, 150) == 0);
  b = NULL;
  CHECK_EQ_INT(pp_spool_read(s, path, &b, &len), -EBADMSG);
  CHECK(b == NULL);
  CHECK_EQ_INT(pp_spool_remove(s, path), 0);
  /* a symlink in place of an entry is not read through */
  CHECK_EQ_INT(pp_spool_oldest(s, path, sizeof(path), id), 0);
  CHECK(unlink(path) == 0 && symlink("/etc/hostname", path) == 0);
  CHECK_EQ_INT(pp_spool_read(s, path, &b, &len), -ELOOP);
  unlink(path);
  pp_spool_free(s);

  /* a group/world-accessible directory is made private */
  chmod(sub, 0755);
  s = pp_spool_open(sub, 1000, err, sizeof(err));
  CHECK(s != NULL && stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
  pp_spool_free(s);

  char red[256];
  pp_http_redact_url("https://h/api/v2/profiles?key=SECRET&service=s&token=T2", red, sizeof(red));
  CHECK_EQ_STR(red, "https://h/api/v2/profiles?key=<redacted>&service=s&token=<redacted>");
  char hex[33];
  pp_http_random_hex(hex);
  CHECK_EQ_INT(strlen(hex), 32);

  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  return pp_test_finish("test_spool");
}
