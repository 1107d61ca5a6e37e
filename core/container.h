/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Container names (docs/gprofiler-compat.md): container ids come
 * from /proc/PID/cgroup (pp_container_id_from_cgroup in enrich.h), names from
 * the Docker Engine API (also served by podman's compatibility socket) over
 * a unix socket: one "GET /containers/json" per refresh, short timeout,
 * bounded reply, parsed with jansson. CRI runtimes (containerd, CRI-O) are
 * not asked over gRPC: their Kubernetes containers are named from the OCI
 * bundle each keeps on the host (k8s_meta.h).
 */
#ifndef PP_CONTAINER_H
#define PP_CONTAINER_H

#include <stddef.h>

#define PP_DOCKER_TIMEOUT_MS 2000
#define PP_DOCKER_MAX_REPLY (16u << 20)

struct pp_containers;

/* docker_socket: one API socket to use, or NULL for the defaults (Docker's
 * and podman's sockets in the host mount namespace, via /proc/1/root).
 * cache_size bounds the id -> name cache. */
struct pp_containers *pp_containers_new(const char *docker_socket, size_t cache_size);
void pp_containers_free(struct pp_containers *c);

/* Name of a container id: 0 and a malloc'd name; -ENOENT if no reachable
 * runtime knows it; -ENOTCONN if no runtime socket answered at all. The
 * running containers are re-listed only when an id is not in the cache (and
 * an id found unknown is not asked about again for a minute). */
int pp_containers_name(struct pp_containers *c, const char *id, char **name);

/* Where containerd's and CRI-O's bundles are read (k8s_meta.h); default
 * /proc/1/root. A container one of them runs for Kubernetes is named
 * "k8s_<container>_<pod>_<namespace>_<pod-uid>_<restarts>" as gProfiler names
 * CRI containers. 0 or -ENOMEM. */
int pp_containers_set_k8s_root(struct pp_containers *c, const char *root);

/* One Docker API listing: cb(ctx, id, name) per running container (name
 * without Docker's leading '/'). 0, or -errno (-ETIMEDOUT, -EPROTO for a
 * malformed reply, -E2BIG beyond max_bytes, -ECONNREFUSED/-ENOENT...). */
typedef void (*pp_container_cb)(void *ctx, const char *id, const char *name);
int pp_docker_list(const char *socket_path, int timeout_ms, size_t max_bytes, pp_container_cb cb,
                   void *ctx);

#endif /* PP_CONTAINER_H */
