/* SPDX-License-Identifier: Apache-2.0 */
/*
 * See fuzz_server.h.
 */
#include "fuzz_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static const uint8_t *reply;
static size_t reply_len;
static int busy; /* connections being answered */

static void answer(int c) {
  /* the request head (and a small body: uploads are answered without
   * reading them all, as a server refusing them would) */
  char req[4096];
  size_t got = 0;
  while (got < sizeof(req) - 1) {
    ssize_t n = recv(c, req + got, sizeof(req) - 1 - got, 0);
    if (n <= 0) break;
    got += (size_t)n;
    req[got] = '\0';
    if (strstr(req, "\r\n\r\n")) break;
  }
  pthread_mutex_lock(&lock);
  const uint8_t *p = reply;
  size_t len = reply_len;
  busy++;
  pthread_mutex_unlock(&lock);
  for (size_t done = 0; p && done < len;) {
    ssize_t n = send(c, p + done, len - done, MSG_NOSIGNAL);
    if (n <= 0) break; /* the client gave up */
    done += (size_t)n;
  }
  shutdown(c, SHUT_WR);
  close(c);
  pthread_mutex_lock(&lock);
  busy--;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
}

static void *serve(void *arg) {
  int l = (int)(intptr_t)arg;
  for (;;) {
    int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (c >= 0) answer(c);
  }
  return NULL;
}

static void start(int l) {
  pthread_t t;
  if (listen(l, 16) < 0 || pthread_create(&t, NULL, serve, (void *)(intptr_t)l) != 0) abort();
  pthread_detach(t);
}

uint16_t pp_fuzz_server_tcp(void) {
  static uint16_t port;
  if (port) return port;
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t sl = sizeof(sa);
  if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
      getsockname(l, (struct sockaddr *)&sa, &sl) < 0)
    abort();
  start(l);
  port = ntohs(sa.sin_port);
  return port;
}

static char unix_path[108];

static void remove_unix_path(void) {
  unlink(unix_path);
}

const char *pp_fuzz_server_unix(void) {
  if (unix_path[0]) return unix_path;
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/pp-fuzz-%d.sock", (int)getpid());
  unlink(sa.sun_path);
  if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0) abort();
  start(l);
  snprintf(unix_path, sizeof(unix_path), "%s", sa.sun_path);
  atexit(remove_unix_path);
  return unix_path;
}

void pp_fuzz_server_reply(const uint8_t *data, size_t size) {
  pthread_mutex_lock(&lock);
  reply = data;
  reply_len = size;
  pthread_mutex_unlock(&lock);
}

void pp_fuzz_server_end(void) {
  pthread_mutex_lock(&lock);
  reply = NULL;
  reply_len = 0;
  while (busy)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
}
