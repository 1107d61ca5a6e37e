"""Corpus: TypeScript's compiler (tsc 5.9 from the npm registry, installed
by scripts/install-deps.sh) type-checks and emits a small generated
project with strict checks, under the agent as shipped (Node.js in its
default v8 mode).

A user looks for: every sample under `node` with a `nodejs: ...tsc` appid;
TypeScript's checker (checkSourceFile, checkExpression...) in the stacks;
the share of samples whose JavaScript frames are all named.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpusutil as cu  # noqa: E402
from corpusutil import u  # noqa: E402

# lib/tsc.js, as `npx tsc` ends up running it: a .js entry point is what
# gives a Node process an appid (gProfiler's rule)
TSC = "/opt/polyprof-test/corpus/typescript/node_modules/typescript/lib/tsc.js"
NODE = shutil.which("node") or "/usr/bin/node"
# measured on the 2-core machine (docs/fidelity.md): 97-100 % when the nodejs plugin is not busy with other Node processes
FLOOR = 0.60
N = 160  # modules: a few seconds of CPU, mostly in the checker

cu.need(TSC, "TypeScript's tsc")
cu.need(NODE, "node")


def make_project(d):
    os.makedirs(os.path.join(d, "src"))
    with open(os.path.join(d, "tsconfig.json"), "w") as f:
        f.write('{"compilerOptions": {"target": "es2020", "module": "commonjs", "strict": true, '
                '"declaration": true, "outDir": "out"}, "include": ["src"]}\n')
    for i in range(N):
        with open(os.path.join(d, "src", "m%d.ts" % i), "w") as f:
            f.write("""
import {{ Store{p} }} from "./m{p}";
export interface Item{i}<T> {{ id: number; value: T; tags: string[] }}
export class Store{i}<T extends {{ toString(): string }}> {{
  private items = new Map<number, Item{i}<T>>();
  add(v: T, ...tags: string[]): Item{i}<T> {{
    const it = {{ id: this.items.size, value: v, tags }};
    this.items.set(it.id, it);
    return it;
  }}
  find(p: (it: Item{i}<T>) => boolean): Item{i}<T>[] {{ return [...this.items.values()].filter(p); }}
  render(): string {{
    return this.find(() => true).map(it => `${{it.id}}:${{it.value.toString()}}[${{it.tags.join(",")}}]`).join("\\n");
  }}
}}
export type Mapped{i}<T> = {{ readonly [K in keyof T]: T[K] extends Function ? never : T[K] }};
export type Deep{i}<T> = T extends object ? {{ [K in keyof T]: Deep{i}<T[K]> }} : T;
export function run{i}(n: number): string {{
  const s = new Store{i}<number>();
  for (let k = 0; k < n; k++) s.add(k, "a", "b");
  const other: Store{p}<string> = new Store{p}<string>();
  other.add("x");
  return s.render() + other.render();
}}
""".format(i=i, p=(i + 1) % N))


with cu.Run("tsc") as run:
    proj = os.path.join(run.tmp, "project")
    make_project(proj)
    rc = run.run([NODE, TSC, "-p", proj])
    u.check(rc == 0, "tsc compiled the project (exit %d)" % rc)
    u.check(os.path.exists(os.path.join(proj, "out", "m0.js")), "tsc wrote out/m0.js")
lines = run.lines()
mine = [ln for ln in lines if ln.appid and ln.appid.startswith("nodejs: ") and "tsc.js" in ln.appid]
print("appids: %s" % sorted({ln.appid for ln in mine}))
cu.dump_top(mine)
cu.check_attribution(run, mine, "tsc")
u.check(all(ln.comm == "node" for ln in mine), "tsc: every sample under comm node")
checker = [ln for ln in mine if any(f.startswith("check") and "checker.ts" in f or "_tsc.js" in f and
                                    f.startswith("check") for f in ln.frames)]
u.check(checker, "tsc: TypeScript's checker (check* functions) in %d samples" % cu.total(checker))
cu.check_marked(lines, lambda f: "_tsc.js" in f, lambda c: c == "node",
                lambda a: bool(a) and a.startswith("nodejs: ") and "tsc" in a, "tsc")
cu.check_no_pid_comm(lines, lambda f: "_tsc.js" in f or f.endswith("/node)") or "v8::" in f, "tsc")
cu.report("tsc", "nodejs", mine, FLOOR)
u.finish()
