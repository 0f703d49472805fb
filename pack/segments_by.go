package pack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/layout"
)

// A time series in a table (one row per entity and time step: entity, timestamp, features...)
// becomes, with --segments-by ENTITY, a dataset of rows of its feature columns in input order
// and the entities' row ranges as segments (layout.SegmentsName), so that blockfs mount
// --window L serves windows of L rows that never cross an entity: no conversion by hand and no
// metadata file. The table must be sorted by entity (each entity's rows together); one that is
// not is refused, with the command that sorts it.

// SegmentsResult says what PackSegmented did.
type SegmentsResult struct {
	Manifest  *layout.Manifest
	Segments  int
	Features  []string // the columns each row holds, in order
	BlockSize int64
}

// segment is one entity's rows, as the segments file lists them.
type segment struct {
	Entity string `json:"entity"`
	Start  int64  `json:"start_row"`
	End    int64  `json:"end_row"`
}

// PackSegmented packs r's samples as rows of every field but the column by (all fixed-size,
// of one dtype) into a dataset at dst, in input order, with the runs of equal values of column
// by as its segments. It closes r.
func PackSegmented(ctx context.Context, r SampleReader, dst, by string, opt Options) (*SegmentsResult, error) {
	defer r.Close()
	specs := r.Fields()
	key := -1
	var features []int
	var dtype string
	var row int64
	for i, f := range specs {
		if f.Name == by {
			key = i
			continue
		}
		if f.Kind != FixedField || f.DType == "" {
			return nil, fmt.Errorf("--segments-by %s makes rows of the other columns for windows, so they must be numbers of fixed size; %s is %s: leave it out with --columns", by, f.Name, describeSpec(f))
		}
		if dtype != "" && f.DType != dtype {
			return nil, fmt.Errorf("--segments-by %s makes rows of the other columns, which must have one dtype: %s is %s, %s is %s; choose columns of one type with --columns", by, specs[features[0]].Name, dtype, f.Name, f.DType)
		}
		dtype = f.DType
		features = append(features, i)
		row += f.RecordSize
	}
	names := make([]string, 0, len(specs))
	for _, f := range specs {
		names = append(names, f.Name)
	}
	if key < 0 {
		return nil, fmt.Errorf("--segments-by %s: the input has no such column (it has %s)", by, strings.Join(names, ", "))
	}
	if len(features) == 0 {
		return nil, fmt.Errorf("--segments-by %s: no other column to make rows of", by)
	}
	item, err := layout.DTypeSize(dtype)
	if err != nil {
		return nil, err
	}
	res := &SegmentsResult{BlockSize: opt.BlockSize}
	for _, i := range features {
		res.Features = append(res.Features, specs[i].Name)
	}
	if res.BlockSize == 0 {
		_, total := r.Progress()
		res.BlockSize = AutoBlockSize(max(total, 1), row)
	}
	w, err := layout.Create(dst, layout.WriterOptions{Kind: layout.Fixed, RecordSize: row, BlockSize: max(res.BlockSize, row),
		DType: dtype, Shape: []int64{row / item}, Source: "table rows of " + strings.Join(res.Features, ", ") + ", segments by " + by,
		BlockDone: opt.BlockDone}, opt.Force)
	if err != nil {
		return nil, err
	}
	var segs []segment
	seen := map[string]int64{} // entity -> its first row
	var last string            // the entity of the row before, as bytes
	buf := make([]byte, 0, row)
	var n int64
	for ; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				w.Abort()
				return nil, err
			}
			if opt.Progress != nil {
				done, total := r.Progress()
				opt.Progress(done, total, uint64(n))
			}
		}
		values, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			w.Abort()
			return nil, err
		}
		entity := string(values[key])
		if len(segs) == 0 || last != entity {
			last = entity
			if first, ok := seen[entity]; ok {
				w.Abort()
				return nil, fmt.Errorf("--segments-by %s: the rows of %s %q are not together (rows %d and %d, with others between): the table must be sorted by %s; sort it first, e.g. duckdb -c \"COPY (SELECT * FROM 'in.parquet' ORDER BY %s, <time column>) TO 'sorted.parquet'\"",
					by, by, printable(values[key], specs[key]), first, n, by, by)
			}
			seen[entity] = n
			segs = append(segs, segment{Entity: printable(values[key], specs[key]), Start: n})
		}
		segs[len(segs)-1].End = n
		buf = buf[:0]
		for _, i := range features {
			buf = append(buf, values[i]...)
		}
		if err := w.Append(uint64(n), buf); err != nil {
			w.Abort()
			return nil, err
		}
	}
	if n == 0 {
		w.Abort()
		return nil, fmt.Errorf("the input has no rows")
	}
	doc, err := json.MarshalIndent(map[string]any{"column": by, "index_map": segs}, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(w.TempDir(), layout.SegmentsName), append(doc, '\n'), 0o644)
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	if res.Manifest, err = w.Commit(); err != nil {
		return nil, err
	}
	res.Segments = len(segs)
	return res, nil
}

// printable returns an entity's value as text: a number as its value, a string as it is,
// anything else in hex.
func printable(b []byte, f FieldSpec) string {
	if f.Kind == FixedField && f.DType != "" && len(b) <= 8 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		if f.DType[1] == 'i' && len(b) > 0 && b[len(b)-1]&0x80 != 0 {
			return fmt.Sprint(int64(v) - int64(1)<<(8*uint(len(b))))
		}
		return fmt.Sprint(v)
	}
	ok := true
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			ok = false
			break
		}
	}
	if ok {
		return string(b)
	}
	return fmt.Sprintf("%x", b)
}

// describeSpec says what a field is, for messages.
func describeSpec(f FieldSpec) string {
	if f.Kind == VariableField {
		return "of varying length"
	}
	if f.DType == "" {
		return "opaque bytes"
	}
	return f.DType
}
