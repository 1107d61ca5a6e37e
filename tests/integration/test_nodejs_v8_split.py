"""nodejs plugin, v8 mode, Node 18, 20, 22 and 24 at once: split.js's 3:1
CPU split between heavyPath and lightPath within 5 points on each."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402
import v8multi  # noqa: E402


def counts(stacks):
    return n.frames_with(stacks, "heavyPath ("), n.frames_with(stacks, "lightPath (")


def main():
    # 800 samples on the two paths: the share's binomial spread is then 1.5
    # points, so 5 points is over three of them
    result = v8multi.profile_all("split.js", lambda s: sum(counts(s)) >= 800,
                                  seconds=90, freq=200)
    for major, (script, stacks) in sorted(result.items()):
        heavy, light = counts(stacks)
        share = 100.0 * heavy / max(heavy + light, 1)
        u.check(heavy + light >= 800, "node %d: %d samples on the two paths" % (major, heavy + light))
        u.check(abs(share - 75) <= 5, "node %d: heavy:light %.1f%% (75 +- 5; %d vs %d)"
                % (major, share, heavy, light))
    u.finish()


main()
