// make.js writes the Parquet and Arrow IPC files that pack/parquet_test.go and
// pack/arrow_ipc_test.go read, with writers independent of the reader (apache/arrow-go):
// DuckDB for Parquet, Arrow's JavaScript implementation for Arrow IPC files and streams. Every
// value is a formula of the row number i, which the Go tests recompute (typesFormulas,
// arrowFormulas).
//
//   cd /tmp && npm install @duckdb/node-api@1.5.6-r.1 apache-arrow@21.2.0
//   NODE_PATH=/tmp/node_modules node test/testdata/parquet/make.js
'use strict';
const path = require('path');
const fs = require('fs');
const duckdb = require('@duckdb/node-api');
const arrow = require('apache-arrow');

const out = __dirname;

// The types table for rows [lo, hi): one column per type pack maps (FORMAT.md, "Parquet and
// Arrow columns").
const typesSQL = (lo, hi) => `
  SELECT i AS row,
    ((i % 256) - 128)::TINYINT AS i8,
    (i % 256)::UTINYINT AS u8,
    ((i * 37 % 65536) - 32768)::SMALLINT AS i16,
    (i * 37 % 65536)::USMALLINT AS u16,
    ((i * 7919 % 20001) - 10000)::INTEGER AS i32,
    -- From 2^31 up only in types2.parquet: see delta33.parquet.
    ((i * 2654435761) % 2147483648 + CASE WHEN i >= 5000 THEN 2147483648 ELSE 0 END)::UINTEGER AS u32,
    i * 1000000007 - 5000000000 AS i64,
    18446744073709551615::UBIGINT - i::UBIGINT AS u64,
    (i * 0.25 - 100)::FLOAT AS f32,
    i::DOUBLE / 8 - 1000 AS f64,
    i % 3 = 0 AS flag,
    'name-' || i || repeat('é', (i % 4)::INTEGER) AS name,
    CASE WHEN i % 100 = 0 THEN ''::BLOB
         ELSE from_hex(printf('%04x', i)) || encode(repeat('z', (i % 5)::INTEGER)) END AS data,
    [i, i + 0.5, -i]::FLOAT[3] AS vec,
    [(i * 10 + x)::INTEGER FOR x IN range(i % 6)] AS toks,
    {'bytes': encode('img' || i), 'path': 'img/' || i || '.png'}::STRUCT(bytes BLOB, path VARCHAR) AS img,
    make_timestamp(1577836800000000 + i * 1000001) AS ts,
    DATE '2020-01-01' + i::INTEGER AS day
  FROM range(${lo}, ${hi}) r(i)`;

async function parquet() {
  const db = await duckdb.DuckDBInstance.create(':memory:');
  const c = await db.connect();
  // DuckDB's row groups are multiples of 2048 rows.
  const copy = (sql, name, options = '') =>
    c.run(`COPY (${sql}) TO '${path.join(out, name)}' (FORMAT PARQUET${options})`);
  // Three row groups (2048, 2048, 904 rows) of version 2 pages (delta encodings), zstd.
  await copy(typesSQL(0, 5000) + ' ORDER BY i', 'types.parquet',
    ', ROW_GROUP_SIZE 2048, COMPRESSION ZSTD, PARQUET_VERSION V2');
  // DuckDB's defaults (version 1 pages, snappy), as the rows after types.parquet's.
  await copy(typesSQL(5000, 5700) + ' ORDER BY i', 'types2.parquet');
  // The same columns but i32 a BIGINT: a second file whose schema differs.
  await copy(`SELECT * REPLACE (i32::BIGINT AS i32) FROM (${typesSQL(0, 100)})`, 'mismatch.parquet');
  // Nulls: a at row 42, s at row 7, img (the struct) at row 3, toks (inside a list) at row 5.
  await copy(`SELECT i::INTEGER AS ok,
      CASE WHEN i = 42 THEN NULL ELSE i::INTEGER END AS a,
      CASE WHEN i = 7 THEN NULL ELSE 's' || i END AS s,
      CASE WHEN i = 3 THEN NULL ELSE {'bytes': encode('b'), 'path': 'p'} END AS img,
      CASE WHEN i = 5 THEN [1, NULL] ELSE [i::INTEGER] END AS toks
    FROM range(100) r(i)`, 'nulls.parquet');
  await copy(`SELECT i::INTEGER AS ok, MAP {'k': i::INTEGER} AS m, (i / 100)::DECIMAL(10, 2) AS d,
      ['a', 'b' || i] AS tags FROM range(10) r(i)`, 'unsupported.parquet');
  await copy(`SELECT i::INTEGER AS ids, i::INTEGER AS x FROM range(10) r(i)`, 'ids.parquet');
  // UINTEGER columns in version 2 pages that arrow-go (v18.8) refuses to read: DuckDB writes
  // deltas of 33 bits (u32; apache/arrow#20374: the format now says readers should accept
  // them) and a first value from 2^31 up unwrapped (big).
  await copy(`SELECT (i * 2654435761 % 4294967296)::UINTEGER AS u32, (4000000000 + i)::UINTEGER AS big
    FROM range(100) r(i)`, 'delta33.parquet', ', PARQUET_VERSION V2');
}

// The Arrow table for rows [lo, hi), in IPC with its own types: float16, nested fixed-size
// lists, a dictionary, large strings.
function arrowBatch(lo, hi) {
  const n = hi - lo;
  const rows = Array.from({ length: n }, (_, k) => lo + k);
  const build = (type, values) => {
    const b = arrow.makeBuilder({ type, nullValues: [null] });
    for (const v of values) b.append(v);
    return b.finish().toVector();
  };
  const ts = new BigInt64Array(rows.map((i) => 1577836800000000n + BigInt(i) * 1000001n));
  return {
    row: build(new arrow.Int64(), rows.map(BigInt)),
    i32: build(new arrow.Int32(), rows.map((i) => (i * 7919 % 20001) - 10000)),
    f16: build(new arrow.Float16(), rows.map((i) => (i % 1000) / 2 - 200)),
    f64: build(new arrow.Float64(), rows.map((i) => i / 8 - 1000)),
    flag: build(new arrow.Bool(), rows.map((i) => i % 3 === 0)),
    name: build(new arrow.Utf8(), rows.map((i) => 'name-' + i + 'é'.repeat(i % 4))),
    lname: build(new arrow.LargeUtf8(), rows.map((i) => 'large-' + i)),
    data: build(new arrow.Binary(), rows.map((i) => Uint8Array.from({ length: i % 7 }, (_, k) => (i + k) % 256))),
    vec: build(new arrow.FixedSizeList(3, new arrow.Field('item', new arrow.Float32())),
      rows.map((i) => [i, i + 0.5, -i])),
    grid: build(new arrow.FixedSizeList(3, new arrow.Field('item',
      new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Int16())))),
      rows.map((i) => [[i % 100, 1], [2, -(i % 100)], [i % 7, i % 11]])),
    toks: build(new arrow.List(new arrow.Field('item', new arrow.Int32())),
      rows.map((i) => Array.from({ length: i % 6 }, (_, x) => i * 10 + x))),
    img: build(new arrow.Struct([new arrow.Field('bytes', new arrow.Binary()), new arrow.Field('path', new arrow.Utf8())]),
      rows.map((i) => ({ bytes: new TextEncoder().encode('img' + i), path: 'img/' + i + '.png' }))),
    ts: arrow.makeVector(arrow.makeData({ type: new arrow.TimestampMicrosecond(), length: n, data: ts })),
    label: build(new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32()), rows.map((i) => ['cat', 'dog', 'bird'][i % 3])),
  };
}

function arrowFiles() {
  // Batches of 200, 200 and 100 rows.
  const whole = new arrow.Table(arrowBatch(0, 500));
  const table = new arrow.Table([[0, 200], [200, 400], [400, 500]]
    .flatMap(([lo, hi]) => whole.slice(lo, hi).batches));
  fs.writeFileSync(path.join(out, 'types.arrow'), arrow.tableToIPC(table, 'file'));
  // Hugging Face's cache files: IPC streams, named .arrow.
  fs.writeFileSync(path.join(out, 'types.stream.arrow'), arrow.tableToIPC(table, 'stream'));
  const int = (values) => {
    const b = arrow.makeBuilder({ type: new arrow.Int32(), nullValues: [null] });
    for (const v of values) b.append(v);
    return b.finish().toVector();
  };
  const r = Array.from({ length: 20 }, (_, i) => i);
  fs.writeFileSync(path.join(out, 'nulls.arrow'), arrow.tableToIPC(new arrow.Table({
    ok: int(r), a: int(r.map((i) => (i === 5 ? null : i))),
  }), 'file'));
  const strs = arrow.makeBuilder({ type: new arrow.List(new arrow.Field('item', new arrow.Utf8())) });
  for (const i of r) strs.append(['a', 'b' + i]);
  fs.writeFileSync(path.join(out, 'unsupported.arrow'), arrow.tableToIPC(new arrow.Table({
    ok: int(r), tags: strs.finish().toVector(),
  }), 'stream'));
}

parquet().then(arrowFiles).catch((e) => { console.error(e); process.exit(1); });
