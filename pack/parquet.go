//go:build tables

package pack

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Parquet input: apache/arrow-go's pqarrow reads a file's row groups as Arrow record batches of
// a bounded size, streaming each column chunk through a small buffer, so that memory does not
// grow with the table: what pack holds is about one batch of the chosen columns and one page
// of each (a page is decoded whole; writers cut them at about 1 MiB, though pyarrow and
// arrow-go only check after every 1024 values). Reading a 500 MiB file of 20 KiB values in
// 20 MiB pages peaks at about 180 MiB RSS, most of it the garbage collector's slack, at about
// 550 MB/s (2 cores).

// Parquet reading bounds. A batch holds at most parquetBatchRows rows and, by the row groups'
// uncompressed sizes, about parquetBatchBytes of the chosen columns (at least one row).
// A column chunk is read through a buffer of parquetBufferSize, not whole.
const (
	parquetBatchRows  = 64 << 10
	parquetBatchBytes = 8 << 20
	parquetBufferSize = 1 << 20
)

// OpenParquet opens Parquet files as one input, paths in the order given: every column, or
// only columns, in that order (a name is a top-level column, with all its leaves, or a
// struct's leaf, "image.bytes"). Columns map to fields as arrow_types.go says; the files must
// have the same schema (the columns chosen, if columns is given). Memory is bounded by a batch
// (parquetBatchBytes), whatever the files' size; Progress counts the files' bytes.
func OpenParquet(paths []string, columns []string) (ColumnReader, error) {
	return openParquet(paths, columns, memory.DefaultAllocator)
}

// openParquet is OpenParquet allocating Arrow's buffers from mem (tests check that every
// buffer is released).
func openParquet(paths []string, columns []string, mem memory.Allocator) (ColumnReader, error) {
	format := tableFormat{
		name: "Parquet",
		schema: func(path string) (*arrow.Schema, error) {
			f, err := openParquetFile(path, mem)
			if err != nil {
				return nil, err
			}
			defer f.rdr.Close()
			return f.schema, nil
		},
		open: func(path string, cols []tableColumn) (tableFile, error) {
			f, err := openParquetFile(path, mem)
			if err != nil {
				return nil, err
			}
			if err := f.start(cols); err != nil {
				f.rdr.Close()
				return nil, err
			}
			return f, nil
		},
	}
	r, err := newTableReader(format, paths, columns)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// parquetFile is one Parquet file of an input (a tableFile once started).
type parquetFile struct {
	path   string
	size   int64
	rdr    *file.Reader
	fr     *pqarrow.FileReader
	schema *arrow.Schema
	rr     pqarrow.RecordReader // after start
	rows   int64                // the file's
	read   int64                // rows read
}

// openParquetFile opens a Parquet file and reads its footer.
func openParquetFile(path string, mem memory.Allocator) (f *parquetFile, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("%s is not a readable Parquet file: %v", path, p)
		}
	}()
	// One descriptor for the check and the reader (which closes it): a file put in the
	// path's place after the check is not read.
	in, size, err := openParquetInput(path)
	if err != nil {
		return nil, err
	}
	props := parquet.NewReaderProperties(mem)
	props.BufferedStreamEnabled = true // else a column chunk is read into memory whole
	props.BufferSize = parquetBufferSize
	rdr, err := file.NewParquetReader(in, file.WithReadProps(props))
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("%s is not a readable Parquet file: %w", path, err)
	}
	// PreAllocBinaryData sizes a batch's binary buffer from the row group's sizes, rather
	// than doubling it value by value (a third less allocated in all).
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{PreAllocBinaryData: true, Parallel: true}, mem)
	if err == nil {
		var schema *arrow.Schema
		if schema, err = fr.Schema(); err == nil {
			return &parquetFile{path: path, size: size, rdr: rdr, fr: fr, schema: schema, rows: rdr.NumRows()}, nil
		}
	}
	rdr.Close()
	return nil, fmt.Errorf("%s: cannot read its schema as Arrow's: %w", path, err)
}

// openParquetInput opens the Parquet file at path (openInputFile) and checks its magic
// (checkParquetMagic); it returns the file, open, and its size.
func openParquetInput(path string) (*os.File, int64, error) {
	f, err := openInputFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read the input: %w", err)
	}
	size, err := checkParquetMagic(f, path)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}

// checkParquetMagic refuses a file f (at path) that does not start and end as a Parquet file
// does, with "PAR1", in words that say what it is more likely to be. It returns its size.
func checkParquetMagic(f *os.File, path string) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("cannot read the input: %w", err)
	}
	head, tail := make([]byte, 4), make([]byte, 4)
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != "PAR1" {
		return 0, fmt.Errorf("%s is not a Parquet file (it does not start with PAR1)", path)
	}
	if st.Size() < 12 {
		return 0, fmt.Errorf("%s is truncated: %d bytes are too few for a Parquet file", path, st.Size())
	}
	if _, err := f.ReadAt(tail, st.Size()-4); err != nil {
		return 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	switch string(tail) {
	case "PAR1":
		return st.Size(), nil
	case "PARE":
		return 0, fmt.Errorf("%s is an encrypted Parquet file, which pack does not read", path)
	}
	return 0, fmt.Errorf("%s is truncated (it does not end with PAR1, as a whole Parquet file does)", path)
}

// start sets the file up to read the leaves of cols: their Parquet columns, in batches of
// about parquetBatchBytes.
func (f *parquetFile) start(cols []tableColumn) error {
	var leaves []int
	for _, c := range cols {
		sf := findSchemaField(f.fr.Manifest.Fields, c.path)
		if sf == nil {
			return fmt.Errorf("%s has no column %s", f.path, c.name())
		}
		leaves = appendLeafColumns(leaves, sf)
	}
	slices.Sort(leaves)
	leaves = slices.Compact(leaves)

	md := f.rdr.MetaData()
	if _, err := checkPageCRCs(f.path, md, leaves); err != nil {
		return err
	}
	var rowBytes int64 = 1 // the most bytes a row of the chosen columns, by row group
	for g := 0; g < f.rdr.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		if rg.NumRows() == 0 {
			continue
		}
		var n int64
		for _, l := range leaves {
			cc, err := rg.ColumnChunk(l)
			if err != nil {
				return fmt.Errorf("%s: row group %d: %w", f.path, g, err)
			}
			n += cc.TotalUncompressedSize()
		}
		rowBytes = max(rowBytes, (n+rg.NumRows()-1)/rg.NumRows())
	}
	f.fr.Props.BatchSize = min(max(parquetBatchBytes/rowBytes, 1), parquetBatchRows)
	rr, err := f.fr.GetRecordReader(context.Background(), leaves, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	f.rr = rr
	return nil
}

// findSchemaField returns the field at path (a column, then struct members), or nil.
func findSchemaField(fields []pqarrow.SchemaField, path []string) *pqarrow.SchemaField {
	for i := range fields {
		if fields[i].Field.Name != path[0] {
			continue
		}
		if len(path) == 1 {
			return &fields[i]
		}
		return findSchemaField(fields[i].Children, path[1:])
	}
	return nil
}

// appendLeafColumns appends the Parquet columns (leaves) under sf.
func appendLeafColumns(leaves []int, sf *pqarrow.SchemaField) []int {
	if sf.IsLeaf() {
		return append(leaves, sf.ColIndex)
	}
	for i := range sf.Children {
		leaves = appendLeafColumns(leaves, &sf.Children[i])
	}
	return leaves
}

func (f *parquetFile) next() (arrow.RecordBatch, error) {
	if f.rr.Next() {
		b := f.rr.RecordBatch()
		b.Retain()
		f.read += b.NumRows()
		return b, nil
	}
	if err := f.rr.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// done is the file's size in the proportion of its rows read.
func (f *parquetFile) done() int64 {
	if f.rows == 0 {
		return 0
	}
	return int64(float64(f.size) * float64(f.read) / float64(f.rows))
}

func (f *parquetFile) close() error {
	if f.rr != nil {
		f.rr.Release()
		f.rr = nil
	}
	return f.rdr.Close()
}
