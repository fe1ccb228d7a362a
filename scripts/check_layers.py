#!/usr/bin/env python3
"""Check the layers of the engine and of the Python client (docs/engine.md).

C: every ``#include "..."`` of extension/ that names a file of the project
is an arrow from the including file's folder to the included file's folder.
An arrow may only run down the layer diagram or stay in its folder:

    corgipile.c (with corgipile.h)                   _PG_init
    nodes/   functions/                              executor nodes; SQL functions
    model/   shuffle/                                model catalog; strategies
    io/                                              rows in: layout, cache, prep
    util/    params/                                 helpers; train()'s arguments
    core/                                            plain C, no postgres.h

Folders on one floor do not include each other (sideways).  Besides:
core/ never includes postgres.h, only corgipile.c includes corgipile.h,
and no two modules (foo.c with foo.h) include each other, however
indirectly (a circle).

Python: the modules of python_client/corgipile, by what every ``import``
statement names (lazy and TYPE_CHECKING imports included: a cycle there is
a cycle of the design).  Floors: the private helpers and the plain lists
(``_*``, errors, strategies) at the bottom, the library (client, statements,
params, ...) above them, the applications (cli, bench, proxy, torch) on top;
an application never imports another one (cli, which registers them all, and
the package face ``__init__`` excepted), and no module circle.

Prints the counts and each offending arrow; exit status 1 if there is any.
Run by tests/run_tests.sh (``make test``).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "extension"                    # --root moves both (the tests'
PKG = ROOT / "python_client" / "corgipile"  # small trees)

# what each folder may include besides itself; "" is extension/ itself
C_ALLOWED = {
    "core": set(),
    "util": {"core"},
    "params": {"core"},
    "io": {"core", "util", "params"},
    "cluster": {"core", "util", "params"},
    "model": {"core", "util", "params", "io", "cluster"},
    "shuffle": {"core", "util", "params", "io", "cluster"},
    "nodes": {"core", "util", "params", "io", "model", "shuffle", "cluster"},
    "functions": {"core", "util", "params", "io", "model", "shuffle", "cluster"},
    "": {"core", "util", "params", "io", "model", "shuffle", "nodes", "functions", "cluster"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def c_files() -> list[Path]:
    return sorted(p for p in EXT.rglob("*") if p.suffix in (".c", ".h"))


def folder(path: Path) -> str:
    rel = path.relative_to(EXT)
    return rel.parts[0] if len(rel.parts) > 1 else ""


def resolve(path: Path, name: str) -> Path | None:
    """The project file an include names, or None for a server header."""
    for base in (path.parent, EXT):
        cand = (base / name).resolve()
        if cand.is_file() and EXT in cand.parents:
            return cand
    return None


def module(path: Path) -> str:
    return str(path.relative_to(EXT).with_suffix(""))


def find_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    nodes = set(edges) | {m for ts in edges.values() for m in ts}

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check_c() -> tuple[int, list[str], list[list[str]]]:
    problems: list[str] = []
    edges: dict[str, set[str]] = defaultdict(set)
    arrows = 0
    for path in c_files():
        src = folder(path)
        text = path.read_text(errors="replace")
        rel = path.relative_to(EXT)
        if src == "core" and re.search(r'^\s*#\s*include\s+[<"]postgres\.h[">]', text, re.M):
            problems.append(f"{rel}: core/ includes postgres.h")
        for name in INCLUDE.findall(text):
            target = resolve(path, name)
            if target is None:
                continue
            arrows += 1
            dst = folder(target)
            trel = target.relative_to(EXT)
            if module(target) != module(path):
                edges[module(path)].add(module(target))
            if str(trel) == "corgipile.h" and str(rel) != "corgipile.c":
                problems.append(f'{rel}: includes "corgipile.h" (only corgipile.c does)')
            elif dst != src and dst not in C_ALLOWED[src]:
                problems.append(f'{rel}: includes "{name}" ({src or "extension"}/ -> {dst or "extension"}/)')
    return arrows, problems, find_circles(edges)


# -- Python ------------------------------------------------------------------

PY_BASE = {"errors", "strategies"}          # and every private _module

# Circles known and not yet cut, each with the work that cuts it: reported,
# not failed on.  Keep this empty; an entry needs a reason.
KNOWN_CIRCLES: set[tuple[str, str]] = set()
PY_APPS = ("cli", "__main__", "bench", "proxy", "torch")


def py_modules() -> dict[str, Path]:
    mods = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(["corgipile", *parts])] = p
    return mods


def py_floor(mod: str) -> tuple[int, str]:
    """(floor, application) of a module: 0 base, 1 library, 2 application."""
    parts = mod.split(".")
    if len(parts) == 1:
        return 2, "__init__"             # the package face: imports the library
    top = parts[1]
    for app in PY_APPS:
        if top == app or top.startswith(app + "_"):
            return 2, app
    if top in PY_BASE or top.startswith("_"):
        return 0, ""
    return 1, ""


def py_imports(mod: str, path: Path, mods: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # "from x import y": y may be a submodule of x
            names = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in mods else stem
                     for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name.startswith("corgipile") and name in mods and name != mod:
                out.add(name)
    return out


def check_python() -> tuple[int, list[str], list[list[str]]]:
    mods = py_modules()
    problems: list[str] = []
    edges: dict[str, set[str]] = defaultdict(set)
    arrows = 0
    for mod, path in mods.items():
        floor, app = py_floor(mod)
        for dst in sorted(py_imports(mod, path, mods)):
            arrows += 1
            edges[mod].add(dst)
            dfloor, dapp = py_floor(dst)
            if dfloor > floor:
                problems.append(f"{mod} imports {dst} (up: floor {floor} -> {dfloor})")
            elif (floor == 2 and dfloor == 2 and app != dapp
                  and app not in ("cli", "__main__", "__init__")):
                problems.append(f"{mod} imports {dst} (sideways: {app} -> {dapp})")
    return arrows, problems, find_circles(edges)


def main(argv: list[str] | None = None) -> int:
    global EXT, PKG
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="a checkout other than this one")
    args = ap.parse_args(argv)
    if args.root is not None:
        EXT = args.root.resolve() / "extension"
        PKG = args.root.resolve() / "python_client" / "corgipile"
    bad = 0
    for label, (arrows, problems, circles) in (("C (extension/)", check_c()),
                                               ("Python (corgipile)", check_python())):
        known = [c for c in circles if tuple(c) in KNOWN_CIRCLES]
        circles = [c for c in circles if tuple(c) not in KNOWN_CIRCLES]
        print(f"{label}: {arrows} arrows between project files; "
              f"arrows up: {len(problems)}, circles: {len(circles)}"
              + (f" (and {len(known)} known, not yet cut)" if known else ""))
        for p in problems:
            print(f"  {p}")
        for c in circles:
            print(f"  circle: {' <-> '.join(c)}")
        for c in known:
            print(f"  known circle, not yet cut: {' <-> '.join(c)}")
        bad += len(problems) + len(circles)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
