//go:build tables

package pack

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Arrow IPC input, read with apache/arrow-go's ipc package: the file format (.arrow, Feather
// v2), which starts with the magic "ARROW1", and the stream format, which Hugging Face
// datasets' cache files are (named .arrow all the same). Either is read a record batch at a
// time, so memory is bounded by the largest batch, which the writer chose (Hugging Face
// writes 1000 rows a batch, fewer for images).

// arrowMagic starts an Arrow IPC file (and ends it); a stream starts with a message.
var arrowMagic = []byte("ARROW1")

// OpenArrow opens Arrow IPC files or streams as one input, paths in the order given, each
// file detected by its magic: every column, or only columns, as OpenParquet. Columns map to
// fields as arrow_types.go says; the files must have the same schema. Progress counts the
// files' bytes.
func OpenArrow(paths []string, columns []string) (ColumnReader, error) {
	return openArrow(paths, columns, memory.DefaultAllocator)
}

// openArrow is OpenArrow allocating Arrow's buffers from mem.
func openArrow(paths []string, columns []string, mem memory.Allocator) (ColumnReader, error) {
	format := tableFormat{
		name: "Arrow",
		schema: func(path string) (*arrow.Schema, error) {
			f, err := openArrowFile(path, mem)
			if err != nil {
				return nil, err
			}
			defer f.close()
			return f.schema, nil
		},
		open: func(path string, _ []tableColumn) (tableFile, error) {
			return openArrowFile(path, mem)
		},
	}
	r, err := newTableReader(format, paths, columns)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// arrowFile is one Arrow IPC file or stream of an input.
type arrowFile struct {
	f      *os.File
	size   int64
	schema *arrow.Schema
	file   *ipc.FileReader // the file format, or
	stream *ipc.Reader     // the stream format
	read   *countingReader // stream: the bytes read
	batch  int             // file: the next batch
}

// openArrowFile opens an Arrow IPC file or stream and reads its schema.
func openArrowFile(path string, mem memory.Allocator) (a *arrowFile, err error) {
	f, err := openInputFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the input: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			a, err = nil, fmt.Errorf("%s is not a readable Arrow IPC file or stream: %v", path, p)
		}
		if err != nil {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read the input: %w", err)
	}
	a = &arrowFile{f: f, size: st.Size()}
	head := make([]byte, 8)
	n, _ := f.ReadAt(head, 0)
	switch head = head[:n]; {
	case bytes.HasPrefix(head, arrowMagic):
		if a.file, err = ipc.NewFileReader(f, ipc.WithAllocator(mem)); err != nil {
			return nil, fmt.Errorf("%s is not a readable Arrow IPC file: %w", path, err)
		}
		a.schema = a.file.Schema()
	case bytes.HasPrefix(head, []byte("FEA1")):
		return nil, fmt.Errorf("%s is a Feather version 1 file, which pack does not read; rewrite it as Feather version 2 (Arrow IPC), e.g. pyarrow.feather.write_feather", path)
	default:
		a.read = &countingReader{r: f}
		if a.stream, err = ipc.NewReader(bufio.NewReaderSize(a.read, 64<<10), ipc.WithAllocator(mem)); err != nil {
			return nil, fmt.Errorf("%s is neither an Arrow IPC file (it does not start with ARROW1) nor a readable Arrow IPC stream: %w", path, err)
		}
		a.schema = a.stream.Schema()
	}
	return a, nil
}

func (a *arrowFile) next() (arrow.RecordBatch, error) {
	if a.file != nil {
		if a.batch == a.file.NumRecords() {
			return nil, io.EOF
		}
		b, err := a.file.RecordBatchAt(a.batch)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", a.batch, err)
		}
		a.batch++
		return b, nil
	}
	if a.stream.Next() {
		b := a.stream.RecordBatch()
		b.Retain()
		return b, nil
	}
	if err := a.stream.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// done is, for a file, its size in the proportion of its batches read; for a stream, the
// bytes read.
func (a *arrowFile) done() int64 {
	if a.file != nil {
		if n := a.file.NumRecords(); n > 0 {
			return a.size * int64(a.batch) / int64(n)
		}
		return 0
	}
	return a.read.n
}

func (a *arrowFile) close() error {
	if a.file != nil {
		a.file.Close()
	}
	if a.stream != nil {
		a.stream.Release()
	}
	return a.f.Close()
}
