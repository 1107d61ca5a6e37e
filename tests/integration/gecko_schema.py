"""The rules of the Firefox Profiler's processed profile format that its
loader relies on, as a checker: `validate(profile)` returns a list of
problems, empty when the profile keeps every rule. Written from the
format's type definitions (tables of parallel columns with a `length`,
indexes into the shared string array and into each other, categories with
subcategories, interval markers with start <= end)."""

COLORS = {"transparent", "purple", "green", "orange", "yellow", "lightblue", "blue", "brown",
          "magenta", "red", "lightred", "darkgray", "grey", "gray", "lightgreen"}

TABLES = {
    "samples": ("stack", "time", "weight"),
    "stackTable": ("frame", "prefix", "category", "subcategory"),
    "frameTable": ("address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
                   "innerWindowID", "implementation", "line", "column"),
    "funcTable": ("name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber",
                  "columnNumber"),
    "resourceTable": ("lib", "name", "host", "type"),
    "nativeSymbols": ("libIndex", "address", "name", "functionSize"),
    "markers": ("data", "name", "startTime", "endTime", "phase", "category"),
}
THREAD_FIELDS = ("name", "processName", "isMainThread", "processType", "pid", "tid",
                 "processStartupTime", "processShutdownTime", "registerTime",
                 "unregisterTime", "pausedRanges")


def _index(v, n, nullable=False):
    if v is None:
        return nullable
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n


def validate(prof):
    errs = []
    meta = prof.get("meta", {})
    for k, t in (("interval", (int, float)), ("startTime", (int, float)), ("version", int),
                 ("preprocessedProfileVersion", int), ("categories", list), ("markerSchema", list)):
        if not isinstance(meta.get(k), t):
            errs.append("meta.%s missing or of the wrong type" % k)
    if errs:
        return errs
    if meta["interval"] <= 0:
        errs.append("meta.interval must be positive")
    cats = meta["categories"]
    for i, c in enumerate(cats):
        if not isinstance(c.get("name"), str) or c.get("color") not in COLORS \
                or not c.get("subcategories") or not all(isinstance(s, str) for s in c["subcategories"]):
            errs.append("category %d malformed: %s" % (i, c))
    schemas = {s.get("name") for s in meta["markerSchema"]}
    strings = prof.get("shared", {}).get("stringArray")
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        return errs + ["shared.stringArray missing or not strings"]
    ns = len(strings)
    for key in ("libs", "threads"):
        if not isinstance(prof.get(key), list):
            errs.append("%s must be a list" % key)
    for ti, t in enumerate(prof.get("threads", [])):
        where = "thread %d" % ti
        for k in THREAD_FIELDS:
            if k not in t:
                errs.append("%s: no %s" % (where, k))
        if not isinstance(t.get("pid"), str):
            errs.append("%s: pid must be a string" % where)
        lens = {}
        for tab, cols in TABLES.items():
            tv = t.get(tab)
            if not isinstance(tv, dict) or not isinstance(tv.get("length"), int):
                errs.append("%s: %s missing or without length" % (where, tab))
                continue
            lens[tab] = tv["length"]
            for c in cols:
                if not isinstance(tv.get(c), list) or len(tv[c]) != tv["length"]:
                    errs.append("%s: %s.%s is not a column of length %d" % (where, tab, c, tv["length"]))
        if errs:
            return errs
        smp, st, ft, fu, mk = (t[k] for k in ("samples", "stackTable", "frameTable", "funcTable", "markers"))
        last = None
        for i in range(lens["samples"]):
            if not _index(smp["stack"][i], lens["stackTable"], nullable=True):
                errs.append("%s: sample %d stack out of range" % (where, i))
            tm = smp["time"][i]
            if not isinstance(tm, (int, float)) or (last is not None and tm < last):
                errs.append("%s: sample %d time not ascending" % (where, i))
            last = tm
            if not isinstance(smp["weight"][i], int) or smp["weight"][i] < 0:
                errs.append("%s: sample %d weight not a count" % (where, i))
        for i in range(lens["stackTable"]):
            pre = st["prefix"][i]
            if pre is not None and not (isinstance(pre, int) and 0 <= pre < i):
                errs.append("%s: stack %d prefix %r not an earlier stack" % (where, i, pre))
            if not _index(st["frame"][i], lens["frameTable"]):
                errs.append("%s: stack %d frame out of range" % (where, i))
            c, s = st["category"][i], st["subcategory"][i]
            if not _index(c, len(cats)) or not _index(s, len(cats[c]["subcategories"])):
                errs.append("%s: stack %d category %r/%r undeclared" % (where, i, c, s))
        for i in range(lens["frameTable"]):
            if not _index(ft["func"][i], lens["funcTable"]):
                errs.append("%s: frame %d func out of range" % (where, i))
            c, s = ft["category"][i], ft["subcategory"][i]
            if not _index(c, len(cats), nullable=True) or (c is not None and not _index(s, len(cats[c]["subcategories"]), nullable=True)):
                errs.append("%s: frame %d category %r/%r undeclared" % (where, i, c, s))
            ln = ft["line"][i]
            if ln is not None and not (isinstance(ln, int) and ln > 0):
                errs.append("%s: frame %d line %r" % (where, i, ln))
        for i in range(lens["funcTable"]):
            if not _index(fu["name"][i], ns):
                errs.append("%s: func %d name not a string index" % (where, i))
            if not _index(fu["fileName"][i], ns, nullable=True):
                errs.append("%s: func %d fileName not a string index" % (where, i))
            if not isinstance(fu["isJS"][i], bool) or not isinstance(fu["relevantForJS"][i], bool):
                errs.append("%s: func %d isJS/relevantForJS not booleans" % (where, i))
            if not (fu["resource"][i] == -1 or _index(fu["resource"][i], lens["resourceTable"])):
                errs.append("%s: func %d resource out of range" % (where, i))
        for i in range(lens["markers"]):
            if not _index(mk["name"][i], ns) or not _index(mk["category"][i], len(cats)):
                errs.append("%s: marker %d name or category out of range" % (where, i))
            if mk["phase"][i] == 1 and not (mk["startTime"][i] <= mk["endTime"][i]):
                errs.append("%s: interval marker %d ends before it starts" % (where, i))
            d = mk["data"][i]
            if d is not None and d.get("type") not in schemas:
                errs.append("%s: marker %d data type %r has no schema" % (where, i, d.get("type")))
    return errs
