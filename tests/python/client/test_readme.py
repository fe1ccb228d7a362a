"""The README's examples and the client README's, run as printed, with their
printed output compared to what the code does now (the proxy example has
its own test, test_proxy_readme.py).

- README.md's Quick start: its SQL block, in one psql session (as a user
  pasting it), in a fresh database of the test cluster; the lines of `-- ` comments
  right after a statement are its printed output, compared with psql's,
  seconds aside. The NOTICE example of `corgipile.train` is the Quick start
  training's, and the `corgipile.evaluate` example scores its model.
- README.md's two plans ("The plan"): each EXPLAIN as printed, on the Quick
  start's table; the plan's shape (operators, property names) and every
  value that does not depend on the machine (all but times, none printed).
- README.md's Python client section: the Python block after the Quick
  start, the command-line block in a fresh database with a points.csv of
  the Quick start's rows.
- docs/preprocessing.md's model row: its SQL in a fresh database, the
  stored `preprocess` compared with the JSON printed under it.
- Every path of the repository a document names in backquotes exists.
- python_client/README.md: the first session and the sections that go on
  from it, in one namespace, against an empty database with the extension;
  a `print(...)` whose line ends in a comment prints that comment (`...`
  matches anything, as doctest's ELLIPSIS). Its command-line block of
  "Start here" as the README's.

What the test changes in the printed text, and why: the client README's
estimators name a database (`"dbname=ml"`), which becomes the test's.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import doctest
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tokenize
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from client_helpers import CLIENT, ROOT
from doc_examples import PSQL, Block, normalized, section_blocks

README = ROOT / "README.md"
CLIENT_README = CLIENT / "README.md"

# psql's settings the printed plans were taken with (a cluster of
# scripts/pgcluster.sh has them; pinned so that a server tuned otherwise
# prints the same plan)
SETTINGS = "-c maintenance_work_mem=64MB -c effective_io_concurrency=1"


@contextlib.contextmanager
def fresh_database(extension: bool) -> Iterator[str]:
    """A new database of the test cluster (from template0: nothing
    installed), dropped afterwards; yields its name."""
    name = f"readme_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(
            sql.Identifier(name)))
    try:
        if extension:
            with psycopg.connect(dbname=name, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION corgipile")
        yield name
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def psql(database: str, statements: list[str]) -> list[tuple[str, str]]:
    """Runs the statements in one psql session (setseed() holds for the
    session), as a user pasting them would; (stdout, stderr) of each, told
    apart by markers psql prints between them."""
    marker = f"@@{uuid.uuid4().hex}"
    script = "".join(f"\\echo {marker}\n\\warn {marker}\n{s}\n" for s in statements)
    env = {**os.environ, "PGDATABASE": database, "PSQLRC": "/dev/null", "PGOPTIONS": SETTINGS}
    r = subprocess.run([str(PSQL), "-X", "-v", "ON_ERROR_STOP=1"], input=script, env=env,
                       capture_output=True, text=True, timeout=300)
    outs = r.stdout.split(marker + "\n")[1:]
    errs = r.stderr.split(marker + "\n")[1:]
    assert r.returncode == 0, (f"the README's\n{statements[len(outs) - 1]}\nfails today:\n"
                               f"{errs[-1] if errs else r.stderr}")
    return list(zip(outs, errs, strict=True))


def sql_steps(block: Block) -> list[tuple[str, list[str]]]:
    """The statements of a SQL block with their printed output: the `-- `
    comment lines right after the line that ends a statement."""
    steps: list[tuple[str, list[str]]] = []
    statement: list[str] = []
    output_of_last = False
    for line in block.text.splitlines():
        if output_of_last and line.startswith("--"):
            steps[-1][1].append(line[3:])
            continue
        output_of_last = False
        if not line.strip() or (line.startswith("--") and not statement):
            continue
        statement.append(line)
        if re.sub(r"--.*$", "", line).rstrip().endswith(";"):
            steps.append(("\n".join(statement), []))
            statement, output_of_last = [], True
    assert not statement, f"README.md:{block.line}: a statement without its ';'"
    return steps


def run_sql_block(block: Block, database: str) -> dict[str, tuple[str, str]]:
    """Runs the block's statements in one session; where the block prints
    a statement's output, compares. Returns each statement's (stdout,
    stderr)."""
    steps = sql_steps(block)
    runs = dict(zip([s for s, _ in steps], psql(database, [s for s, _ in steps]), strict=True))
    for statement, printed in steps:
        if printed:
            out = runs[statement][0]
            assert normalized(out.splitlines()) == normalized(printed), (
                f"README.md:{block.line}: the output of\n{statement}\nno longer holds; "
                f"today it is:\n{out}")
    return runs


@pytest.fixture(scope="module")
def quick_start() -> Iterator[tuple[str, dict[str, tuple[str, str]]]]:
    """The Quick start run in a fresh database: (database, each statement's
    psql run)."""
    (block,) = section_blocks(README, "Quick start", "sql")
    assert block.text.startswith("CREATE EXTENSION corgipile;")
    with fresh_database(extension=False) as database:
        yield database, run_sql_block(block, database)


def test_quick_start_runs_as_printed(quick_start):
    _, runs = quick_start
    trainings = [s for s in runs if "corgipile.train(" in s]
    assert len(trainings) == 2
    # the figures printed are compared: a training that ends otherwise fails
    svm, logistic = (runs[s][0] for s in trainings)
    assert "(7 rows)" in svm and "(4 rows)" in logistic


def test_train_notice_example_is_the_quick_starts(quick_start):
    _, runs = quick_start
    (block,) = [b for b in section_blocks(README, "`corgipile.train`")
                if b.text.startswith("NOTICE:")]
    (svm,) = [r for s, r in runs.items() if "'svm'" in s and "corgipile.train(" in s]
    notices = normalized(svm[1].splitlines())
    for line in normalized(block.text.splitlines()):
        assert line in notices, f"README.md:{block.line}: {line!r} not in\n{svm[1]}"


def test_evaluate_example_runs_as_printed(quick_start):
    database, _ = quick_start
    (block,) = section_blocks(README, "`corgipile.evaluate`", "sql")
    assert "(9 rows)" in run_sql_block(block, database)[sql_steps(block)[0][0]][0]


def plan_shape(lines: list[str]) -> list[tuple[int, str]]:
    """(indent, operator or 'Property: value') of each line of a plan; the
    times of an EXPLAIN ANALYZE left out (none are printed)."""
    shape = []
    for line in lines:
        text = re.sub(r"actual time=\S+ ", "actual ", line.rstrip())
        shape.append((len(text) - len(text.lstrip()), text.strip()))
    # psql prints the plan one space in
    return [(indent - shape[0][0], text) for indent, text in shape]


def plan_names(shape: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The shape without the properties' values: operators and names."""
    return [(i, t if t.startswith(("Custom Scan", "->")) else t.split(":")[0]) for i, t in shape]


def test_plans_have_the_printed_shape(quick_start):
    database, _ = quick_start
    blocks = section_blocks(README, "The plan")
    assert len(blocks) == 2
    with psycopg.connect(dbname=database, autocommit=True, options=SETTINGS) as conn:
        conn.execute("SET corgipile.progress = off")
        for block in blocks:
            statement, *printed = block.text.rstrip("\n").splitlines()
            assert statement.startswith("EXPLAIN (") and statement.endswith(";")
            got = [r[0] for r in conn.execute(statement)]
            expected, actual = plan_shape(printed), plan_shape(got)
            assert plan_names(actual) == plan_names(expected), (
                f"README.md:{block.line}: the plan's operators or properties changed; "
                "today:\n" + "\n".join(got))
            assert actual == expected, (
                f"README.md:{block.line}: the plan's values changed; today:\n" + "\n".join(got))


def test_readme_python_client_example(quick_start, monkeypatch):
    database, _ = quick_start
    monkeypatch.setenv("PGDATABASE", database)
    (block,) = section_blocks(README, "Python client", "python")
    namespace: dict = {}
    run_python([block], namespace)
    namespace["client"].close()


def cli(args: list[str], database: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert args[0] == "corgipile", args
    env = {**os.environ, "PGDATABASE": database, "PYTHONPATH": str(CLIENT), "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "corgipile", *args[1:]], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{shlex.join(args)} fails today:\n{r.stdout}\n{r.stderr}"
    return r


def write_points_csv(path: Path) -> None:
    """points.csv: the Quick start's 10,000 points with the label y, as
    columns x1, x2, stored clustered by label."""
    with fresh_database(extension=False) as database:
        (block,) = section_blocks(README, "Quick start", "sql")
        setseed, create = [s for s, _ in sql_steps(block)
                           if s.startswith(("SELECT setseed", "CREATE TABLE"))]
        with psycopg.connect(dbname=database, autocommit=True) as conn:
            conn.execute(setseed)
            conn.execute(create)
            rows = conn.execute("SELECT features[1], features[2], label FROM points "
                                "ORDER BY id").fetchall()
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x1", "x2", "y"])
        w.writerows(rows)


@pytest.mark.parametrize("readme,heading", [(README, "Python client"),
                                            (CLIENT_README, "Already running PostgreSQL? "
                                                            "Start here")])
def test_command_line_examples(readme, heading, tmp_path):
    (block,) = [b for b in section_blocks(readme, heading, "sh") if "corgipile load" in b.text]
    commands = [shlex.split(line.split("  #")[0]) for line in block.text.splitlines()
                if line.startswith("corgipile ")]
    assert commands, block.text
    write_points_csv(tmp_path / "points.csv")
    with fresh_database(extension=True) as database:
        outputs = [cli(c, database, tmp_path).stdout for c in commands]
    # the loader prints the train command that fits the label
    load = next(o for c, o in zip(commands, outputs, strict=True) if c[1] == "load")
    assert "corgipile train points" in load, load


def comments(source: str) -> dict[int, str]:
    """Line number -> the comment that ends the line."""
    return {tok.start[0]: tok.string[1:].strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT}


def run_python(blocks: list[Block], namespace: dict) -> None:
    """Runs the blocks statement by statement in one namespace; a print()
    whose line ends in a comment must print that comment."""
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for block in blocks:
        tree = ast.parse(block.text)
        notes = comments(block.text)
        for stmt in tree.body:
            out = io.StringIO()
            code = compile(ast.Module([stmt], []), f"{block.heading}:{block.line}", "exec")
            with contextlib.redirect_stdout(out):
                exec(code, namespace)  # the README's own code
            is_print = (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                        and getattr(stmt.value.func, "id", None) == "print")
            expected = notes.get(stmt.end_lineno)
            if is_print and expected is not None:
                assert checker.check_output(expected + "\n", out.getvalue(), flags), (
                    f"{block.heading} (line {block.line + stmt.lineno}): "
                    f"{ast.get_source_segment(block.text, stmt)} prints\n{out.getvalue()}"
                    f"where the README says\n{expected}")


CLIENT_SECTIONS = ["A first session", "Training from Python", "Predictions and metrics",
                   "Models", "scikit-learn estimators", "Loading data at COPY speed"]


def test_client_readme_runs_as_printed(monkeypatch):
    blocks = [b for heading in CLIENT_SECTIONS
              for b in section_blocks(CLIENT_README, heading, "python")]
    for b in blocks:
        b.text = b.text.replace('"dbname=ml"', "None")  # None: the PG* variables
    with fresh_database(extension=True) as database:
        monkeypatch.setenv("PGDATABASE", database)
        namespace: dict = {}
        run_python(blocks, namespace)
        for name in ("client", "other"):
            namespace[name].close()


def test_preprocessing_doc_model_row():
    doc = ROOT / "docs" / "preprocessing.md"
    (sql_block,) = section_blocks(doc, "What the model row stores", "sql")
    (printed,) = section_blocks(doc, "What the model row stores", "json")
    with fresh_database(extension=True) as database:
        with psycopg.connect(dbname=database, autocommit=True) as conn:
            conn.execute("SET corgipile.progress = off")
            statements = [s for s, _ in sql_steps(sql_block)]
            for statement in statements[:-1]:
                conn.execute(statement)
            (text,) = conn.execute(statements[-1]).fetchone()
    assert json.loads(text) == json.loads(printed.text), (
        f"docs/preprocessing.md:{printed.line}: the model row stores today\n{text}")


# a path of the repository in backquotes: `extension/...`, `scripts/x.py`, ...
PATH = re.compile(r"`((?:extension|scripts|docs|tests|sql|python_client|benchmarks|examples|"
                  r"docker)/[A-Za-z0-9_./-]*)(?:::[\w\[\]-]+)?`")


def test_documents_name_paths_that_exist():
    docs = [README, CLIENT_README, *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    for doc in docs:
        for m in PATH.finditer(doc.read_text()):
            path = m.group(1).rstrip("/.")
            # NAME, N, ...: a pattern, not a file; a unit test's binary is
            # built from its .c
            if re.search(r"\b[A-Z]{1,4}\b", path) or "*" in path:
                continue
            if not any((ROOT / (path + ext)).exists() for ext in ("", ".c")):
                missing.append(f"{doc.relative_to(ROOT)}: {m.group(1)}")
    assert not missing, "documents name files that do not exist:\n" + "\n".join(missing)
