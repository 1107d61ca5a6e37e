/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof top [PID...]`: a live full-screen view of where the given
 * processes (all of them without PIDs) spend their time, redrawn every
 * second.
 *
 * It is the agent's own session loop (session.h) run with one-second
 * continuous sessions: each session's merged profile is one tick folded
 * into the view (top_view.h), so no second scheduler exists. A thread
 * reads keys and redraws at once; the screen is the terminal's alternate
 * screen written with plain ANSI sequences, which works over ssh and in
 * tmux. q, Ctrl-C and SIGTERM end the loop the same way (the loop's own
 * stop signal), after which the terminal is put back as it was.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "cmd_tools.h"
#include "log.h"
#include "rootless.h"
#include "session.h"
#include "top_view.h"

#define TOP_DEFAULT_HZ 100
#define TOP_MAX_PIDS 256
#define SCREEN_CAP (1u << 20)

static struct termios saved_tty;
static bool tty_saved;

static void restore_terminal(void) {
  if (!tty_saved) return;
  static const char leave[] = "\x1b[?25h\x1b[?1049l";
  if (write(STDOUT_FILENO, leave, sizeof(leave) - 1) < 0) { /* nothing more to do */
  }
  tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
  tty_saved = false;
}

static int enter_terminal(void) {
  if (tcgetattr(STDIN_FILENO, &saved_tty) < 0) return -errno;
  struct termios raw = saved_tty;
  /* keys one at a time, unechoed; ISIG stays, so Ctrl-C is SIGINT */
  raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0) return -errno;
  tty_saved = true;
  atexit(restore_terminal);
  static const char enter[] = "\x1b[?1049h\x1b[?25l\x1b[2J";
  if (write(STDOUT_FILENO, enter, sizeof(enter) - 1) < 0) return -errno;
  return 0;
}

/* The agent's errors while the view is up, shown once the terminal is
 * back (written to the screen they would tear the view). */
static char held_errors[4096];
static size_t held_len;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

static void hold_error(int level, const char *tag, const char *msg, void *ctx) {
  (void)ctx;
  if (level < PP_LOG_ERROR) return;
  pthread_mutex_lock(&held_lock);
  int n = snprintf(held_errors + held_len, sizeof(held_errors) - held_len, "polyprof: %s: %s\n",
                   tag, msg);
  if (n > 0) held_len += (size_t)n < sizeof(held_errors) - held_len ? (size_t)n : 0;
  pthread_mutex_unlock(&held_lock);
}

static bool terminal_size(int *rows, int *cols) {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col) return false;
  *rows = ws.ws_row;
  *cols = ws.ws_col;
  return true;
}

struct top_state {
  struct pp_top *view;
  pthread_mutex_t lock;
  char *screen;
  volatile sig_atomic_t quit, done;
  uint32_t pids[TOP_MAX_PIDS];
  size_t npids;
  int last_rows, last_cols;
};

/* Draws the view; called with the lock held. */
static void draw(struct top_state *s) {
  int rows = 24, cols = 80;
  terminal_size(&rows, &cols);
  s->last_rows = rows;
  s->last_cols = cols;
  size_t n = pp_top_render(s->view, s->screen, SCREEN_CAP, rows, cols);
  for (size_t off = 0; off < n;) {
    ssize_t w = write(STDOUT_FILENO, s->screen + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
}

static void *key_thread(void *arg) {
  struct top_state *s = arg;
  while (!s->done) {
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    int r = poll(&pfd, 1, 100);
    pthread_mutex_lock(&s->lock);
    bool redraw = false;
    if (r > 0) {
      unsigned char keys[64];
      ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));
      if (n == 0) s->quit = 1; /* the terminal is gone */
      for (ssize_t i = 0; i < n; i++) {
        bool quit = false;
        redraw |= pp_top_key(s->view, keys[i], &quit);
        if (quit) s->quit = 1;
      }
    } else if (r < 0 && errno != EINTR) {
      s->quit = 1;
    }
    int rows, cols;
    if (terminal_size(&rows, &cols) && (rows != s->last_rows || cols != s->last_cols))
      redraw = true;
    if (redraw && !s->quit) draw(s);
    pthread_mutex_unlock(&s->lock);
    if (s->quit) {
      /* the loop's own stop: it ends its session and returns */
      kill(getpid(), SIGTERM);
      break;
    }
  }
  return NULL;
}

/* Until the agent's loop installs its own handlers, a stop signal only
 * marks the view as ending: the loop then returns at once and the terminal
 * is restored (a signal's default action would leave it raw). */
static struct top_state *early_state;
static void early_stop(int sig) {
  (void)sig;
  if (early_state) early_state->quit = 1;
}

static bool pid_alive(uint32_t pid) {
  char path[32];
  snprintf(path, sizeof(path), "/proc/%u", pid);
  struct stat st;
  return stat(path, &st) == 0;
}

static bool hook_poll(void *ctx, struct pp_agent *a) {
  (void)a;
  struct top_state *s = ctx;
  if (s->quit) return true;
  if (!s->npids) return false;
  for (size_t i = 0; i < s->npids; i++)
    if (pid_alive(s->pids[i])) return false;
  return true; /* every process watched has exited */
}

static uint64_t counter(const struct pp_profile *p, const char *name) {
  uint64_t v = 0;
  for (size_t k = 0; k < pp_profile_counter_count(p); k++) {
    const struct pp_counter_rec *c = pp_profile_counter_at(p, k);
    if (!strcmp(pp_profile_str(p, c->name), name)) v += c->value;
  }
  return v;
}

static void hook_session(void *ctx, struct pp_agent *a, const struct session_times *t) {
  struct top_state *s = ctx;
  uint64_t missed = 0;
  for (size_t i = 0; i < a->nplugins; i++)
    if (a->plugins[i].snap_rc == 0)
      missed += counter(a->plugins[i].snap, "lost_samples") +
                counter(a->plugins[i].snap, "missed_samples");
  pthread_mutex_lock(&s->lock);
  pp_top_add_tick(s->view, a->merged, t->duration_s, missed);
  if (!s->quit) draw(s);
  pthread_mutex_unlock(&s->lock);
}

static int parse_pid(const char *s, uint32_t *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v <= 0 || v > 0x3fffffff) return -1;
  *out = (uint32_t)v;
  return 0;
}

int pp_cmd_top(struct pp_config *cfg, const char *const *operands, size_t n) {
  struct top_state *s = calloc(1, sizeof(*s));
  int rc = 2;
  if (!s) goto fail;
  if (n > TOP_MAX_PIDS) {
    fprintf(stderr, "polyprof top: at most %d PIDs\n", TOP_MAX_PIDS);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    if (parse_pid(operands[i], &s->pids[i]) < 0) {
      fprintf(stderr, "polyprof top: '%s' is not a pid\n", operands[i]);
      goto fail;
    }
    if (!pid_alive(s->pids[i])) {
      fprintf(stderr, "polyprof top: no process %u (gone?)\n", s->pids[i]);
      goto fail;
    }
  }
  s->npids = n;
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    fprintf(stderr, "polyprof top: needs a terminal (use `attach PID` for a printed profile)\n");
    goto fail;
  }
  int rows, cols;
  if (!terminal_size(&rows, &cols) || rows < PP_TOP_MIN_ROWS || cols < PP_TOP_MIN_COLS) {
    fprintf(stderr, "polyprof top: terminal %dx%d is below %dx%d\n",
            terminal_size(&rows, &cols) ? cols : 0, terminal_size(&rows, &cols) ? rows : 0,
            PP_TOP_MIN_COLS, PP_TOP_MIN_ROWS);
    goto fail;
  }
  /* one-second sessions, kept on until q; the one-program defaults */
  if (cfg->frequency <= 11) cfg->frequency = TOP_DEFAULT_HZ; /* the daemon's default is too low */
  cfg->duration = 1;
  cfg->continuous = true;
  cfg->pidns_check = false;
  free(cfg->pid_file);
  cfg->pid_file = NULL;
  free(cfg->log_file);
  cfg->log_file = NULL;
  free(cfg->output_dir);
  cfg->output_dir = NULL;
  cfg->app_identifiers = cfg->container_names = cfg->application_metadata = false;
  cfg->metadata_collection = cfg->metrics_collection = false;
  cfg->rootless = geteuid() != 0;
  pp_rootless_apply_defaults(cfg);
  if (n) {
    uint32_t *pids = malloc(n * sizeof(*pids));
    if (!pids) goto fail;
    memcpy(pids, s->pids, n * sizeof(*pids));
    free(cfg->pids);
    cfg->pids = pids;
    cfg->pid_count = n;
  }
  /* the screen is the view's: the agent's lines would scroll it */
  pp_log_set_stderr_level(PP_LOG_ERROR + 1);
  pp_log_set_tap(hold_error, NULL);
  s->view = pp_top_new(cfg->frequency);
  s->screen = malloc(SCREEN_CAP);
  if (!s->view || !s->screen || pthread_mutex_init(&s->lock, NULL) != 0) {
    fprintf(stderr, "polyprof top: out of memory\n");
    rc = 1;
    goto fail;
  }
  if (enter_terminal() < 0) {
    fprintf(stderr, "polyprof top: cannot set up the terminal: %s\n", strerror(errno));
    restore_terminal();
    rc = 1;
    goto fail;
  }
  early_state = s;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = early_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  pthread_mutex_lock(&s->lock);
  draw(s);
  pthread_mutex_unlock(&s->lock);
  pthread_t th;
  bool started = pthread_create(&th, NULL, key_thread, s) == 0;
  struct pp_agent_hooks hooks = {.ctx = s, .poll = hook_poll, .session = hook_session};
  rc = pp_agent_run_hooked(cfg, &hooks); /* owns cfg */
  cfg = NULL;
  s->done = 1;
  if (started) pthread_join(th, NULL);
  restore_terminal();
  pp_log_set_tap(NULL, NULL);
  if (held_len) fputs(held_errors, stderr);
  pp_top_free(s->view);
  free(s->screen);
  pthread_mutex_destroy(&s->lock);
  free(s);
  return rc;
fail:
  if (s) {
    pp_top_free(s->view);
    free(s->screen);
  }
  free(s);
  if (cfg) {
    pp_config_free(cfg);
    free(cfg);
  }
  return rc;
}
