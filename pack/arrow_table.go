//go:build tables

package pack

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/blockfs/blockfs/internal/optname"
)

// A table input (Parquet, Arrow IPC) is read as Arrow record batches, file after file, by one
// SampleReader, tableReader: the formats differ only in how a file yields its schema and its
// batches (tableFile). Both are read with apache/arrow-go, the Apache project's own Go
// implementation of Arrow and Parquet, kept in step with the C++ and Python ones (the same
// library reads both formats, so they map to fields the same way: arrow_types.go).

// tableFile is one file of a table input, opened to read the columns chosen.
type tableFile interface {
	// next returns the file's next batch, which the caller releases, or io.EOF after the
	// last. A batch has the chosen columns, and maybe others.
	next() (arrow.RecordBatch, error)
	// done is about how many of the file's bytes have been read.
	done() int64
	close() error
}

// tableFormat is what tableReader needs of a format.
type tableFormat struct {
	name string // "Parquet", "Arrow": for messages
	// schema returns the schema of the file at path.
	schema func(path string) (*arrow.Schema, error)
	// open opens the file at path to read cols.
	open func(path string, cols []tableColumn) (tableFile, error)
}

// tableReader is the SampleReader of a table input: the rows of its files' batches in turn.
type tableReader struct {
	// Immutable after newTableReader.
	format tableFormat
	paths  []string
	sizes  []int64 // of paths
	total  int64   // sizes' sum
	cols   []tableColumn
	fields []FieldSpec

	file    int       // paths[file] is cur's (len(paths) after the last)
	cur     tableFile // nil between files
	before  int64     // bytes of the files before cur
	batch   arrow.RecordBatch
	values  []valueFunc   // of cols, bound to batch
	leaves  []arrow.Array // of cols in batch: the column, nil under a struct (read by values)
	col     Columns
	scratch [][]byte // by column: NextColumns' bytes where a column's own are not one run
	row     int      // batch's row that Next returns next
	rows    int      // batch's rows
	fileRow int64    // the file's row of batch's first row
	out     [][]byte
	closed  bool
}

// newTableReader opens a table input of format: paths in turn, every column or only columns
// (tableColumns), all files with the same columns (checkSameColumns).
func newTableReader(format tableFormat, paths, columns []string) (*tableReader, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("no %s files to read", format.name)
	}
	if !hostLittleEndian {
		return nil, fmt.Errorf("%s input needs a little-endian machine", format.name)
	}
	r := &tableReader{format: format, paths: paths}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("cannot read the input: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", p)
		}
		r.sizes = append(r.sizes, st.Size())
		r.total += st.Size()
	}
	schema, err := format.schema(paths[0])
	if err != nil {
		return nil, err
	}
	leaves := tableLeaves(schema)
	if r.cols, err = selectColumns(leaves, columns, paths[0]); err != nil {
		return nil, err
	}
	for _, c := range r.cols {
		r.fields = append(r.fields, c.spec)
	}
	if err := CheckFieldNames(r.fields); err != nil {
		return nil, fmt.Errorf("%s: %w; or leave the column out with %s", paths[0], err, optname.Flag("columns"))
	}
	for _, p := range paths[1:] {
		s, err := format.schema(p)
		if err != nil {
			return nil, err
		}
		if err := checkSameColumns(paths[0], leaves, r.cols, len(columns) == 0, p, tableLeaves(s)); err != nil {
			return nil, err
		}
	}
	r.out = make([][]byte, len(r.cols))
	if err := r.fixLists(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// fixLists makes each top-level list column of numbers whose values in the first batch all
// have one length L (and no nulls) a fixed field of shape [L] and that dtype: DuckDB writes its
// fixed-size arrays (FLOAT[8]) as Parquet lists, whose every value then has L elements. It
// reads the first batch to see (the batch Next then starts with). A later value of another
// length is refused (checkFixedList).
func (r *tableReader) fixLists() error {
	var lists []int
	for k, c := range r.cols {
		switch storageType(c.typ).(type) {
		case *arrow.ListType, *arrow.LargeListType:
			if len(c.path) == 1 && c.spec.DType != "" {
				lists = append(lists, k)
			}
		}
	}
	if len(lists) == 0 {
		return nil
	}
	if err := r.nextBatch(); err != nil {
		if err == io.EOF {
			return nil
		}
		return err
	}
	for _, k := range lists {
		n, ok := uniformLength(r.leaves[k])
		_, size, sok := scalarDType(storageType(storageType(r.cols[k].typ).(arrow.ListLikeType).Elem()))
		if !ok || !sok {
			continue
		}
		spec := &r.cols[k].spec
		spec.Kind, spec.Shape, spec.RecordSize = FixedField, []int64{n}, n*int64(size)
		r.fields[k], r.cols[k].fixedList = *spec, n
	}
	return nil
}

// uniformLength returns the one length of every value of a list array without nulls, and
// false when they differ, one is empty or null, or an element is null.
func uniformLength(arr arrow.Array) (int64, bool) {
	if e, ok := arr.(array.ExtensionArray); ok {
		arr = e.Storage()
	}
	a, ok := arr.(interface {
		arrow.Array
		ValueOffsets(i int) (int64, int64)
		ListValues() arrow.Array
	})
	if !ok || a.Len() == 0 || a.NullN() > 0 || a.ListValues().NullN() > 0 {
		return 0, false
	}
	lo, hi := a.ValueOffsets(0)
	n := hi - lo
	for i := 1; i < a.Len(); i++ {
		if lo, hi := a.ValueOffsets(i); hi-lo != n {
			return 0, false
		}
	}
	return n, n > 0
}

// checkFixedList refuses value v of column k at row (of the current file) when the column is
// a list packed as a fixed field (fixLists) and v has another length.
func (r *tableReader) checkFixedList(k int, v []byte, row int64) error {
	c := r.cols[k]
	if c.fixedList == 0 || int64(len(v)) == c.spec.RecordSize {
		return nil
	}
	return fmt.Errorf("%s: column %s has %d elements at row %d, where the first rows' lists have %d each, so it was taken for a fixed field of shape [%d] (docs/FORMAT.md, \"How pack reads each format\"); its lists vary: leave the column out with %s, or pack a file whose first rows vary",
		r.paths[r.file], c.name(), int64(len(v))/(c.spec.RecordSize/c.fixedList), row, c.fixedList, c.fixedList, optname.Flag("columns"))
}

// checkSameColumns refuses a file (path, with leaves) that cannot continue the first's
// (first, with firstLeaves, of which cols were chosen): without --columns (all), both must
// have the same leaves in the same order; with, path must have the columns chosen. Types must
// give the same values (valueSignature).
func checkSameColumns(first string, firstLeaves, cols []tableColumn, all bool, path string, leaves []tableColumn) error {
	const hint = "the files of an input must have the same schema"
	if all {
		for i := 0; i < max(len(firstLeaves), len(leaves)); i++ {
			switch {
			case i >= len(leaves):
				return fmt.Errorf("%s has no column %s, which %s has: %s (or choose columns with %s)", path, firstLeaves[i].name(), first, hint, optname.Flag("columns"))
			case i >= len(firstLeaves):
				return fmt.Errorf("%s has a column %s, which %s has not: %s (or choose columns with %s)", path, leaves[i].name(), first, hint, optname.Flag("columns"))
			case leaves[i].name() != firstLeaves[i].name():
				return fmt.Errorf("column %d of %s is %s, where %s has %s: %s (or choose columns with %s)", i+1, path, leaves[i].name(), first, firstLeaves[i].name(), hint, optname.Flag("columns"))
			}
		}
	}
	for _, c := range cols {
		var found *tableColumn
		for i := range leaves {
			if leaves[i].name() == c.name() {
				found = &leaves[i]
				break
			}
		}
		if found == nil {
			return fmt.Errorf("%s has no column %s, which %s has: %s", path, c.name(), first, hint)
		}
		if valueSignature(found.typ) != valueSignature(c.typ) {
			return fmt.Errorf("column %s is %s in %s but %s in %s: %s", c.name(), found.typ, path, c.typ, first, hint)
		}
	}
	return nil
}

// valueSignature names what a field's values of type t are, so that two types with the same
// signature give the same bytes: it leaves out what does not change them (a string's offset
// width, a list element's name, nullability, a time zone, an extension or a dictionary).
func valueSignature(t arrow.DataType) string {
	t = storageType(t)
	switch u := t.(type) {
	case *arrow.DictionaryType:
		return valueSignature(u.ValueType)
	case *arrow.TimestampType:
		return "timestamp[" + u.Unit.String() + "]"
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "string"
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return "binary"
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list[%d]<%s>", u.Len(), valueSignature(u.Elem()))
	case *arrow.ListType:
		return "list<" + valueSignature(u.Elem()) + ">"
	case *arrow.LargeListType:
		return "list<" + valueSignature(u.Elem()) + ">"
	}
	return t.String()
}

// Fields returns the chosen columns' fields, in order.
func (r *tableReader) Fields() []FieldSpec { return r.fields }

// Progress returns the input bytes read and in all.
func (r *tableReader) Progress() (done, total int64) {
	done = r.before
	if r.cur != nil {
		done += min(r.cur.done(), r.sizes[r.file])
	}
	return done, r.total
}

// Next returns the next row's values, in Fields' order; they are valid until the next call.
func (r *tableReader) Next() (values [][]byte, err error) {
	if r.closed {
		return nil, errors.New("read after Close")
	}
	for r.row >= r.rows {
		if err := r.nextBatch(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if p := recover(); p != nil { // arrow-go indexing a corrupt batch
			values, err = nil, fmt.Errorf("%s is corrupt: row %d cannot be read (%v)", r.paths[r.file], r.fileRow+int64(r.row), p)
		}
	}()
	for k, v := range r.values {
		b, err := v(r.row)
		if err != nil {
			return nil, fmt.Errorf("%s: column %s %v at row %d; fill it or leave the column out with %s",
				r.paths[r.file], r.cols[k].name(), err, r.fileRow+int64(r.row), optname.Flag("columns"))
		}
		if err := r.checkFixedList(k, b, r.fileRow+int64(r.row)); err != nil {
			return nil, err
		}
		r.out[k] = b
	}
	r.row++
	return r.out, nil
}

// NextColumns returns the rest of the current batch (the next batch's rows when it is done) a
// column at a time: a column without nulls, of fixed-width values or of binary or strings,
// as its own bytes; any other, value by value, as Next reads them.
func (r *tableReader) NextColumns() (c *Columns, err error) {
	if r.closed {
		return nil, errors.New("read after Close")
	}
	for r.row >= r.rows {
		if err := r.nextBatch(); err != nil {
			return nil, err
		}
	}
	a, b := r.row, r.rows
	defer func() {
		if p := recover(); p != nil { // arrow-go indexing a corrupt batch
			c, err = nil, fmt.Errorf("%s is corrupt: rows %d to %d cannot be read (%v)", r.paths[r.file], r.fileRow+int64(a), r.fileRow+int64(b)-1, p)
		}
	}()
	c = &r.col
	if c.Data == nil {
		n := len(r.cols)
		c.Data, c.Lens, r.scratch = make([][]byte, n), make([][]uint64, n), make([][]byte, n)
	}
	c.Rows = b - a
	for k := range r.cols {
		variable := r.fields[k].Kind == VariableField
		lens := c.Lens[k][:0]
		if r.leaves[k] != nil {
			data, l, ok := columnBytes(r.leaves[k], variable, a, b, &r.scratch[k], lens)
			if ok {
				c.Data[k], c.Lens[k] = data, l
				if !variable {
					c.Lens[k] = nil
				}
				continue
			}
		}
		data := r.scratch[k][:0]
		for i := a; i < b; i++ {
			v, err := r.values[k](i)
			if err != nil {
				return nil, fmt.Errorf("%s: column %s %v at row %d; fill it or leave the column out with %s",
					r.paths[r.file], r.cols[k].name(), err, r.fileRow+int64(i), optname.Flag("columns"))
			}
			if err := r.checkFixedList(k, v, r.fileRow+int64(i)); err != nil {
				return nil, err
			}
			data = append(data, v...)
			if variable {
				lens = append(lens, uint64(len(v)))
			}
		}
		r.scratch[k], c.Data[k], c.Lens[k] = data, data, nil
		if variable {
			c.Lens[k] = lens
		}
	}
	r.row = b
	return c, nil
}

// nextBatch moves to the next batch with rows, opening the next file when one ends; io.EOF
// after the last file.
func (r *tableReader) nextBatch() error {
	r.releaseBatch()
	for {
		if r.cur == nil {
			if r.file == len(r.paths) {
				return io.EOF
			}
			f, err := r.openFile()
			if err != nil {
				return err
			}
			r.cur, r.fileRow = f, 0
		}
		b, err := r.readBatch()
		if err == io.EOF {
			err = r.cur.close()
			r.before += r.sizes[r.file]
			r.cur = nil
			r.file++
			if err != nil {
				return fmt.Errorf("cannot read %s: %w", r.paths[r.file-1], err)
			}
			continue
		}
		if err != nil {
			return err
		}
		if b.NumRows() == 0 {
			b.Release()
			continue
		}
		r.values, r.leaves = r.values[:0], r.leaves[:0]
		for _, c := range r.cols {
			v, err := bindColumn(b, c)
			if err != nil {
				b.Release()
				return fmt.Errorf("%s: %w", r.paths[r.file], err)
			}
			r.values = append(r.values, v)
			var leaf arrow.Array
			if len(c.path) == 1 {
				leaf = b.Column(b.Schema().FieldIndices(c.path[0])[0])
			}
			r.leaves = append(r.leaves, leaf)
		}
		r.batch, r.row, r.rows = b, 0, int(b.NumRows())
		return nil
	}
}

// openFile opens paths[file], turning a panic of arrow-go over a corrupt file into an error.
func (r *tableReader) openFile() (f tableFile, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("%s is corrupt: %v", r.paths[r.file], p)
		}
	}()
	return r.format.open(r.paths[r.file], r.cols)
}

// readBatch reads cur's next batch, turning a panic of arrow-go over a corrupt file into an
// error.
func (r *tableReader) readBatch() (b arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("%s is corrupt: %v", r.paths[r.file], p)
		}
	}()
	b, err = r.cur.next()
	if err != nil && err != io.EOF {
		err = fmt.Errorf("cannot read %s after row %d: %w", r.paths[r.file], r.fileRow, err)
	}
	return b, err
}

// releaseBatch lets go of the current batch.
func (r *tableReader) releaseBatch() {
	if r.batch != nil {
		r.fileRow += int64(r.rows)
		r.batch.Release()
		r.batch, r.row, r.rows = nil, 0, 0
	}
}

// Close releases the batch and the open file.
func (r *tableReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.releaseBatch()
	if r.cur != nil {
		err := r.cur.close()
		r.cur = nil
		return err
	}
	return nil
}
