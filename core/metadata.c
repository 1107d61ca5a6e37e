/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The system facts of the .col header's "metadata" object, in gProfiler's
 * key order (docs/formats.md) so that consumers that read gProfiler's files
 * read ours; the header around them is output/col_header.c. Facts come from
 * uname, /proc, /etc/os-release, libc and the network interfaces; no
 * command is run and no packet is sent. The upload token never appears here.
 */
#include "metadata.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "polyprof/kit/proc.h"

#define UNKNOWN "unknown"

void pp_iso_time(time_t t, char *buf, size_t len) {
  struct tm tm;
  if (!buf || !len) return;
  if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm) == 0) buf[0] = '\0';
}

/* ---- facts ---- */

static void set_str(json_t *o, const char *k, const char *v) {
  json_object_set_new(o, k, v ? pp_json_string_lossy(v, strlen(v)) : json_null());
}

/* First "model name" and "flags" (x86) / "Features" (arm64) of /proc/cpuinfo,
 * plus Intel family-6 model codenames (gProfiler's table). */
static void cpu_info(char *model, size_t mlen, char *flags, size_t flen, char *codename,
                     size_t clen) {
  snprintf(model, mlen, UNKNOWN);
  snprintf(flags, flen, UNKNOWN);
  snprintf(codename, clen, "UNKNOWN");
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  bool have_model = false, have_flags = false;
  long family = -1, cpu_model = -1;
  for (int n = 0; n < 100000 && getline(&line, &cap, f) > 0; n++) {
    line[strcspn(line, "\n")] = '\0';
    char *colon = strstr(line, ": ");
    if (!colon) continue;
    size_t kl = (size_t)(colon - line);
    while (kl && (line[kl - 1] == ' ' || line[kl - 1] == '\t'))
      kl--;
    const char *val = colon + 2;
    if (kl == 10 && !strncmp(line, "model name", 10) && !have_model) {
      snprintf(model, mlen, "%s", val);
      have_model = true;
    } else if (((kl == 5 && !strncmp(line, "flags", 5)) ||
                (kl == 8 && !strncmp(line, "Features", 8))) &&
               !have_flags) {
      snprintf(flags, flen, "%s", val);
      have_flags = true;
    } else if (kl == 10 && !strncmp(line, "cpu family", 10) && family < 0) {
      family = strtol(val, NULL, 10);
    } else if (kl == 5 && !strncmp(line, "model", 5) && cpu_model < 0) {
      cpu_model = strtol(val, NULL, 10);
    }
    if (have_model && have_flags && family >= 0 && cpu_model >= 0) break;
  }
  free(line);
  fclose(f);
  if (family == 6) {
    const char *c = cpu_model == 106   ? "ICX"
                    : cpu_model == 143 ? "SPR"
                    : cpu_model == 207 ? "EMR"
                    : cpu_model == 173 ? "GNR"
                                       : NULL;
    if (c) snprintf(codename, clen, "%s", c);
  }
}

/* gProfiler: "NONE" without the cpuinfo "hypervisor" flag, else the CPUID
 * 0x40000000 vendor string ("KVMKVMKVM", "VMwareVMware", "Microsoft Hv"...).
 * CPUID is an unprivileged instruction; elsewhere /sys/hypervisor/type. */
static void hypervisor(const char *cpu_flags, char *out, size_t len) {
  /* whole-word match in the space-separated flags list */
  bool flagged = false;
  size_t wl = strlen("hypervisor");
  for (const char *p = strstr(cpu_flags, "hypervisor"); p; p = strstr(p + 1, "hypervisor")) {
    if ((p == cpu_flags || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\0' || p[wl] == '\n')) {
      flagged = true;
      break;
    }
  }
  char sys[64];
  if (pp_read_file("/sys/hypervisor/type", sys, sizeof(sys), NULL) == 0 && sys[0]) {
    sys[strcspn(sys, "\n")] = '\0';
    flagged = true;
  } else {
    sys[0] = '\0';
  }
  if (!flagged) {
    snprintf(out, len, "NONE");
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  __cpuid(0x40000000, eax, ebx, ecx, edx);
  char vendor[13];
  memcpy(vendor, &ebx, 4);
  memcpy(vendor + 4, &ecx, 4);
  memcpy(vendor + 8, &edx, 4);
  vendor[12] = '\0';
  /* vendors pad their 12-byte signature with spaces ("bhyve bhyve ") */
  for (int i = 11; i >= 0 && (vendor[i] == ' ' || vendor[i] == '\0'); i--)
    vendor[i] = '\0';
  bool printable = vendor[0] != '\0';
  for (size_t i = 0; vendor[i]; i++)
    if (!isprint((unsigned char)vendor[i])) printable = false;
  if (printable) {
    snprintf(out, len, "%s", vendor);
    return;
  }
#endif
  snprintf(out, len, "%s", sys[0] ? sys : "VM-UNKNOWN");
}

/* os-release value: unquote "..." / '...' and backslash escapes. */
static void os_release_value(const char *v, char *out, size_t len) {
  size_t o = 0;
  char q = (*v == '"' || *v == '\'') ? *v++ : 0;
  for (; *v && o + 1 < len; v++) {
    if (q && *v == q) break;
    if (q == '"' && *v == '\\' && v[1]) v++;
    out[o++] = *v;
  }
  out[o] = '\0';
}

/* distro.linux_distribution(): NAME, VERSION_ID, and the codename from
 * VERSION_CODENAME, UBUNTU_CODENAME or VERSION's "(...)". Host files first. */
static void os_release(char *name, char *release, char *codename, size_t len) {
  static const char *const paths[] = {"/proc/1/root/etc/os-release", "/etc/os-release",
                                      "/proc/1/root/usr/lib/os-release", "/usr/lib/os-release"};
  char text[16384];
  bool ok = false;
  for (size_t i = 0; i < 4 && !ok; i++)
    ok = pp_read_file(paths[i], text, sizeof(text), NULL) == 0;
  if (!ok) {
    snprintf(name, len, UNKNOWN);
    snprintf(release, len, UNKNOWN);
    snprintf(codename, len, UNKNOWN);
    return;
  }
  name[0] = release[0] = codename[0] = '\0';
  char version[256] = "", ubuntu[256] = "";
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strncmp(line, "NAME=", 5))
      os_release_value(line + 5, name, len);
    else if (!strncmp(line, "VERSION_ID=", 11))
      os_release_value(line + 11, release, len);
    else if (!strncmp(line, "VERSION_CODENAME=", 17))
      os_release_value(line + 17, codename, len);
    else if (!strncmp(line, "UBUNTU_CODENAME=", 16))
      os_release_value(line + 16, ubuntu, sizeof(ubuntu));
    else if (!strncmp(line, "VERSION=", 8))
      os_release_value(line + 8, version, sizeof(version));
  }
  if (!codename[0] && ubuntu[0]) snprintf(codename, len, "%s", ubuntu);
  char *lp = strchr(version, '('), *rp = lp ? strchr(lp, ')') : NULL;
  if (!codename[0] && lp && rp) snprintf(codename, len, "%.*s", (int)(rp - lp - 1), lp + 1);
}

static double mem_total_mb(void) {
  char text[8192];
  if (pp_read_file("/proc/meminfo", text, sizeof(text), NULL) != 0) return 0;
  const char *p = strstr(text, "MemTotal:");
  if (!p) return 0;
  return nearbyint((double)strtoull(p + 9, NULL, 10) / 1024.0);
}

/* The first non-loopback interface with an IPv4 address (what gProfiler's
 * SIOCGIFCONF walk finds), its MAC uppercase with colons. */
static void mac_address(char *out, size_t len) {
  snprintf(out, len, UNKNOWN);
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return;
  const char *iface = NULL;
  for (struct ifaddrs *i = ifs; i && !iface; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK))
      iface = i->ifa_name;
  for (struct ifaddrs *i = ifs; i && iface; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_PACKET || strcmp(i->ifa_name, iface)) continue;
    const struct sockaddr_ll *ll = (const struct sockaddr_ll *)i->ifa_addr;
    if (ll->sll_halen != 6) break;
    const unsigned char *m = ll->sll_addr;
    snprintf(out, len, "%02X:%02X:%02X:%02X:%02X:%02X", m[0], m[1], m[2], m[3], m[4], m[5]);
    break;
  }
  freeifaddrs(ifs);
}

/* The source address the kernel would use towards 8.8.8.8 (a UDP
 * connect() only selects a route: nothing is sent), else the first
 * non-loopback IPv4 address. */
static void private_ip(char *out, size_t len) {
  snprintf(out, len, UNKNOWN);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(53)};
    inet_pton(AF_INET, "8.8.8.8", &dst.sin_addr);
    struct sockaddr_in src;
    socklen_t sl = sizeof(src);
    if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) == 0 &&
        getsockname(fd, (struct sockaddr *)&src, &sl) == 0 &&
        inet_ntop(AF_INET, &src.sin_addr, out, (socklen_t)len)) {
      close(fd);
      return;
    }
    close(fd);
  }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)len);
    break;
  }
  freeifaddrs(ifs);
}

static const char *run_mode(void) {
  if (getenv("POLYPROF_IN_K8S") || getenv("GPROFILER_IN_K8S")) return "k8s";
  if (getenv("POLYPROF_IN_CONTAINER") || getenv("GPROFILER_IN_CONTAINER")) return "container";
  return "standalone_executable";
}

static json_t *str_list(char *const *items, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && items && i < n; i++)
    if (items[i]) json_array_append_new(a, pp_json_string_lossy(items[i], strlen(items[i])));
  return a;
}

/* "https://user:secret@host" -> "https://<redacted>@host" */
static json_t *redacted_url(const char *url) {
  if (!url) return json_null();
  const char *scheme = strstr(url, "://");
  const char *host = scheme ? scheme + 3 : url;
  const char *at = strchr(host, '@'), *slash = strchr(host, '/');
  if (!at || (slash && slash < at)) return pp_json_string_lossy(url, strlen(url));
  char *out = NULL;
  if (asprintf(&out, "%.*s<redacted>%s", (int)(host - url), url, at) < 0) return json_null();
  json_t *j = pp_json_string_lossy(out, strlen(out));
  free(out);
  return j;
}

/* The configuration in effect, under gProfiler's argument names where one
 * exists. Secrets never appear: the token is "<redacted>", URL credentials
 * are cut, and plugin option values are left out (a plugin's option may be a
 * credential and the core cannot tell). */
static json_t *run_arguments(const struct pp_config *c) {
  json_t *o = json_object();
  if (!o || !c) return o;
  set_str(o, "config_path", c->config_path);
  json_object_set_new(o, "frequency", json_integer(c->frequency));
  json_object_set_new(o, "duration", json_integer(c->duration));
  json_object_set_new(o, "proc_scan_interval_ms", json_integer(c->proc_scan_interval_ms));
  json_object_set_new(o, "continuous", json_boolean(c->continuous));
  if (c->pid_count) {
    json_t *pids = json_array();
    for (size_t i = 0; pids && i < c->pid_count; i++)
      json_array_append_new(pids, json_integer(c->pids[i]));
    json_object_set_new(o, "pids_to_profile", pids);
  } else {
    json_object_set_new(o, "pids_to_profile", json_null());
  }
  set_str(o, "profiling_mode", c->profiling_mode ? c->profiling_mode : "cpu");
  set_str(o, "output_dir", c->output_dir);
  json_object_set_new(o, "rotating_output", json_boolean(c->rotating_output));
  json_object_set_new(o, "flamegraph", json_boolean(c->flamegraph));
  json_object_set_new(o, "output_formats", str_list(c->output_formats, c->output_format_count));
  json_object_set_new(o, "collect_appids", json_boolean(c->app_identifiers));
  json_object_set_new(o, "container_names", json_boolean(c->container_names));
  json_object_set_new(o, "application_metadata", json_boolean(c->application_metadata));
  json_object_set_new(o, "collect_metadata", json_boolean(c->metadata_collection));
  json_object_set_new(o, "collect_metrics", json_boolean(c->metrics_collection));
  json_object_set_new(o, "app_id_args_filters",
                      str_list(c->app_id_args_filters, c->app_id_args_filter_count));
  json_object_set_new(o, "appid_cache_size", json_integer((json_int_t)c->appid_cache_size));
  json_object_set_new(o, "pid_ns_check", json_boolean(c->pidns_check));
  set_str(o, "pid_file", c->pid_file);
  set_str(o, "log_file", c->log_file);
  json_object_set_new(o, "log_rotate_max_size", json_integer((json_int_t)c->log_max_bytes));
  json_object_set_new(o, "log_rotate_backup_count", json_integer(c->log_backups));
  json_object_set_new(o, "verbose", json_boolean(c->verbose));
  set_str(o, "plugin_dir", c->plugin_dir);
  set_str(o, "isolation", c->isolation);
  json_object_set_new(o, "worker_memory_limit_mb", json_integer(c->worker_memory_limit_mb));
  json_object_set_new(o, "worker_timeout_s", json_integer(c->worker_timeout_s));
  json_object_set_new(o, "worker_restart_backoff_max_s",
                      json_integer(c->worker_restart_backoff_max_s));
  json_object_set_new(o, "upload_results", json_boolean(c->upload));
  json_object_set_new(o, "server_host", redacted_url(c->server_host));
  json_object_set_new(o, "server_token", c->token ? json_string("<redacted>") : json_null());
  set_str(o, "service_name", c->service_name);
  json_t *plugins = json_object();
  for (size_t i = 0; plugins && i < c->plugin_count; i++) {
    const struct pp_plugin_config *pc = &c->plugins[i];
    if (!pc->name) continue;
    json_t *p = json_object();
    json_object_set_new(p, "enabled", json_boolean(pc->enabled));
    set_str(p, "mode", pc->mode);
    set_str(p, "isolation", pc->isolation);
    json_object_set_new(plugins, pc->name, p);
  }
  json_object_set_new(o, "plugins", plugins);
  return o;
}

json_t *pp_metadata_system(const struct pp_config *cfg, time_t spawn_time) {
  json_t *m = json_object();
  if (!m) return NULL;
  char iso[32];
  pp_iso_time(spawn_time, iso, sizeof(iso));
  struct utsname u;
  if (uname(&u) != 0) memset(&u, 0, sizeof(u));
  char model[1024], flags[8192], codename[16], hv[64];
  cpu_info(model, sizeof(model), flags, sizeof(flags), codename, sizeof(codename));
  hypervisor(flags, hv, sizeof(hv));
  char host[256];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "<unknown>");
  host[sizeof(host) - 1] = '\0';
  char os_name[256], os_rel[256], os_code[256];
  os_release(os_name, os_rel, os_code, sizeof(os_name));
  char mac[32], ip[INET_ADDRSTRLEN + 1];
  mac_address(mac, sizeof(mac));
  private_ip(ip, sizeof(ip));
  struct timespec bt;
  double uptime =
      clock_gettime(CLOCK_BOOTTIME, &bt) == 0 || clock_gettime(CLOCK_MONOTONIC, &bt) == 0
          ? (double)bt.tv_sec + (double)bt.tv_nsec / 1e9
          : 0.0;
  const char *mode = run_mode();
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

  set_str(m, "cloud_provider", UNKNOWN);
  set_str(m, "agent_version", POLYPROF_VERSION);
  set_str(m, "spawn_time", iso);
  /* gProfiler reports its interpreter's sys.version; we have none */
  json_object_set_new(m, "python_version", json_null());
  set_str(m, "run_mode", mode);
  set_str(m, "deployment_type",
          !strcmp(mode, "k8s")         ? "k8s"
          : !strcmp(mode, "container") ? "containers"
                                       : "instances");
  set_str(m, "kernel_release", u.release);
  set_str(m, "kernel_version", u.version);
  set_str(m, "system_name", u.sysname);
  set_str(m, "hypervisor", hv);
  json_object_set_new(m, "processors", json_integer(ncpu > 0 ? ncpu : 0));
  set_str(m, "cpu_model_name", model);
  set_str(m, "cpu_arch_codename", codename);
  set_str(m, "cpu_flags", flags);
  json_object_set_new(m, "memory_capacity_mb", json_integer((json_int_t)mem_total_mb()));
  set_str(m, "hostname", host);
  set_str(m, "system", "Linux");
  set_str(m, "os_name", os_name);
  set_str(m, "os_release", os_rel);
  set_str(m, "os_codename", os_code);
#ifdef __GLIBC__
  set_str(m, "libc_type", "glibc");
  set_str(m, "libc_version", gnu_get_libc_version());
#else
  set_str(m, "libc_type", "musl");
  set_str(m, "libc_version", UNKNOWN);
#endif
  set_str(m, "hardware_type", u.machine);
  json_object_set_new(m, "pid", json_integer(getpid()));
  set_str(m, "mac_address", mac);
  set_str(m, "private_ip", ip);
  /* the name says ms, gProfiler's value is seconds: kept for compatibility */
  json_object_set_new(m, "spawn_uptime_ms", json_real(uptime));
  json_object_set_new(m, "run_arguments", run_arguments(cfg));
  json_object_set_new(m, "big_data", json_object());
  json_object_set_new(m, "external_metadata", json_object());
  set_str(m, "agent", "polyprof");
  return m;
}
