"""A seed gives bit-identical weights, whatever the engine's code layout.

A digest of the weights is pinned for every strategy, dense and sparse,
single and double buffered.  A change to any strategy's row order, to the
generators' seeding or to the arithmetic changes a digest: if that change is
deliberate, say so and re-pin with CORGIPILE_PIN_PRINT=1.

The digests are facts of x86-64: doubles computed in SSE2 registers, each
multiplication and addition rounded on its own.  The Makefile builds with
-ffp-contract=off, so that no compiler fuses a multiplication and an
addition into one FMA on a machine that has it (GCC's default there), and
another architecture computes the same operations; a digest that differs
there is that platform's fact to look into (its libm's exp and log, which
the logistic and softmax losses call), not one to re-pin here.
"""

from __future__ import annotations

import hashlib
import os
import struct

import numpy as np
import pytest
from psycopg import sql

from corgipile.strategies import ALL as STRATEGIES
from datagen import linear_task, load_table, weights

# (strategy, layout, double_buffer) -> sha256 of the weights as float8s,
# (the first 16 hex digits)
PINNED: dict[tuple[str, str, bool], str] = {
    ('corgipile', 'dense', True): '49403ede1735b6f3',
    ('corgipile', 'dense', False): '49403ede1735b6f3',
    ('corgipile', 'sparse', True): '2b27e277af66ef2e',
    ('corgipile', 'sparse', False): '2b27e277af66ef2e',
    ('block_only', 'dense', True): '02b1f89fdfa93805',
    ('block_only', 'dense', False): '02b1f89fdfa93805',
    ('block_only', 'sparse', True): '83d14be18f57204e',
    ('block_only', 'sparse', False): '83d14be18f57204e',
    ('no_shuffle', 'dense', True): '35c54b0c50bf84df',
    ('no_shuffle', 'dense', False): '35c54b0c50bf84df',
    ('no_shuffle', 'sparse', True): 'f1b9753f16b386e4',
    ('no_shuffle', 'sparse', False): 'f1b9753f16b386e4',
    ('sliding_window', 'dense', True): '56f794a3cade0f2c',
    ('sliding_window', 'dense', False): '56f794a3cade0f2c',
    ('sliding_window', 'sparse', True): '8f9eaddb2fc76630',
    ('sliding_window', 'sparse', False): '8f9eaddb2fc76630',
    ('mrs', 'dense', True): '894a28b6264c53e5',
    ('mrs', 'dense', False): '894a28b6264c53e5',
    ('mrs', 'sparse', True): '4ab72c8e01de4b1e',
    ('mrs', 'sparse', False): '4ab72c8e01de4b1e',
    ('shuffle_once', 'dense', True): 'e9bdd238c93b6dd3',
    ('shuffle_once', 'dense', False): 'e9bdd238c93b6dd3',
    ('shuffle_once', 'sparse', True): '8e34b129f7fc7444',
    ('shuffle_once', 'sparse', False): '8e34b129f7fc7444',
    ('epoch_shuffle', 'dense', True): '62e8e09719967d1d',
    ('epoch_shuffle', 'dense', False): '62e8e09719967d1d',
    ('epoch_shuffle', 'sparse', True): 'cc8b3e72d1bd2ec4',
    ('epoch_shuffle', 'sparse', False): 'cc8b3e72d1bd2ec4',
    ('grab', 'dense', True): 'bd8782647e14a197',
    ('grab', 'dense', False): 'bd8782647e14a197',
    ('grab', 'sparse', True): '5be0080c4219ec58',
    ('grab', 'sparse', False): '5be0080c4219ec58',
    ('corgipile', 'softmax', True): 'c3df87ad0458c88b',
    ('sliding_window', 'softmax', True): '432d8316f0487221',
    ('epoch_shuffle', 'softmax', True): '98f8a76cf85e447e',
    # the same trainings with the default schedule (averaged, l2 = 1/rows from
    # epoch 2: train()'s defaults)
    ('corgipile', 'softmax_average', True): '3efec726ad80168f',
    ('sliding_window', 'softmax_average', True): 'c9515481bd06a44f',
    ('epoch_shuffle', 'softmax_average', True): '7baf7bdf4461e496',
}




@pytest.fixture
def data(conn):
    x, y = linear_task(3000, 6, seed=21)
    load_table(conn, "pin_dense", x, y, order="label")
    rng = np.random.default_rng(5)
    conn.execute("CREATE TABLE pin_sparse (id int, label int, idx int[], vals float8[])")
    with conn.cursor().copy("COPY pin_sparse FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "int4[]", "float8[]"])
        for i in np.argsort(y, kind="stable"):
            nnz = int(rng.integers(1, 5))
            idx = sorted(rng.choice(40, size=nnz, replace=False).tolist())
            copy.write_row((int(i), int(y[i]), [j + 1 for j in idx],
                            [float(v) for v in rng.uniform(-1, 1, nnz)]))
    conn.execute("ANALYZE pin_sparse")
    conn.execute("SET corgipile.progress = off")
    return conn


def digest(ws: list[float]) -> str:
    return hashlib.sha256(b"".join(struct.pack("<d", w) for w in ws)).hexdigest()[:16]


@pytest.mark.parametrize("double_buffer", [True, False])
@pytest.mark.parametrize("layout", ["dense", "sparse"])
@pytest.mark.parametrize("shuffle", STRATEGIES)
def test_seed_pins_the_weights(data, shuffle, layout, double_buffer):
    conn = data
    name = f"pin_{shuffle}_{layout}_{int(double_buffer)}"
    common = sql.SQL("max_epoch_num => 3, seed => 17, learning_rate => 0.05, "
                     "block_size => '2', buffer_size => '8', "
                     "double_buffer => {}, shuffle => {}, model_name => {}").format(
        sql.Literal(double_buffer), sql.Literal(shuffle), sql.Literal(name))
    if layout == "dense":
        q = sql.SQL("SELECT count(*) FROM corgipile.train('pin_dense', 'logistic', "
                    "standardize => 'off', {})").format(common)
    else:
        q = sql.SQL("SELECT count(*) FROM corgipile.train('pin_sparse', 'svm', "
                    "standardize => 'off', features => 'vals', "
                    "feature_indices => 'idx', {})").format(common)
    conn.execute(q)
    got = digest(weights(conn, name))
    if os.environ.get("CORGIPILE_PIN_PRINT"):
        print(f"\nPIN {(shuffle, layout, double_buffer)!r}: {got!r},")
    assert PINNED.get((shuffle, layout, double_buffer)) == got


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("shuffle", ["corgipile", "sliding_window", "epoch_shuffle"])
def test_seed_pins_softmax_weights(data, shuffle, average):
    """learning_rate left to its default: average => false is 0.3.0's
    default arithmetic, bit for bit; true (the default since 0.4.0) the
    averaged model."""
    conn = data
    # the SGD arithmetic is pinned: without the polish that follows it
    conn.execute("SET corgipile.polish = off")
    conn.execute("CREATE TABLE pin_multi AS SELECT id, (id % 3) AS label, features FROM pin_dense")
    name = f"pin_softmax_{shuffle}"
    kind = "softmax_average" if average else "softmax"
    conn.execute("SELECT count(*) FROM corgipile.train('pin_multi', 'softmax', standardize => 'off', model_name => %s, "
                 "max_epoch_num => 2, seed => 3, block_size => '2', buffer_size => '8', "
                 "shuffle => %s, average => %s)", (name, shuffle, average))
    got = digest(weights(conn, name))
    if os.environ.get("CORGIPILE_PIN_PRINT"):
        print(f"\nPIN {(shuffle, kind, True)!r}: {got!r},")
    assert PINNED.get((shuffle, kind, True)) == got
