"""Corpus: Composer (Debian's composer, PHP 8.2 CLI) builds an optimized
class map autoloader over the PHP libraries Debian ships in /usr/share/php,
several times, under the agent as shipped (PHP through the phpspy-mode
plugin).

A user looks for: every sample under `composer` (PHP has no appid rule in
gProfiler, none is invented); Composer's class map generator in the stacks;
the share of samples whose PHP frames are all named.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpusutil as cu  # noqa: E402
from corpusutil import u  # noqa: E402

COMPOSER = "/usr/bin/composer"
RUNS = 12  # each ~0.2 s of CPU
# measured on the 2-core machine (docs/fidelity.md): 100 % in every run since the plugin probes a new
# process until its first stack (73-100 % when it waited for its next regular tick). Samples of
# composer's forks in execve() (stty, git) are perf's and count as named. Floor below, for load
FLOOR = 0.8

cu.need(COMPOSER, "composer (Debian package)")
cu.need("/usr/share/php/Composer", "Composer's PHP sources")

with cu.Run("composer") as run:
    proj = os.path.join(run.tmp, "project")
    os.makedirs(proj)
    os.symlink("/usr/share/php", os.path.join(proj, "lib"))
    with open(os.path.join(proj, "composer.json"), "w") as f:
        f.write('{"name": "polyprof/corpus", "autoload": {"classmap": ["lib/"]}}\n')
    env = {"COMPOSER_HOME": os.path.join(run.tmp, "home"), "COMPOSER_NO_INTERACTION": "1",
           "COMPOSER_ALLOW_SUPERUSER": "1", "COMPOSER_DISABLE_NETWORK": "1"}
    for k in range(RUNS):
        rc = run.run([COMPOSER, "dump-autoload", "--optimize", "--no-interaction", "-q"], cwd=proj, env=env)
        u.check(rc == 0, "composer dump-autoload run %d (exit %d)" % (k, rc))
    u.check(os.path.exists(os.path.join(proj, "vendor", "composer", "autoload_classmap.php")),
            "composer wrote vendor/composer/autoload_classmap.php")
lines = run.lines()
mine = [ln for ln in lines if ln.comm == "composer"]
cu.dump_top(mine)
cu.check_attribution(run, mine, "composer")
u.check(all(ln.appid is None for ln in mine), "composer: no appid (gProfiler has no PHP rule)")
gen = [ln for ln in mine if ln.has("ClassMapGenerator")]
u.check(gen, "composer: its ClassMapGenerator in %d samples" % cu.total(gen))
cu.check_marked(lines, lambda f: f.startswith("Composer\\"), lambda c: c == "composer",
                lambda a: a is None, "composer")
cu.check_no_pid_comm(lines, lambda f: "Composer" in f or "php" in f.lower(), "composer")
cu.report("composer", "php", mine, FLOOR)
u.finish()
