"""Tables, prose and plots from committed GPU results, and the README's GPU section written from them.

    python benchmarks/gpu/report.py [RESULTS.json ...] [--readme README.md] [--plots]

With no file, every ``results/*.json`` that is not a first or dry run.  ``--readme`` rewrites the part of
the README between ``<!-- gpu-table -->`` and ``<!-- /gpu-table -->`` (``tests/test_gpu_benchmark.py`` fails
when it is stale): per results file its provenance and table, then the summary in words.  It never holds a
number that is not in a results file: every ratio and range is computed here from them.

What each configuration reports, and in which words:

* **the derived pick**: the tiles ``nc.derive(f, sizes=..., hardware=)`` returns (``"pick": "derived"``), the
  library's result, with its time, its prediction and its ratios to torch's paths;
* **the best of k (autotuned)**: the fastest of the k tile assignments timed (the derived pick and the next
  fastest by the model): a choice the measurement made, not the model, shown beside the derived pick;
* **provenance**: the commit measured, the driver and the clocks, or ``not recorded`` where a results file
  does not hold them (files written before ``run.py`` recorded them: ``relabel.py``); and **stale** when a
  commit after the one measured changed :data:`STALE_PATHS` (codegen but its Triton worker, the plan, the time
  model), computed from git history (:func:`staleness`), until the configuration is measured again.

A range ``a-b`` is the least and the largest value, each to two decimals as the table prints them (:func:`span`):
its ends are cells of the tables.

>>> span([1.2747, 1.448, 1.3])
'1.27-1.45'
>>> span([0.98])
'0.98'
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
BEGIN, END = "<!-- gpu-table -->", "<!-- /gpu-table -->"
#: recorded trees resolved by hand: ``{tree: {"commit", "why"}}`` (a run whose copy held files git did not ignore)
TREES = HERE / "trees.json"
#: the results files' format this report reads (``run.py`` writes it; ``relabel.py`` brought the older files to it)
SCHEMA = 2
#: the paths whose change makes a measurement stale: the printers, the plan the kernels are printed from, and the
#: time model (its rules, the tile search by predicted time, the GPU models and their divisors)
STALE_PATHS = ("napkin_cat/codegen", "napkin_cat/plan", "napkin_cat/hardware/predict.py",
               "napkin_cat/hardware/timed.py", "napkin_cat/hardware/model.py", "napkin_cat/hardware/models",
               "napkin_cat/hardware/divisors.py")
#: paths under :data:`STALE_PATHS` that change no measurement: the Triton worker runs a printed kernel only under the
#: interpreter and compiles one for a report, off the device (on a GPU ``measure.triton_kernel`` imports the printed
#: module and launches its ``nc_run`` itself)
NOT_STALE = ("napkin_cat/codegen/triton/worker.py",)
#: the pathspecs of :data:`STALE_PATHS` less :data:`NOT_STALE`, as git reads them
STALE_SPECS = STALE_PATHS + tuple(f":(exclude){p}" for p in NOT_STALE)
#: a prediction "misses" when it is off the measured time by more than this fraction
MISS = 0.25
NOT_RECORDED = "not recorded"


# ------------------------------------------------------------------------------------------------ reading results
def load(path) -> dict:
    """A results file, refused unless it is in the :data:`SCHEMA` this report reads."""
    r = json.loads(Path(path).read_text())
    if r.get("schema") != SCHEMA:
        raise SystemExit(f"{path}: results schema {r.get('schema', 1)}, this report reads schema {SCHEMA}: bring it "
                         "up to date with python benchmarks/gpu/relabel.py")
    return r


def derived(row) -> dict:
    """The candidate ``nc.derive(hardware=)`` returned (exactly one per row)."""
    (c,) = [c for c in row["candidates"] if c["pick"] == "derived"]
    return c


def whole(row) -> list[dict]:
    """The candidates that time the row's whole work (a ``"sweep:backward"`` candidate times one pass of it)."""
    return [c for c in row["candidates"] if c["pick"] != "sweep:backward"]


def best_of_k(row) -> dict | None:
    """The fastest timed candidate (autotuning over the k timed); None if none was timed."""
    timed = [c for c in whole(row) if c.get("time_s")]
    return min(timed, key=lambda c: c["time_s"]) if timed else None


def flash(row):
    """torch's flash backend (FlashAttention-2) on the same inputs, if it ran and was timed."""
    for b in row.get("baselines", ()):
        if b["path"].startswith("sdpa flash") and "expanded" not in b["path"] and b.get("time_s"):
            return b
    return None


def ratio(base, ours) -> float | None:
    """How many times as fast ``ours`` is as ``base`` (base's time over ours), or None if either is untimed."""
    if not base or not ours or not base.get("time_s") or not ours.get("time_s"):
        return None
    return base["time_s"] / ours["time_s"]


def accuracy(c) -> float | None:
    """The prediction from the run's measured ceilings over the measured time."""
    pred = c.get("predicted_measured_ceilings_s")
    return pred / c["time_s"] if pred and c.get("time_s") else None


# ------------------------------------------------------------------------------------------------ provenance
def _git(*args, env=None, stdin=None) -> str | None:
    try:
        run = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60,
                             input=stdin, env={**os.environ, **env} if env else None)
    except (OSError, subprocess.SubprocessError):
        return None
    return run.stdout.strip() if run.returncode == 0 else None


def measured_commit(result) -> tuple[str | None, bool]:
    """``(commit, recorded)``: the commit the run recorded, else the one that committed its results file (the tree
    measured is at most that one: the measurement cannot have included a later commit)."""
    p = result["provenance"]
    if not str(p.get("commit", "")).startswith(NOT_RECORDED):
        return tree_commit(p.get("tree"), p["commit"]) or p["commit"], True
    return p.get("committed_in"), False


def staleness(result) -> dict:
    """``{"stale": bool | None, "first": (sha, date) | None}``: whether a commit not in the measured tree (in
    ``measured..HEAD``) changed :data:`STALE_PATHS` (less :data:`NOT_STALE`), and the earliest such by commit date (a
    later commit does not change which, so the README's mark stays put); ``itself``:
    whether that commit changes them too (for a file whose measured commit was not recorded, the commit that added
    it may hold changes made after the measurement).  ``stale`` is None where git cannot tell (no repository, or
    the commit is not in this clone's history)."""
    commit, _ = measured_commit(result)
    if not commit or _git("cat-file", "-e", f"{commit}^{{commit}}") is None:
        return {"stale": None, "first": None, "itself": None}
    log = _git("log", "--format=%ct %H %cs", f"{commit}..HEAD", "--", *STALE_SPECS)
    if log is None:
        return {"stale": None, "first": None, "itself": None}
    first = min((line.split() for line in log.splitlines()), key=lambda f: (int(f[0]), f[1]), default=None)
    # the full sha cut to 7: git's own abbreviation grows with the clone's object count (7 here, 8 in CI)
    first = (first[0], first[1][:7], first[2]) if first else None
    itself = _git("diff-tree", "--no-commit-id", "--name-only", "-r", commit, "--", *STALE_SPECS)
    return {"stale": bool(log), "first": tuple(first[1:]) if first else None, "itself": bool(itself)}


def tree_commit(tree, base: str | None = None) -> str | None:
    """The commit in this clone's history whose files are the git tree ``tree`` (the run's ``provenance.tree``: the
    files measured), or None (not recorded, or no such commit).  ``base``: the commit the run's git metadata named;
    a run recorded before ``measure.working_tree`` added new files wrote the tree of ``base``'s paths only (``git add
    -u`` over ``base``'s index), so a commit after ``base`` whose files on those paths give ``tree`` is the one
    measured (:func:`tree_on_paths`).  A tree that is neither, explained by hand, is in :data:`TREES` (the commit, and
    why its files and the tree differ)."""
    if not tree or str(tree).startswith(NOT_RECORDED):
        return None
    log = _git("log", "--all", "--format=%H %T") or ""
    exact = next((c for c, t in (line.split() for line in log.splitlines()) if t == tree), None)
    if exact:
        return exact
    known = json.loads(TREES.read_text()).get(str(tree)) if TREES.exists() else None
    if known and _git("cat-file", "-e", f"{known['commit']}^{{commit}}") is not None:
        return _git("rev-parse", known["commit"])
    if not base or _git("cat-file", "-e", f"{base}^{{commit}}") is None:
        return None
    later = (_git("rev-list", "--all", f"^{base}") or "").split()
    return next((c for c in later if tree_on_paths(base, c) == tree), None)


def tree_on_paths(base: str, commit: str) -> str | None:
    """The git tree of ``commit``'s files on the paths ``base`` tracks (a path ``commit`` lacks left out): what
    ``git add -u`` over ``base``'s index writes from ``commit``'s working tree (kept per repository and pair: both
    commits' files never change)."""
    key = (str(ROOT), _git("rev-parse", base), _git("rev-parse", commit))
    if key not in _ON_PATHS:
        _ON_PATHS[key] = _tree_on_paths(base, commit)
    return _ON_PATHS[key]


_ON_PATHS: dict = {}


def _tree_on_paths(base: str, commit: str) -> str | None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        paths = set((_git("ls-tree", "-r", "--name-only", base) or "").splitlines())
        entries = [line for line in (_git("ls-tree", "-r", commit) or "").splitlines()
                   if line.split("\t", 1)[1] in paths]
        if _git("read-tree", "--empty", env=env) is None or \
                _git("update-index", "--index-info", env=env, stdin="\n".join(entries) + "\n") is None:
            return None
        return _git("write-tree", env=env)


def header(path, result) -> str:
    """The line above a file's table: device, date, model, versions, ceilings, commit, driver, clocks, staleness."""
    p, v, c = result["provenance"], result["versions"], result["ceilings"]
    commit, recorded = measured_commit(result)
    s = staleness(result)
    tree = tree_commit(p.get("tree"), p.get("commit"))
    if recorded and tree and p.get("dirty") is True:
        by_hand = str(p.get("tree")) in (json.loads(TREES.read_text()) if TREES.exists() else {})
        at = (f"commit `{p['commit'][:7]}`'s metadata, the files of commit `{tree[:7]}` "
              + ("(and files git did not ignore there: `benchmarks/gpu/trees.json`)" if by_hand else
                 "(their git tree)"))
    elif recorded:
        at = f"commit `{commit[:7]}`" + (" with uncommitted changes" if p.get("dirty") is True else "")
    else:
        at = f"commit {NOT_RECORDED} (results committed in `{str(commit)[:7]}`"
        at += (", which also changes codegen, the plan or the time model: before or after the measurement is "
               f"{NOT_RECORDED})" if s["itself"] else ")")
    clocks = p.get("clocks")
    clocks = (f"SM {clocks.get('clocks.sm')}/{clocks.get('clocks.max.sm')} MHz, memory {clocks.get('clocks.mem')}/"
              f"{clocks.get('clocks.max.mem')} MHz" if isinstance(clocks, dict) else NOT_RECORDED)
    if s["stale"]:
        state = (f" **Stale**: commits the tree measured did not hold change codegen, the plan or the time model "
                 f"(the earliest: `{s['first'][0]}`, {s['first'][1]}); not re-measured since.")
    elif s["stale"] is None:
        state = " Staleness unknown (no git history here)."
    else:
        state = ""
    rel = Path(path).resolve().relative_to(ROOT)
    return (f"**{result['device']}**, {result['date']} (model `{result['model']}`; {at}; driver "
            f"{_short(p.get('driver'))}; clocks {clocks}; torch {v['torch']}, Triton {v['triton']}, CUDA "
            f"{v.get('cuda', NOT_RECORDED)}; measured ceilings: copy {c['hbm'] / 1e12:.2f} TB/s, bf16 matmul "
            f"{c['tensor:bf16'] / 1e12:.0f} TFLOP/s; times: {_timing(result)}), from [`{rel}`]({rel}).{state}")


def _short(field) -> str:
    return NOT_RECORDED if field is None or str(field).startswith(NOT_RECORDED) else str(field)


def _timing(result) -> str:
    spreads = [s for row in result["rows"] for c in row.get("candidates", ())      # a pass's own, on a training row
               for s in (c.get("spread"), *(c.get(p, {}).get("spread") for p in ("forward", "backward")))]
    recorded = any(isinstance(s, dict) for s in spreads)
    return "median, 10th-90th percentile in brackets" if recorded else f"medians, their spread {NOT_RECORDED}"


# ------------------------------------------------------------------------------------------------ the table
def label(row) -> str:
    if row["kind"] == "matmul":
        return f"matmul {row['a']}×{row['b']}×{row['c']}"
    if row["kind"] == "flce":
        return f"fused linear cross-entropy n={row['n']} e={row['e']} v={row['v']}, forward+backward"
    heads = f"{row['heads']}/{row['kv_heads']}" if row["kind"] == "gqa" else str(row["heads"])
    step = ", forward+backward" if row.get("pass") == "forward+backward" else ""
    return f"{row['kind']} N={row['N']} d={row['d']} B={row['batch']} H={heads}{step}"


def _ms(c) -> str:
    if not c or not c.get("time_s"):
        return (c or {}).get("gate", "—")
    s = c.get("spread")
    around = f" [{s['p10'] * 1e3:.3f}-{s['p90'] * 1e3:.3f}]" if isinstance(s, dict) else ""
    return f"{c['time_s'] * 1e3:.3f}{around}"


def _x(v) -> str:
    return f"{v:.2f}×" if v else "—"


def _tiles(c) -> str:
    return ", ".join(f"{k}={v}" for k, v in c["tiles"].items())


COLUMNS = ("configuration", "derived pick: tiles", "ms", "TFLOP/s", "vs sdpa flash", "vs torch fastest",
           "predicted ms (datasheet / measured ceilings)", "predicted / measured", "best of k (autotuned): tiles",
           "ms", "vs sdpa flash", "predicted / measured", "torch fastest path", "ms", "error (derived)")
ALIGN = ("---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---", "---:", "---:", "---:", "---", "---:",
         "---:")


def table(result) -> str:
    """A markdown table: per configuration the derived pick, the best of the k timed (autotuned), torch."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join(ALIGN) + " |"]
    for row in result["rows"]:
        if "failed" in row:
            lines.append(f"| {label(row)} | failed: {row['failed'][:80]} |" + " |" * (len(COLUMNS) - 2))
            continue
        c, best, f, fastest = derived(row), best_of_k(row), flash(row), row.get("baseline")
        if "failed" in c:           # the derived pick could not be printed or run; torch's paths still were
            cells = [label(row), f"failed: {c['failed'][:120]}", *[""] * 10, (fastest or {}).get("path", "—"),
                     _ms(fastest), "—"]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        k = len(whole(row))
        reference = row["kind"] == "cuda"
        acc = "— (reference backend)" if reference else (f"{accuracy(c):.2f}" if accuracy(c) else "—")
        pred = f"{c['predicted_s'] * 1e3:.3f} / " + (f"{c['predicted_measured_ceilings_s'] * 1e3:.3f}"
                                                      if c.get("predicted_measured_ceilings_s") else "—")
        if k == 1:
            autotuned = ["— (k = 1: only the derived pick timed)", "", "", ""]
        elif best is None:
            autotuned = [f"k = {k}: none timed", "", "", ""]
        elif best is c:
            autotuned = [f"k = {k}: the derived pick", "", "", ""]
        else:
            autotuned = [f"k = {k}: {_tiles(best)}", _ms(best), _x(ratio(f, best)),
                         f"{accuracy(best):.2f}" if accuracy(best) else "—"]
        cells = [label(row), _tiles(c), _ms(c), f"{c['tflops']:.0f}" if c.get("tflops") else "—", _x(ratio(f, c)),
                 _x(ratio(fastest, c)), pred, acc, *autotuned, (fastest or {}).get("path", "—"), _ms(fastest),
                 f"{c['error']:.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the words
def span(values) -> str:
    """``lo-hi``: the least and the largest of ``values`` to two decimals (one number if they print alike)."""
    lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
    return lo if lo == hi else f"{lo}-{hi}"


GROUPS = (("attention", "attention"), ("gqa", "grouped-query attention"), ("causal", "causal attention"))


def current(results) -> list[tuple]:
    """``[(result, row)]`` the words read: per configuration (device and :func:`label`) measured in a results file
    that is not stale, that measurement alone (the first such file's, in path order: a later phase of one run, such
    as a sweep, times the same pick again); a configuration measured only in stale files, each of them, as before.
    Rows that failed as a whole are left out."""
    stale = [staleness(r)["stale"] for _, r in results]        # once per file: git answers it
    rows = [(r, row, old) for (_, r), old in zip(results, stale) for row in r["rows"] if "failed" not in row]
    fresh, out = {}, []
    for r, row, stale in rows:
        if not stale:
            fresh.setdefault((r["device"], label(row)), (r, row))
    for r, row, stale in rows:
        key = (r["device"], label(row))
        if key not in fresh:
            out.append((r, row))
        elif fresh[key] == (r, row):
            out.append((r, row))
    return out


def summary(results) -> str:
    """The README's words under the tables, every number computed from ``results`` (``[(path, result)]``)."""
    rows = current(results)
    out = ["Against torch's FlashAttention-2 backend (`sdpa flash`, the same inputs in the same process), as "
           "many times as fast (flash's time over ours):", ""]
    for kind, words in GROUPS:
        for d in sorted({row["d"] for _, row in rows if row["kind"] == kind}):
            group = [(r, row) for r, row in rows if row["kind"] == kind and row["d"] == d and flash(row)]
            if not group:
                continue
            devices = ", ".join(dict.fromkeys(r["device"] for r, _ in group))
            line = (f"- {words}, d = {d} ({len(group)} configurations; {devices}): the derived pick "
                    f"**{span([ratio(flash(row), derived(row)) for _, row in group])}×**")
            ks = {len(whole(row)) for _, row in group}
            if ks == {1}:
                line += " (only the derived pick timed)"
            else:
                line += (f"; the best of {'/'.join(map(str, sorted(ks)))} tile choices (autotuned, not what "
                         f"derive returns) {span([ratio(flash(row), best_of_k(row)) for _, row in group])}×")
            out.append(line)
    attn = [(r, row) for r, row in rows if row["kind"] in ("attention", "gqa", "causal") and row.get("baseline")]
    if attn:
        paths = [row["baseline"]["path"].split(",")[0] for _, row in attn]
        common = max(set(paths), key=paths.count)
        out += ["", f"torch's fastest path ({common} in {paths.count(common)} of {len(attn)} attention "
                    f"configurations) is {span([1 / ratio(row['baseline'], derived(row)) for _, row in attn])}× "
                    "as fast as the derived pick."]
    mm = [row for _, row in rows if row["kind"] == "matmul" and row.get("baseline")]
    if mm:
        out[-1] += (f" The products: the derived pick at {span([ratio(row['baseline'], derived(row)) for row in mm])}"
                    "× cuBLAS's speed.")
    out += training_step(rows)
    misses = [(r, row) for r, row in rows if row["kind"] != "cuda" and accuracy(derived(row))
              and abs(accuracy(derived(row)) - 1) > MISS]
    judged = [row for _, row in rows if row["kind"] != "cuda" and accuracy(derived(row))]
    where = "; ".join(f"{label(row)} on the {r['device']} ({accuracy(derived(row)):.2f})" for r, row in misses)
    out += ["", f"The time model (with the run's measured ceilings) predicts the derived pick within {MISS:.0%} "
                f"in {len(judged) - len(misses)} of {len(judged)} configurations"
                + (f"; it misses {where}." if misses else ".")]
    stale = [p for p, r in results if staleness(r)["stale"]]
    if stale:
        out += ["", f"{len(stale)} of {len(results)} results files predate later changes to codegen, the plan or "
                    "the time model (marked **stale** above): their numbers describe the code as it was then. The "
                    "words above read each configuration's measurement in a file that is not stale where one is "
                    "(one per device), else its stale ones."]
    return "\n".join(out)


def baseline_named(row, prefix: str):
    """The timed baseline whose path starts with ``prefix`` (e.g. ``"flex_attention"``, ``"liger"``), or None."""
    return next((b for b in row.get("baselines", ()) if b["path"].startswith(prefix) and b.get("time_s")), None)


#: the training step's groups: (kinds, words, the baseline each is judged against: None for torch's fastest path)
STEP_GROUPS = ((("backward",), "dense attention forward+backward", None),
               (("window", "prefix-lm", "document", "alibi", "softcap"), "masked attention forward+backward",
                "flex_attention"),
               (("decode",), "decoding at q = 1", None), (("flce",), "fused linear cross-entropy", "liger"))


def training_step(rows) -> list[str]:
    """The README's words on the training step's rows (issue 36): per group the derived pick against its baseline
    (as many times as fast: the baseline's time over ours), the rows whose derived pick failed, and peak memory
    where it was recorded.  Only rows of the groups of :data:`STEP_GROUPS` are read."""
    out = []
    for kinds, words, against in STEP_GROUPS:
        group = [row for _, row in rows if row["kind"] in kinds and row.get("candidates")]
        if not group:
            continue
        judged = [(row, base, derived(row)) for row in group
                  for base in [baseline_named(row, against) if against else row.get("baseline")] if base]
        timed = [(row, base, c) for row, base, c in judged if c.get("time_s")]
        named = ", ".join(dict.fromkeys(base["path"].split(",")[0] for _, base, _ in judged)) or "none timed"
        line = f"- {words} ({len(group)} configuration{'s' * (len(group) > 1)}; against {named}):"
        if timed:
            each = "; ".join(f"{row['kind']} N={row['N']} d={row['d']}: {ratio(base, c):.2f}×" if "N" in row
                             else f"{ratio(base, c):.2f}×" for row, base, c in timed)
            line += f" the derived pick **{span([ratio(base, c) for _, base, c in timed])}×** ({each})"
        failed = [row for row in group if "failed" in derived(row)]
        if failed:
            line += (f"; the derived pick failed in {len(failed)} ("
                     + "; ".join(f"{label(row)}: {derived(row)['failed'].split(':')[0]}" for row in failed) + ")")
        memory = [(row, base, c) for row, base, c in judged if c.get("peak_bytes") and base.get("peak_bytes")]
        if memory:
            line += "; peak memory " + "; ".join(f"{c['peak_bytes'] / 2 ** 30:.1f} GiB against "
                                                 f"{base['peak_bytes'] / 2 ** 30:.1f} GiB" for _, base, c in memory)
        out.append(line + ".")
    return (["", "The training step (forward+backward; decoding), as many times as fast as the baseline named:", "",
             *out] if out else [])


# ------------------------------------------------------------------------------------------------ the plot
def plot(result, path):
    """Left: TFLOP/s of the derived pick, the best of k, torch per attention size; right: predicted vs measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    kinds = [r.get("kind") for r in result["rows"]]
    kind = next((k for k in ("attention", "causal", "backward") if k in kinds), "causal")
    for d, colour in ((64, "tab:blue"), (128, "tab:red"), (16, "tab:blue")):
        rows = [r for r in result["rows"] if r.get("kind") == kind and r.get("d") == d and "failed" not in r]
        if not rows:
            continue
        ns = [r["N"] for r in rows]

        def rate(c, row):       # nan where nothing was timed (a gap in the line, not a zero)
            return row["flops"] / c["time_s"] / 1e12 if c and c.get("time_s") else float("nan")
        a.plot(ns, [rate(derived(r), r) for r in rows], "o-", color=colour, label=f"derived pick, d={d}")
        if any(len(whole(r)) > 1 for r in rows):
            a.plot(ns, [rate(best_of_k(r), r) for r in rows], "o:", color=colour, alpha=0.5,
                   label=f"best of k (autotuned), d={d}")
        a.plot(ns, [rate(r.get("baseline"), r) for r in rows], "s--", color=colour, alpha=0.6,
               label=f"torch fastest path, d={d}")
        a.plot(ns, [rate(flash(r), r) for r in rows], "^-.", color=colour, alpha=0.4, label=f"torch sdpa flash, d={d}")
        pred = [r["flops"] / p / 1e12 if p else float("nan")      # nan: a derived pick that failed has no plan
                for r in rows
                for p in [derived(r).get("predicted_measured_ceilings_s") or derived(r).get("predicted_s")]]
        a.plot(ns, pred, ":", color=colour, alpha=0.6, label=f"model, derived pick (measured ceilings), d={d}")
    a.set_xscale("log", base=2)
    a.set_xlabel("sequence length N")
    a.set_ylabel("TFLOP/s")
    step = {"attention": "attention forward", "causal": "causal attention forward",
            "backward": "attention forward+backward"}[kind]
    a.set_title(f"{step}, bf16 — {result['device']}")
    a.legend(fontsize=7)
    pts = [(c["predicted_s"], c["time_s"], c.get("predicted_measured_ceilings_s")) for r in result["rows"]
           if "failed" not in r and r["kind"] != "cuda" for c in [derived(r)] if c.get("time_s")]
    if pts:
        lo, hi = min(min(p[:2]) for p in pts) / 1.5, max(max(p[:2]) for p in pts) * 1.5
        b.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        b.fill_between([lo, hi], [lo / (1 + MISS), hi / (1 + MISS)], [lo * (1 + MISS), hi * (1 + MISS)], color="0.9",
                       label=f"±{MISS:.0%}")
        b.loglog([p[1] for p in pts], [p[0] for p in pts], "o", label="datasheet rates")
        b.loglog([p[1] for p in pts if p[2]], [p[2] for p in pts if p[2]], "x", label="measured ceilings")
        b.set_xlabel("measured s")
        b.set_ylabel("predicted s")
        b.legend(fontsize=7)
    b.set_title("time model: predicted against measured (derived picks)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ the README
def result_files() -> list[Path]:
    """The results the README shows: every file but the first run's (superseded) and dry runs."""
    return sorted(p for p in (HERE / "results").glob("*.json") if "run1" not in p.stem and "dry" not in p.stem)


def section(paths) -> str:
    """The README's section: per results file its header and table, then :func:`summary`."""
    results = [(p, load(p)) for p in paths]
    out = []
    for p, r in results:
        out += [header(p, r), "", table(r), ""]
    out.append(summary(results))
    return "\n".join(out).rstrip() + "\n"


def readme_with(text: str, paths) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"the README has no {BEGIN} … {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{section(paths)}{END}{tail}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="*")
    ap.add_argument("--readme", help="rewrite this README's GPU section")
    ap.add_argument("--plots", action="store_true", help="redraw each results file's .png beside it")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.results] or result_files()
    if args.plots:
        for p in paths:
            plot(load(p), p.with_suffix(".png"))
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(readme_with(readme.read_text(), paths))
    else:
        print(section(paths))


if __name__ == "__main__":
    main()
