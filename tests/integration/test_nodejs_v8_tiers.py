"""nodejs plugin, v8 mode, Node 18, 20, 22 and 24 at once: frames carry the
tier of the code they run and C++ frames are named
(tests/workloads/nodejs/tiers.js, three processes per version):

- default flags: the hot loop runs optimized code (`_[j]`, or `_[i]` when
  its caller's OSR code inlined it) with its small callee inlined (`_[i]`);
  the loop over crypto.pbkdf2Sync shows Node's and OpenSSL's C++ frames
  by name under its JS frame;
- --jitless: the interpreter only (`_[0]`);
- --always-sparkplug and no optimizing compiler: baseline code (`_[1]`).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import pputil as u  # noqa: E402
import v8cases  # noqa: E402
import v8multi  # noqa: E402


def flags(major, variant):
    if variant == "jitless":
        return ["--jitless"]
    if variant == "baseline":
        # Node 18's V8 has no Maglev (and refuses its flag)
        return ["--always-sparkplug", "--no-opt"] + ([] if major == 18 else ["--no-maglev"])
    return []


VARIANTS = ("default", "jitless", "baseline")


def frame_of(stack, fn, script):
    for x in stack:
        if x.startswith("%s (%s:" % (fn, script)):
            return x
    return None


def tier_share(stacks, fn, script, suffixes):
    """(samples whose fn frame ends with one of suffixes, samples with fn)."""
    hit = total = 0
    for f, c in stacks:
        x = frame_of(f, fn, script)
        if x is None:
            continue
        total += c
        if x.endswith(suffixes):
            hit += c
    return hit, total


def native_under(stacks, script, needle=""):
    """(hashLoop samples with a named C++ frame (holding needle) under
    hashLoop, hashLoop samples)."""
    hit = total = 0
    for f, c in stacks:
        x = frame_of(f, "hashLoop", script)
        if x is None:
            continue
        total += c
        below = f[f.index(x) + 1:]
        if any(needle in y and " (" not in y and not y.startswith(("(", "[")) for y in below):
            hit += c
    return hit, total


def enough(result):
    for (major, variant), (script, stacks) in result.items():
        if tier_share(stacks, "hotLoop", script, ())[1] < 40:
            return False
        if variant == "default" and native_under(stacks, script)[1] < 10:
            return False
    return True


def main():
    result = {}
    for variant in VARIANTS:
        # one agent and the four versions under one variant's flags (a dozen
        # busy targets at once would starve the attach on a small host)
        targets = {(m, variant): (m, flags(m, variant)) for m in v8multi.MAJORS}
        result.update(v8multi.profile_targets("tiers.js", targets, enough, label=variant))
    u.check(len(result) == len(v8multi.MAJORS) * len(VARIANTS),
            "profiles of every version and variant (%s)" % sorted(result))

    for (major, variant), (script, stacks) in sorted(result.items()):
        tag = "node %d %s" % (major, variant)
        if variant == "default":
            hit, total = tier_share(stacks, "hotLoop", script, ("_[j]", "_[i]"))
            u.check(total >= 40 and hit >= 0.8 * total,
                    "%s: hotLoop optimized (_[j]/_[i]) in %d of %d samples" % (tag, hit, total))
            hit, total = tier_share(stacks, "mix", script, ("_[i]",))
            u.check(total >= 10 and hit >= 0.8 * total,
                    "%s: mix inlined (_[i]) in %d of %d samples" % (tag, hit, total))
            # the rest of its time is pbkdf2Sync's own JS (checks, buffers)
            hit, total = native_under(stacks, script)
            u.check(total >= 10 and hit >= 0.6 * total,
                    "%s: named C++ frames under hashLoop in %d of %d samples" % (tag, hit, total))
            hit, total = native_under(stacks, script, "PBKDF2")
            u.check(hit >= 0.3 * total,
                    "%s: PBKDF2's C++ frames under hashLoop in %d of %d samples"
                    % (tag, hit, total))
            frames = {x for f, _ in stacks for x in f}
            u.check(any(x.startswith("EVP_") or x.startswith("sha256") for x in frames),
                    "%s: OpenSSL's frames named (%s)"
                    % (tag, sorted(x for x in frames if "::" not in x and " (" not in x)[:12]))
        else:
            want = "_[0]" if variant == "jitless" else "_[1]"
            hit, total = tier_share(stacks, "hotLoop", script, (want,))
            u.check(total >= 40 and hit >= 0.9 * total,
                    "%s: hotLoop %s in %d of %d samples" % (tag, want, hit, total))
        # a JS frame's text stays "name (script:line)" before its suffix
        bad = [x for f, _ in stacks for x in f
               if x.startswith(("hotLoop (", "mix (", "hashLoop (")) and
               not v8cases.js_frame(x).endswith(")")]
        u.check(not bad, "%s: JS frames read name (script:line)[suffix] (%s)" % (tag, bad[:3]))
    u.finish()


main()
