// node-postgres through corgipile proxy, as an application sends
// statements: TRAIN BY with its WITH values as $n parameters (node-postgres
// sends every query with values as Parse/Bind/Execute, the values as text),
// once unnamed and once as a named prepared statement, then PREDICT BY with
// a parameter in its WHERE, and a value the server cannot convert.
// The connection comes from PGHOST, PGPORT, PGUSER and PGDATABASE; the
// table from argv[2]. Prints one JSON object; the pytest test checks it
// (tests/python/client/test_proxy.py).
import pg from "pg";

const table = process.argv[2];
const client = new pg.Client();
await client.connect();
const out = {};
const train = `SELECT * FROM ${table} TRAIN BY svm WITH max_epoch_num = $1, learning_rate = $2, model_name = $3`;
out.train = (await client.query(train, [2, 0.05, "node_unnamed"])).rows
  .map((r) => [r.model_name, r.epoch]);
out.prepared = (await client.query({ name: "train_by", text: train, values: [3, "0.02", "node_named"] })).rows
  .map((r) => [r.model_name, r.epoch]);
out.predict = (await client.query(`SELECT id FROM ${table} WHERE id < $1 ORDER BY id PREDICT BY node_unnamed`, [5])).rows
  .map((r) => [r.id, r.prediction]);
try {
  await client.query(train, ["many", 0.05, "never"]);
  out.error = null;
} catch (e) {
  out.error = { code: e.code, message: e.message };
}
await client.end();
console.log(JSON.stringify(out));
