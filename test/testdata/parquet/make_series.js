// make_series.js writes series.parquet and series_unsorted.parquet, a time series table as seed
// 003 has it (entity, timestamp, features), for test/fields_test.go's --segments-by test: 60
// entities of 20 + (e * 37 % 101) rows, feature k of entity e's row t is e * 1000 + t + k / 4.
//
//   cd /tmp && npm install @duckdb/node-api@1.5.6-r.1
//   NODE_PATH=/tmp/node_modules node test/testdata/parquet/make_series.js
'use strict';
const path = require('path');
const duckdb = require('@duckdb/node-api');

const out = __dirname;
const table = `
  SELECT e::INTEGER AS entity, (TIMESTAMP '2024-01-01' + INTERVAL (t) HOUR) AS ts,
    (e * 1000 + t + 0.00)::FLOAT AS f0, (e * 1000 + t + 0.25)::FLOAT AS f1,
    (e * 1000 + t + 0.50)::FLOAT AS f2, (e * 1000 + t + 0.75)::FLOAT AS f3
  FROM range(60) r(e), range(200) s(t) WHERE t < 20 + (e * 37 % 101)`;

(async () => {
  const db = await duckdb.DuckDBInstance.create(':memory:');
  const c = await db.connect();
  await c.run(`COPY (${table} ORDER BY entity, ts) TO '${path.join(out, 'series.parquet')}' (FORMAT PARQUET, ROW_GROUP_SIZE 1000)`);
  await c.run(`COPY (${table} ORDER BY ts, entity) TO '${path.join(out, 'series_unsorted.parquet')}' (FORMAT PARQUET)`);
})();
