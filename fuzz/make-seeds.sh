#!/bin/bash
# Fills a fuzzer's corpus directory with seeds taken from real files:
#   make-seeds.sh TARGET OUTDIR [SEED_CODEC_TOOL]
# config: the test configs and the shipped config; col/perfmap/jitdump/codec:
# the committed seeds (a real agent profile, a real JIT map, the start of a
# real jitdump and a hand-made one); maps: real
# /proc/PID/maps; kallsyms: the start of the real /proc/kallsyms; elf: a
# small program compiled here (with .symtab), real shared objects;
# nettrace: the recorded .NET 10 stream of the unit tests; pe_r2r: the
# committed framework images and small ones of the installed runtime; debug_frame:
# sections of programs compiled here; unwind: samples of a program compiled
# here (seed_unwind.c) with its unwind sections, and real objects' sections
# under a synthetic stack (seed_unwind_synth.py); appid/container: this host's
# command lines and cgroup files; the rest: committed seeds (what real
# runtimes sent, captured with capture-seeds.py, or the documented forms).
set -euo pipefail
t="$1" out="$2" codec_tool="${3:-}"
src="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out"
copy_dir() { [ -d "$1" ] && cp -n "$1"/* "$out"/ 2>/dev/null || true; }
copy_dir "$src/fuzz/seeds/$t"
case "$t" in
  config)
    cp -n "$src"/tests/data/config/*.yaml "$out"/
    cp -n "$src/config/polyprof.yaml" "$out/shipped.yaml"
    ;;
  maps)
    cat /proc/self/maps >"$out/self.maps"
    cat /proc/1/maps >"$out/init.maps" 2>/dev/null || true
    ;;
  kallsyms)
    head -c 65536 /proc/kallsyms >"$out/kallsyms-head"
    grep '\[' /proc/kallsyms | head -n 200 >"$out/kallsyms-modules" || true
    ;;
  elf)
    tmp="$(mktemp -d)"
    printf 'int helper(int x){return x*3;}\nint main(int c,char**v){(void)v;return helper(c);}\n' >"$tmp/t.c"
    cc -O1 -g0 -o "$out/tiny-symtab" "$tmp/t.c"
    cc -O1 -g0 -shared -fPIC -Wl,--build-id -o "$out/tiny-shared.so" "$tmp/t.c"
    # a Go >= 1.18 build-info section (magic, pointer size, flags=2, the
    # version as a varint-prefixed string at 32), so the fuzzer starts inside
    # the Go version reader
    printf '%s\n' '__attribute__((used, section(".go.buildinfo"))) static const char bi[48] =' \
      '  "\xff Go buildinf:\x08\x02" "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0" "\x08go1.21.0";' \
      'int main(void){return 0;}' >"$tmp/go.c"
    cc -O1 -o "$out/go-buildinfo" "$tmp/go.c"
    rm -rf "$tmp"
    for so in /usr/lib/x86_64-linux-gnu/libdl.so.2 /usr/lib/x86_64-linux-gnu/libutil.so.1; do
      [ -f "$so" ] && cp -n "$so" "$out/" || true
    done
    ;;
  pe_r2r)
    # real ReadyToRun images of the installed runtime, if there is one:
    # small ones with generic instantiations (instance entry points)
    for f in /usr/share/dotnet/shared/Microsoft.NETCore.App/*/System.ObjectModel.dll \
      /usr/share/dotnet/shared/Microsoft.NETCore.App/*/System.Net.ServerSentEvents.dll; do
      [ -f "$f" ] && cp -n "$f" "$out/" || true
    done
    ;;
  nettrace)
    # a stream recorded from a real .NET 10 process (SampleProfiler, JIT events)
    cp -n "$src"/tests/data/dotnet/*.nettrace "$out"/
    ;;
  debug_frame)
    # .debug_frame of programs built without unwind tables, as the perf
    # plugin meets them, from gcc and clang at several levels
    tmp="$(mktemp -d)"
    printf '%s\n' 'int helper(int x){return x*3;}' 'static int rec(int n){return n<=1?1:n*rec(n-1);}' \
      'int main(int c,char**v){(void)v;return helper(c)+rec(c);}' >"$tmp/t.c"
    for cc in "cc -O0" "cc -O2" "clang -O1" "clang -O2 -gdwarf-4"; do
      name="$(echo "$cc" | tr -c 'a-zA-Z0-9\n' -)"
      $cc -g -fno-asynchronous-unwind-tables -o "$tmp/t" "$tmp/t.c" 2>/dev/null &&
        objcopy --dump-section .debug_frame="$out/$name.debug_frame" "$tmp/t" || true
    done
    rm -rf "$tmp"
    ;;
  unwind)
    # a real sample (registers, stack) of a small program with its own
    # unwind sections, from gcc and clang with and without frame pointers
    # and unwind tables (then .debug_frame only)
    tmp="$(mktemp -d)"
    for cc in "cc -O0" "cc -O2 -fomit-frame-pointer" "clang -O1" \
      "cc -O2 -fno-asynchronous-unwind-tables" "clang -O2 -gdwarf-4 -fno-asynchronous-unwind-tables"; do
      name="$(echo "$cc" | tr -c 'a-zA-Z0-9\n' -)"
      $cc -g -I"$src/fuzz" -o "$tmp/s" "$src/fuzz/seed_unwind.c" 2>/dev/null &&
        "$tmp/s" "$out/$name.unwind" || true
    done
    rm -rf "$tmp"
    # real objects' tables (small enough for the input cap) under a
    # synthetic stack of their own function addresses
    for obj in /bin/true /usr/bin/env /usr/lib/x86_64-linux-gnu/libdl.so.2; do
      [ -f "$obj" ] && python3 "$src/fuzz/seed_unwind_synth.py" "$obj" "$out/$(basename "$obj").unwind" || true
    done
    ;;
  appid)
    # real command lines of this host's processes (the committed seeds
    # hold the forms the rules know, and uwsgi ini files)
    n=0
    for c in /proc/[0-9]*/cmdline; do
      cat "$c" >"$out/host-$n.cmdline" 2>/dev/null || true
      [ -s "$out/host-$n.cmdline" ] && n=$((n + 1))
      [ $n -ge 64 ] && break
    done
    rm -f "$out/host-$n.cmdline"
    ;;
  container)
    # real cgroup files (the committed seeds hold the runtimes' cgroup path
    # forms and container API replies)
    cat /proc/self/cgroup >"$out/self.cgroup"
    cat /proc/1/cgroup >"$out/init.cgroup" 2>/dev/null || true
    ;;
  codec)
    if [ -n "$codec_tool" ]; then "$codec_tool" "$out" "$src"/fuzz/seeds/col/* >/dev/null; fi
    ;;
esac
[ -n "$(ls -A "$out")" ] || { echo "make-seeds: no seeds for $t" >&2; exit 1; }
