"""Corpus: RDoc (Debian's ruby) generates its HTML documentation (Darkfish)
for part of Ruby's standard library, under the agent as shipped.

A user looks for: every sample under `rdoc` (gProfiler's Ruby appid rule
needs a `.rb` argument, so /usr/bin/rdoc has none, and none is invented);
RDoc's parser and generator in the stacks; the share of samples whose Ruby
frames are all named.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpusutil as cu  # noqa: E402
from corpusutil import u  # noqa: E402

RDOC = "/usr/bin/rdoc"
LIB = "/usr/lib/ruby/3.1.0"
PARTS = ["csv", "net", "irb", "rdoc/markup", "rubygems/commands"]
# measured on the 2-core machine (docs/fidelity.md): 100 % in three runs
FLOOR = 0.80

cu.need(RDOC, "rdoc (Debian's ruby)")
for p in PARTS:
    cu.need(os.path.join(LIB, p), "Ruby 3.1's standard library")

with cu.Run("rdoc") as run:
    rc = run.run([RDOC, "-q", "-o", os.path.join(run.tmp, "doc")] + [os.path.join(LIB, p) for p in PARTS],
                 env={"HOME": run.tmp})
    u.check(rc == 0, "rdoc generated the documentation (exit %d)" % rc)
    u.check(os.path.exists(os.path.join(run.tmp, "doc", "index.html")), "rdoc wrote doc/index.html")
lines = run.lines()
mine = [ln for ln in lines if ln.comm == "rdoc"]
cu.dump_top(mine)
cu.check_attribution(run, mine, "rdoc")
u.check(all(ln.appid is None for ln in mine), "rdoc: no appid (gProfiler's rule needs a .rb argument)")
gen = [ln for ln in mine if ln.has("/rdoc/generator/darkfish.rb:")]
u.check(gen, "rdoc: RDoc's Darkfish generator (generate_class...) in %d samples" % cu.total(gen))
parse = [ln for ln in mine if ln.has("/rdoc/parser/")]
u.check(parse, "rdoc: RDoc's parsers in %d samples" % cu.total(parse))
cu.check_marked(lines, lambda f: "/rdoc/" in f and f.endswith("_[rb]"), lambda c: c == "rdoc", lambda a: a is None,
                "rdoc")
cu.check_no_pid_comm(lines, lambda f: "libruby" in f or "/rdoc/" in f or f.startswith("rb_"), "rdoc")
cu.report("rdoc", "ruby", mine, FLOOR)
u.finish()
