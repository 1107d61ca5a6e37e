"""Helpers for the php plugin's integration tests (standard library only)."""
import os
import shutil
import subprocess

import pputil as u

WORKLOADS = os.path.join(u.SRC, "tests", "workloads", "php")
PHP_SO = os.path.join(u.PLUGIN_DIR, "php.so")


def find_php():
    for name in ("php", "php8.2"):
        p = shutil.which(name)
        if p:
            return p
    return None


def find_fpm():
    for name in ("php-fpm", "php-fpm8.2", "php-fpm8.3", "php-fpm8.1"):
        p = shutil.which(name) or (os.path.exists("/usr/sbin/" + name) and "/usr/sbin/" + name)
        if p:
            return p
    return None


def require_php():
    if not os.path.exists(PHP_SO):
        u.skip("php plugin not built: " + PHP_SO)
    php = find_php()
    if not php:
        u.skip("php not installed (Debian: php-cli)")
    if os.geteuid() != 0:
        u.skip("reading another process's memory needs root (or CAP_SYS_PTRACE)")
    return php


def run_agent_logged(out, plugins, *extra, duration=3, timeout=180):
    """Like pputil.run_agent, but returns (process, log text)."""
    cmd = u.agent_cmd(out, plugins, *extra, duration=duration)
    log = cmd[cmd.index("--log-file") + 1]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True)
    text = ""
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    return r, text


def php_stacks(stacks):
    """(frames, count) of stacks holding PHP frames, frames after the comm."""
    return [(f, c) for f, c in stacks if any(x.endswith("_[php]") for x in f)]
