/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP helpers that do not need a server: URL escaping (what
 * curl_easy_escape did before libcurl became dlopen()ed, byte for byte) and
 * a request made with libcurl loaded on demand (a refused connection to a
 * closed local port: an error from libcurl itself, not "cannot load").
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testlib.h"
#include "upload/http.h"

static void check_escape(const char *in, const char *want) {
  char *got = pp_url_escape(in);
  CHECK_EQ_STR(got, want);
  free(got);
}

/* A loopback port nobody listens on: bound, never listened, then closed. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) < 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

int main(void) {
  check_escape("", "");
  check_escape("AZaz09-._~", "AZaz09-._~");
  check_escape("a b/c?d=e&f", "a%20b%2Fc%3Fd%3De%26f");
  check_escape("2026-11-22T03:50:00", "2026-11-22T03%3A50%3A00");
  check_escape("app.cpu{hostname=h,runtime=python}",
               "app.cpu%7Bhostname%3Dh%2Cruntime%3Dpython%7D");
  check_escape("\xc3\xa9\x01\xff%", "%C3%A9%01%FF%25");

  int port = closed_port();
  CHECK(port > 0);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", port);
  struct pp_http_opts o = {.verify = true, .connect_timeout_ms = 2000, .timeout_ms = 5000};
  struct pp_http_result r;
  CHECK_EQ_INT(pp_http_get(url, NULL, &o, &r), -1);
  CHECK_EQ_INT(r.status, 0);
  CHECK(strstr(r.error, "cannot load") == NULL);
  CHECK(strstr(r.error, "onnect") != NULL); /* "Failed to connect ...": curl ran */
  pp_http_result_free(&r);
  return pp_test_finish("test_http");
}
