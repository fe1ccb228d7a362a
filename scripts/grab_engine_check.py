#!/usr/bin/env python3
"""shuffle => 'grab' in the engine against the simulation, on the same tables.

The engine's grab and scripts/grab_simulation.py's can disagree on how much
better than corgipile grab is; this script puts both on the same rows so
that the two can be compared directly:

  part A  engine (shuffle_once, corgipile, grab) and the simulation
          (corgipile, grab with the buffer kept in order or shuffled) on
          (1) the simulation's table: 100k rows x 20, two overlapping
              Gaussian classes, stored sorted by label;
          (2) the table of the first engine measurement: 50k rows x 20
              uniform in [-1, 1], label = sign(x1 + 0.5 x2 - x3 + 0.05 noise),
              sorted by label: nearly separable, |w*| is about 55.
          The simulation uses the engine's own blocks (each row's heap page,
          from its ctid), blocks per buffer and cut into buffers.
  part B  the buffer choice in the engine (corgipile.grab_buffer = kept or
          shuffled) against corgipile, by rows per block (block_size 1, 3, 6
          and 27 pages of the Gaussian table: about 37, 110, 220 and 1,000 rows).
  part C  the buffer choice by step size: Fashion-MNIST binary and 10-class
          (as the GraB study loads them) at rates 0.03-0.001 and a decaying
          rate, and the Gaussian table at 0.3 and 0.1; kept, shuffled and the
          engine's rule (auto), with the rule's value from params.
  part D  Fashion-MNIST 10-class at rate 0.01, corgipile and grab, seeds 1-10:
          how far apart seeds end.

Constant learning rates 0.01 and 0.001 (decay 1), 10 epochs, batch size 1,
l2 = 0, seeds 1-3; f(w) - f* of the final weights (f* by Newton's method).
Writes docs/grab-engine-check.md.

Usage: PG_CONFIG=... scripts/grab_engine_check.py [--dsn DSN] [--quick] [--parts A,B,C] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import grab_simulation as gs  # noqa: E402


def uniform_table(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + seed)
    x = rng.uniform(-1, 1, size=(n, d))
    y = np.where(x[:, 0] + 0.5 * x[:, 1] - x[:, 2] + 0.05 * rng.normal(size=n) > 0, 1.0, -1.0)
    o = np.argsort(y, kind="stable")
    return np.ascontiguousarray(x[o]), np.ascontiguousarray(y[o])


def load(conn: psycopg.Connection, name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """COPY the rows in their order; return each row's heap page."""
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} (id int, label int, features float8[])")
    with conn.cursor().copy(f"COPY {name} (id, label, features) FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8[]"])
        for i in range(len(y)):
            cp.write_row((i, int(y[i]), x[i].tolist()))
    conn.execute(f"VACUUM ANALYZE {name}")
    page = np.zeros(len(y), dtype=np.int64)
    for i, p in conn.execute(f"SELECT id, (ctid::text::point)[0]::int FROM {name}"):
        page[i] = p
    return page


def engine(conn, table, shuffle, lr, seed, epochs, block=None, buffer_mode="auto",
           model="logistic", l2=0.0, decay=1.0):
    name = "gec_model"
    conn.execute(psycopg.sql.SQL("SET corgipile.grab_buffer = {}").format(psycopg.sql.Literal(buffer_mode)))
    conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models m "
                 "WHERE m.model_name = %s", (name,))
    hist = conn.execute(
        "SELECT seconds FROM corgipile.train(%s::regclass, %s, model_name => %s, "
        "shuffle => %s, seed => %s, learning_rate => %s, decay => %s, max_epoch_num => %s, "
        "block_size => %s, l2 => %s, standardize => 'off', buffer_size => '10%%')",
        (table, model, name, shuffle, seed, lr, decay, epochs, block, l2)).fetchall()
    w, params = conn.execute("SELECT weights, params FROM corgipile.models "
                             "WHERE model_name = %s", (name,)).fetchone()
    conn.execute("SELECT corgipile.drop_model(%s)", (name,))
    conn.execute("RESET corgipile.grab_buffer")
    return np.array(w), params, [h[0] for h in hist]


def simulate(lib, x, y, fstar, row_block, n_blocks, bpb, method, lr, seed, epochs):
    """The simulation's loop (grab_simulation.run) over the engine's blocks."""
    n, d = x.shape
    rng = np.random.default_rng(seed)
    w = np.zeros(d + 1)
    rows_in = [np.flatnonzero(row_block == b) for b in range(n_blocks)]
    grab = method.startswith("grab")
    shuffle_buffer = method in ("corgipile", "grab shuffled")
    acc = gs.Acc(lib, n_blocks, d + 1) if grab else None
    seq = rng.permutation(n_blocks).astype(np.uint32)
    for _ in range(epochs):
        if grab:
            lib.sim_reset(acc.h)
        else:
            seq = rng.permutation(n_blocks).astype(np.uint32)
        for group in gs.buffers(seq, bpb):
            rows = np.concatenate([rows_in[b] for b in group]).astype(np.int64)
            if shuffle_buffer:
                rng.shuffle(rows)
            lib.sim_train(acc.h if grab else None, gs.ptr(w), d, gs.ptr(x), gs.ptr(y),
                          gs.ptr(rows), len(rows), lr, gs.ptr(row_block))
        if grab:
            _, seq = acc.walk(seq)
    if acc:
        acc.close()
    return gs.loss(x, y, w) - fstar


def fmt(v: float) -> str:
    return f"{v:.2e}"


def step_settings(quick: bool) -> list[dict]:
    """Part C's tables: Fashion-MNIST as scripts/convergence_study.py --grab
    loads it (8,000 images sorted by label, l2 = 0.001), and the Gaussian
    table at rates above 0.01."""
    from studies import runner as cs

    args = argparse.Namespace(grab_datasets=["fashion-binary", "fashion-10"],
                              train_rows=1000 if quick else 8000,
                              test_rows=300 if quick else 2000,
                              synthetic_rows=20_000 if quick else 100_000)
    out = []
    for name, ds in cs.grab_data(args).items():
        # a rate, or (rate, decay per epoch)
        rates = [0.01, 0.001] if quick else (
            [0.03, 0.01, 0.003, 0.001] if name == "fashion-binary"
            else [0.01, 0.003, 0.001, (0.01, 0.8)])
        blocks = ["1"]
        out.append({"name": name, "ds": ds, "rates": rates, "blocks": blocks,
                    "solve": lambda ds=ds: cs.exact_minimum(ds)["fstar"],
                    "f": cs.ds_f(ds)})
    return out


def part_c(conn, seeds, epochs, quick, n_gauss) -> list[str]:
    """The buffer choice against the step size: kept order and a shuffled
    buffer against corgipile where one step moves the model far (Fashion-MNIST
    rows have |x|^2 ~ 130; the Gaussian table ~ 24 at rates up to 0.1)."""
    from studies import runner as cs

    P = ["", "## C. Buffer kept or shuffled, by step size (engine)", "",
         "Fashion-MNIST as `scripts/convergence_study.py --grab` loads it (8,000 images "
         "sorted by label, logistic for binary and softmax for 10 classes, l2 = 0.001) and "
         "the Gaussian table (l2 = 0) at larger rates; `corgipile.grab_buffer` forces kept or "
         "shuffled, *auto* is the engine's rule (rows per block, and from epoch 2 the step "
         "rule: corgipile's epoch above 0.2). "
         "Final gap over corgipile's with the same block size (< 1 is better); "
         "‖x‖² is the rows' mean squared norm as trained (standardize off), "
         "*step* = rate × mean ‖x‖², *block* = step × rows per block; ‖x̄_b‖² is the rows' "
         "mean of the squared norm of their block's mean row, *coherent* = rate × ‖x̄_b‖².", "",
         "| table | block_size | rows per block | GraB unit (blocks) | rate | step | block | "
         "coherent | rule's value (kept run, last epoch) | corgipile | "
         "grab kept | grab shuffled | kept / corgipile | shuffled / corgipile | "
         "auto: epochs kept | auto / corgipile |",
         "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    sets = step_settings(quick)
    gauss_rates = [0.1] if quick else [0.3, 0.1]
    for s in seeds:
        x, y = gs.make_table(n_gauss, 20, s)
        fstar, _ = gs.solve_fstar(x, y)
        sets.append({"name": f"Gaussian seed {s}", "seed_only": s, "x": x, "y": y,
                     "rates": gauss_rates, "blocks": ["1"], "fstar": fstar,
                     "f": (lambda w, x=x, y=y: gs.loss(x, y, w))})
    for st in sets:
        if "ds" in st:
            ds = st["ds"]
            x, y, model, l2 = ds["x"], ds["y"], ds["model"], ds["l2"]
            fstar = st["solve"]()
            f = lambda w, st=st: st["f"](w)[0]  # noqa: E731
            cs.grab_copy(conn, "gec_t", x, y, ds["feature_type"])
            run_seeds = seeds
            label = st["name"]
        else:
            x, y, model, l2, fstar, f = st["x"], st["y"], "logistic", 0.0, st["fstar"], st["f"]
            load(conn, "gec_t", x, y)
            run_seeds = [st["seed_only"]]
            label = "Gaussian"
        sq = float(np.mean(np.sum(x * x, axis=1)))
        for b in st["blocks"]:
            for rate in st["rates"]:
                lr, decay = rate if isinstance(rate, tuple) else (rate, 1.0)
                key = (label, b, rate)
                r = RESULTS_C.setdefault(key, {"sq": sq})
                r["bm"] = block_mean_sq(conn, "gec_t", x, int(b))
                for s in run_seeds:
                    for sh, mode in (("corgipile", "auto"), ("grab", "kept"),
                                     ("grab", "shuffled"), ("grab", "auto")):
                        w, params, _ = engine(conn, "gec_t", sh, lr, s, epochs, block=b,
                                              buffer_mode=mode, model=model, l2=l2,
                                              decay=decay)
                        k = sh if sh == "corgipile" else f"grab {mode}"
                        r.setdefault(k, []).append(f(np.array(w, dtype=float)) - fstar)
                        if k == "grab auto":
                            r["auto"] = params["grab_buffer_shuffle"]
                            r["auto_kept"] = params.get("grab_epochs_kept")
                        if k == "grab kept":
                            r.setdefault("step", []).append(float(params.get("grab_step", "nan")))
                            r["unit"] = params.get("grab_unit_blocks")
                    r["rows"] = len(y) / params["n_blocks"]
                    print(f"C {label} block {b} lr={lr} seed={s}: " + ", ".join(
                        f"{k} {v[-1]:.3g}" for k, v in r.items() if isinstance(v, list)),
                        flush=True)
    for (label, b, rate), r in RESULTS_C.items():
        m = {k: float(np.mean(v)) for k, v in r.items() if isinstance(v, list)}
        lr = rate[0] if isinstance(rate, tuple) else rate
        step = lr * r["sq"]
        rtext = f"{rate[0]}, decay {rate[1]}" if isinstance(rate, tuple) else f"{rate}"
        P.append(f"| {label} | {b} | {r['rows']:.1f} | {r['unit']} | {rtext} | {step:.2f} | "
                 f"{step * r['rows']:.1f} | {lr * r['bm']:.3f} | {m['step']:.3f} | "
                 f"{fmt(m['corgipile'])} | {fmt(m['grab kept'])} | "
                 f"{fmt(m['grab shuffled'])} | {m['grab kept'] / m['corgipile']:.2f} | "
                 f"{m['grab shuffled'] / m['corgipile']:.2f} | {r['auto_kept']} of {epochs} | "
                 f"{m['grab auto'] / m['corgipile']:.2f} |")
    return P


RESULTS_C: dict = {}


def part_d(conn, quick) -> list[str]:
    """Fashion-MNIST 10-class at constant rate 0.01 over more seeds: the
    final gap's spread between seeds against the difference of the means."""
    from studies import runner as cs

    args = argparse.Namespace(grab_datasets=["fashion-10"], train_rows=1000 if quick else 8000,
                              test_rows=300 if quick else 2000, synthetic_rows=20_000)
    ds = cs.grab_data(args)["fashion-10"]
    fstar = cs.exact_minimum(ds)["fstar"]
    f = cs.ds_f(ds)
    cs.grab_copy(conn, "gec_t", ds["x"], ds["y"], ds["feature_type"])
    seeds = range(1, 4 if quick else 11)
    gaps: dict = {"corgipile": [], "grab": []}
    for s in seeds:
        for sh in gaps:
            w, _, _ = engine(conn, "gec_t", sh, 0.01, s, 3 if quick else 10, model="softmax",
                             l2=ds["l2"])
            gaps[sh].append(f(np.array(w, dtype=float))[0] - fstar)
        print(f"D seed {s}: corgipile {gaps['corgipile'][-1]:.3g}, grab {gaps['grab'][-1]:.3g}",
              flush=True)
    c, g = np.array(gaps["corgipile"]), np.array(gaps["grab"])
    P = ["", f"## D. Fashion-MNIST 10-class, constant rate 0.01, seeds 1-{len(c)}", "",
         "Softmax, l2 = 0.001, 10 epochs, engine defaults (grab: the rules, auto). Final gap per "
         "seed:", "",
         "| seed | " + " | ".join(str(s) for s in seeds) + " | mean | median |",
         "|---|" + "---:|" * (len(c) + 2)]
    for name, v in (("corgipile", c), ("grab", g)):
        P.append(f"| {name} | " + " | ".join(f"{x:.3f}" for x in v)
                 + f" | {v.mean():.3f} | {np.median(v):.3f} |")
    se = np.hypot(c.std(ddof=1), g.std(ddof=1)) / np.sqrt(len(c))
    P += ["", f"grab / corgipile (means) {g.mean() / c.mean():.2f}; difference of the means "
              f"{g.mean() - c.mean():.3f}, two standard errors {2 * se:.3f}."]
    return P


def block_mean_sq(conn, table, x, pages_per_block) -> float:
    """The rows' mean of |mean row of its block|^2 (blocks of heap pages)."""
    page = np.zeros(len(x), dtype=np.int64)
    for i, p in conn.execute(f"SELECT id, (ctid::text::point)[0]::int FROM {table}"):
        page[i] = p
    blk = page // pages_per_block
    _, inv, cnt = np.unique(blk, return_inverse=True, return_counts=True)
    sums = np.zeros((len(cnt), x.shape[1]))
    np.add.at(sums, inv, x)
    means = sums / cnt[:, None]
    return float(np.sum(cnt * np.sum(means * means, axis=1)) / len(x))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--quick", action="store_true", help="1 seed, 20k/10k rows, 3 epochs")
    ap.add_argument("--out", default=str(ROOT / "docs/grab-engine-check.md"))
    ap.add_argument("--parts", default="A,B,C,D", help="which parts to run (default A,B,C,D)")
    args = ap.parse_args()
    seeds = [1] if args.quick else [1, 2, 3]
    epochs = 3 if args.quick else 10
    n_gauss, n_unif = (20_000, 10_000) if args.quick else (100_000, 50_000)
    rates = (0.01, 0.001)
    t_start = time.monotonic()
    tmp = tempfile.TemporaryDirectory()
    lib = gs.build_library(tmp.name)
    conn = psycopg.connect(args.dsn, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
    conn.execute("SET corgipile.progress = off")
    P = []
    P.append("# GraB in the engine against the simulation")
    P.append("")
    P.append(f"Generated by `scripts/grab_engine_check.py{' --quick' if args.quick else ''}` on "
             f"{dt.date.today().isoformat()}, {gs.machine()}. Logistic, batch size 1, l2 = 0, "
             f"constant rate (decay 1), {epochs} epochs, seeds {seeds}; the final f(w) − f*, "
             "mean over seeds (f* by Newton's method on the same rows). Engine: default sizing "
             "(10% buffer). Simulation: `scripts/grab_simulation.py`'s loop and the C core, "
             "on the engine's blocks (each row's heap page) and buffers.")
    parts = set(args.parts.upper().split(","))
    if "A" in parts:
        P.append("")
        P.append("## A. Same table, engine and simulation")
        P.append("")
        P.append("| table | rate | ‖w*‖ | engine shuffle_once | engine corgipile | engine grab | "
                 "engine grab / corgipile | sim corgipile | sim grab kept | sim grab shuffled | "
                 "sim grab kept / corgipile |")
        P.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, maker, n in (("Gaussian classes, sorted by label", gs.make_table, n_gauss),
                                ("nearly separable (uniform), sorted by label", uniform_table, n_unif)):
            res = {}
            for s in seeds:
                x, y = maker(n, 20, s)
                fstar, wstar = gs.solve_fstar(x, y)
                page = load(conn, "gec_t", x, y)
                for lr in rates:
                    r = res.setdefault(lr, {"wnorm": []})
                    r["wnorm"].append(np.linalg.norm(wstar))
                    for sh in ("shuffle_once", "corgipile", "grab"):
                        w, params, _ = engine(conn, "gec_t", sh, lr, s, epochs)
                        r.setdefault("e " + sh, []).append(gs.loss(x, y, w) - fstar)
                    row_block = (page // params["pages_per_block"]).astype(np.int64)
                    for m in ("corgipile", "grab kept", "grab shuffled"):
                        r.setdefault("s " + m, []).append(simulate(
                            lib, x, y, fstar, row_block, params["n_blocks"],
                            params["blocks_per_buffer"], m, lr, s, epochs))
                    print(f"{label} lr={lr} seed={s}: " +
                          ", ".join(f"{k} {v[-1]:.3g}" for k, v in r.items()), flush=True)
            for lr in rates:
                r = {k: float(np.mean(v)) for k, v in res[lr].items()}
                P.append(f"| {label} | {lr} | {r['wnorm']:.1f} | {fmt(r['e shuffle_once'])} | "
                         f"{fmt(r['e corgipile'])} | {fmt(r['e grab'])} | "
                         f"{r['e grab'] / r['e corgipile']:.2f} | {fmt(r['s corgipile'])} | "
                         f"{fmt(r['s grab kept'])} | {fmt(r['s grab shuffled'])} | "
                         f"{r['s grab kept'] / r['s corgipile']:.2f} |")
    if "B" in parts:
        P.append("")
        P.append("## B. Buffer kept in GraB's order or shuffled, by rows per block (engine)")
        P.append("")
        P.append("Gaussian table sorted by label; `corgipile.grab_buffer` forces the choice; "
                 "ratios are the final gap over corgipile's with the same block size (< 1 is better).")
        P.append("")
        P.append("| block_size (pages) | rows per block | rate | corgipile | grab kept | grab shuffled "
                 "| kept / corgipile | shuffled / corgipile | auto rule picks |")
        P.append("|---|---:|---|---:|---:|---:|---:|---:|---|")
        blocks = ["1", "6"] if args.quick else ["1", "3", "6", "27"]
        res = {}
        for s in seeds:
            x, y = gs.make_table(n_gauss, 20, s)
            fstar, _ = gs.solve_fstar(x, y)
            load(conn, "gec_t", x, y)
            for b in blocks:
                for lr in rates:
                    r = res.setdefault((b, lr), {})
                    for sh, mode in (("corgipile", "auto"), ("grab", "kept"), ("grab", "shuffled"),
                                     ("grab", "auto")):
                        w, params, _ = engine(conn, "gec_t", sh, lr, s, epochs, block=b,
                                              buffer_mode=mode)
                        key = sh if sh == "corgipile" else f"grab {mode}"
                        r.setdefault(key, []).append(gs.loss(x, y, w) - fstar)
                        if key == "grab auto":
                            r["auto"] = params["grab_buffer_shuffle"]
                    r["rows"] = n_gauss / params["n_blocks"]
                    print(f"block {b} lr={lr} seed={s}: " + ", ".join(
                        f"{k} {v[-1]:.3g}" for k, v in r.items() if isinstance(v, list)), flush=True)
        for b in blocks:
            for lr in rates:
                r = res[(b, lr)]
                m = {k: float(np.mean(v)) for k, v in r.items() if isinstance(v, list)}
                P.append(f"| {b} | {r['rows']:.0f} | {lr} | {fmt(m['corgipile'])} | "
                         f"{fmt(m['grab kept'])} | {fmt(m['grab shuffled'])} | "
                         f"{m['grab kept'] / m['corgipile']:.2f} | "
                         f"{m['grab shuffled'] / m['corgipile']:.2f} | "
                         f"{'shuffled' if r['auto'] == 'true' else 'kept'} |")
    if "C" in parts:
        P += part_c(conn, seeds, epochs, args.quick, n_gauss)
    if "D" in parts:
        P += part_d(conn, args.quick)
    P.append("")
    P.append(f"Run time {time.monotonic() - t_start:.0f} s.")
    text = "\n".join(P) + "\n"
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
