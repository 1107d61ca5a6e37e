"""nodejs plugin, v8 mode, Node 18, 20, 22 and 24 at once: a function that
V8's optimizing compiler inlines into its caller's loop still shows as its
own frame under the caller (tests/workloads/nodejs/inlined.js)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402
import v8multi  # noqa: E402


def main():
    result = v8multi.profile_all("inlined.js", lambda s: n.frames_with(s, "outerLoop (") >= 150)
    for major, (script, stacks) in sorted(result.items()):
        outer = n.frames_with(stacks, "outerLoop (%s:" % script)
        inner = [(f, c) for f, c in stacks
                 if any(x.startswith("leafWork (%s:" % script) for x in f)]
        under = sum(c for f, c in inner
                    if [x.split(" (")[0] for x in f].index("leafWork") >
                    [x.split(" (")[0] for x in f].index("outerLoop"))
        u.check(outer >= 100, "node %d: %d samples in outerLoop" % (major, outer))
        u.check(under >= 0.8 * outer, "node %d: leafWork under outerLoop in %d of %d samples"
                % (major, under, outer))
    u.finish()


main()
