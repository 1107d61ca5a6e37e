/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host metrics of the .col header ("metrics"), computed the way psutil does
 * for gProfiler, so the studio's figures mean the same for both agents:
 * cpu_avg is the busy share of all CPUs since the previous reading of
 * /proc/stat (guest time is already inside user/nice and not counted twice;
 * idle and iowait are idle), rounded to one decimal; mem_avg is the mean of (MemTotal -
 * MemAvailable) / MemTotal samples, each rounded to one decimal like psutil's percent.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata.h"
#include "polyprof/kit/proc.h"

struct pp_metrics {
  bool have_cpu;
  unsigned long long busy, total; /* at the previous session boundary */
  double mem_sum;
  unsigned long mem_samples;
};

static bool read_cpu(unsigned long long *busy, unsigned long long *total) {
  char text[1024]; /* only the first ("cpu ") line is needed */
  if (pp_read_file("/proc/stat", text, sizeof(text), NULL) != 0) return false;
  if (strncmp(text, "cpu ", 4) != 0) return false;
  unsigned long long v[10] = {0};
  int n = sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                 &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  if (n < 4) return false;
  unsigned long long all = 0;
  for (int i = 0; i < 8 && i < n; i++)
    all += v[i]; /* user..steal; guest is inside user */
  unsigned long long idle = v[3] + (n > 4 ? v[4] : 0);
  *total = all;
  *busy = all >= idle ? all - idle : 0;
  return true;
}

static bool read_mem_percent(double *pct) {
  char text[8192];
  if (pp_read_file("/proc/meminfo", text, sizeof(text), NULL) != 0) return false;
  unsigned long long total = 0, avail = 0, mfree = 0, buffers = 0, cached = 0;
  bool have_avail = false;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strncmp(line, "MemTotal:", 9))
      total = strtoull(line + 9, NULL, 10);
    else if (!strncmp(line, "MemAvailable:", 13))
      avail = strtoull(line + 13, NULL, 10), have_avail = true;
    else if (!strncmp(line, "MemFree:", 8))
      mfree = strtoull(line + 8, NULL, 10);
    else if (!strncmp(line, "Buffers:", 8))
      buffers = strtoull(line + 8, NULL, 10);
    else if (!strncmp(line, "Cached:", 7))
      cached = strtoull(line + 7, NULL, 10);
  }
  if (!have_avail) avail = mfree + buffers + cached; /* kernels before 3.14 */
  if (total == 0) return false;
  if (avail > total) avail = total;
  *pct = round((double)(total - avail) * 1000.0 / (double)total) / 10.0;
  return true;
}

struct pp_metrics *pp_metrics_new(void) {
  struct pp_metrics *m = calloc(1, sizeof(*m));
  if (m) m->have_cpu = read_cpu(&m->busy, &m->total);
  return m;
}

void pp_metrics_free(struct pp_metrics *m) {
  free(m);
}

void pp_metrics_sample(struct pp_metrics *m) {
  double pct;
  if (m && read_mem_percent(&pct)) {
    m->mem_sum += pct;
    m->mem_samples++;
  }
}

void pp_metrics_session(struct pp_metrics *m, double *cpu_avg, double *mem_avg) {
  *cpu_avg = -1;
  *mem_avg = -1;
  if (!m) return;
  unsigned long long busy, total;
  if (read_cpu(&busy, &total)) {
    if (m->have_cpu) {
      unsigned long long dt = total > m->total ? total - m->total : 0;
      unsigned long long db = busy > m->busy ? busy - m->busy : 0;
      double pct = dt ? (double)db * 100.0 / (double)dt : 0.0;
      if (pct > 100.0) pct = 100.0;
      *cpu_avg = round(pct * 10.0) / 10.0;
    }
    m->busy = busy;
    m->total = total;
    m->have_cpu = true;
  }
  if (m->mem_samples) *mem_avg = m->mem_sum / (double)m->mem_samples;
  m->mem_sum = 0;
  m->mem_samples = 0;
}
