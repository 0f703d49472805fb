package pack

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Parquet and Arrow are read with apache/arrow-go, whose packages take 10-17 MiB of resident
// memory in any process that links them, before it reads a byte. The mount's daemon must not
// carry that (its RSS is its cache plus a small constant), so arrow-go is linked only into a
// second binary, blockfs-tables (the same command, built with the tag "tables"), and blockfs
// pack runs it to read a table: pack runs blockfs-tables read-samples (ReadSamplesCommand) with
// what to read, a SamplesSpec, as JSON on its stdin (no flags: the child's command line is not
// the user's); the child writes the samples to a pipe in the stream below, and the parent's
// SampleReader reads them from there.
//
// The stream: one line of JSON (pipeHeader), then frames: 'C' uvarint(input bytes read so far),
// uvarint(rows) and, per field, for a variable one rows uint64 little-endian lengths, then
// uvarint(length) and the column's bytes (a batch of samples, from a ColumnReader); 'E' at the
// end; 'X' uvarint(length) and an error message, the child's error.

// TablesBinary is the name of the binary that reads Parquet and Arrow.
const TablesBinary = "blockfs-tables"

// ReadSamplesCommand is the hidden command of blockfs-tables that pack runs (ServeSamples).
const ReadSamplesCommand = "read-samples"

// SamplesSpec is what pack asks blockfs-tables read-samples to read: the files of a table
// format, and the columns to read (nil: all).
type SamplesSpec struct {
	Format  Format   `json:"format"`
	Paths   []string `json:"paths"`
	Columns []string `json:"columns,omitempty"`
}

// maxSamplesSpec bounds the spec read from stdin (the paths of many shards fit in it).
const maxSamplesSpec = 64 << 20

// ServeSamples is blockfs-tables read-samples: it reads a SamplesSpec (JSON) from in and writes
// the samples of its files to out as the stream above.
func ServeSamples(in io.Reader, out io.Writer) error {
	var spec SamplesSpec
	dec := json.NewDecoder(io.LimitReader(in, maxSamplesSpec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("%s reads what to read as JSON on stdin: %w", ReadSamplesCommand, err)
	}
	if len(spec.Paths) == 0 {
		return fmt.Errorf("%s: no files to read", ReadSamplesCommand)
	}
	r, err := ReadTable(spec.Format, spec.Paths, spec.Columns)
	if err != nil {
		return err
	}
	defer r.Close()
	return WriteSamples(out, r)
}

// pipeHeader is the stream's first line.
type pipeHeader struct {
	Fields []FieldSpec `json:"fields"`
	Total  int64       `json:"total"`
}

// WriteSamples writes r's samples to w as the stream above (ServeSamples). An
// error of r's is written into the stream for the reader to return, and returned.
func WriteSamples(w io.Writer, r ColumnReader) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	_, total := r.Progress()
	hdr, err := json.Marshal(pipeHeader{Fields: r.Fields(), Total: total})
	if err != nil {
		return err
	}
	bw.Write(append(hdr, '\n'))
	var num [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(num[:binary.PutUvarint(num[:], v)]) }
	var lens []byte
	for {
		c, err := r.NextColumns()
		if err == io.EOF {
			bw.WriteByte('E')
			return bw.Flush()
		}
		if err != nil {
			msg := err.Error()
			bw.WriteByte('X')
			uv(uint64(len(msg)))
			bw.WriteString(msg)
			bw.Flush()
			return err
		}
		done, _ := r.Progress()
		bw.WriteByte('C')
		uv(uint64(done))
		uv(uint64(c.Rows))
		for k, data := range c.Data {
			if c.Lens[k] != nil {
				lens = lens[:0]
				for _, l := range c.Lens[k] {
					lens = binary.LittleEndian.AppendUint64(lens, l)
				}
				bw.Write(lens)
			}
			uv(uint64(len(data)))
			bw.Write(data)
		}
		if _, err := bw.Write(nil); err != nil {
			return err
		}
	}
}

// pipeReader is the SampleReader of a child's stream.
type pipeReader struct {
	cmd    *exec.Cmd
	in     io.ReadCloser
	br     *bufio.Reader
	stderr *strings.Builder
	hdr    pipeHeader
	done   int64
	vals   [][]byte
	bufs   [][]byte
	lens   [][]uint64
	raw    []byte
	cols   Columns  // the last batch
	row    int      // Next: the batch's next row
	at     []uint64 // Next: where the row's values start, by field
	ended  bool
}

// FindTables returns the blockfs-tables binary: $BLOCKFS_TABLES_BIN, else beside this
// program, else on PATH. Besides Parquet and Arrow it draws order --stats --plot (gonum/plot).
func FindTables() (string, error) {
	if p := os.Getenv("BLOCKFS_TABLES_BIN"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), TablesBinary)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(TablesBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("reading Parquet and Arrow, and drawing plots, needs %s beside blockfs (make build makes both; the wheel carries both), or $BLOCKFS_TABLES_BIN", TablesBinary)
}

// openPiped runs blockfs-tables read-samples on the inputs (a SamplesSpec on its stdin) and
// returns its stream as a SampleReader.
func openPiped(format Format, paths, columns []string) (SampleReader, error) {
	bin, err := FindTables()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(SamplesSpec{Format: format, Paths: paths, Columns: columns})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, ReadSamplesCommand)
	cmd.Stdin = bytes.NewReader(spec)
	p := &pipeReader{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = p.stderr
	if p.in, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	// A pipe of 1 MiB, not 64 KiB: a batch passes in a few writes, not hundreds of switches
	// between the processes (best effort: the size is capped by /proc/sys/fs/pipe-max-size).
	if f, ok := p.in.(*os.File); ok {
		if rc, err := f.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot run %s: %w", bin, err)
	}
	p.br = bufio.NewReaderSize(p.in, 1<<20)
	line, err := p.br.ReadBytes('\n')
	if err != nil {
		return nil, p.fail(err)
	}
	if err := json.Unmarshal(line, &p.hdr); err != nil {
		return nil, p.fail(err)
	}
	p.vals, p.bufs = make([][]byte, len(p.hdr.Fields)), make([][]byte, len(p.hdr.Fields))
	return p, nil
}

// fail ends the child and returns its error: its own message where it gave one.
func (p *pipeReader) fail(err error) error {
	p.ended = true
	p.in.Close()
	werr := p.cmd.Wait()
	if msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p.stderr.String()), "blockfs: ")); msg != "" {
		return errors.New(msg)
	}
	if werr != nil {
		return fmt.Errorf("%s: %v", TablesBinary, werr)
	}
	return fmt.Errorf("%s: %v", TablesBinary, err)
}

func (p *pipeReader) Fields() []FieldSpec { return p.hdr.Fields }

func (p *pipeReader) Progress() (int64, int64) { return p.done, p.hdr.Total }

// head reads a frame's kind and, for a batch, the progress after it: nil when a batch follows,
// io.EOF at the stream's end, the child's error at its.
func (p *pipeReader) head() error {
	if p.ended {
		return io.EOF
	}
	kind, err := p.br.ReadByte()
	if err != nil {
		return p.fail(err)
	}
	switch kind {
	case 'E':
		p.ended = true
		p.in.Close()
		if err := p.cmd.Wait(); err != nil {
			return fmt.Errorf("%s: %v: %s", TablesBinary, err, strings.TrimSpace(p.stderr.String()))
		}
		return io.EOF
	case 'X':
		n, err := binary.ReadUvarint(p.br)
		if err != nil || n > 1<<20 {
			return p.fail(fmt.Errorf("a damaged stream"))
		}
		msg := make([]byte, n)
		io.ReadFull(p.br, msg)
		p.ended = true
		p.in.Close()
		p.cmd.Wait()
		return errors.New(string(msg))
	case 'C':
	default:
		return p.fail(fmt.Errorf("a damaged stream (frame %q)", kind))
	}
	done, err := binary.ReadUvarint(p.br)
	if err != nil {
		return p.fail(err)
	}
	p.done = int64(done)
	return nil
}

// Limits on a batch frame, against a damaged stream asking for any allocation.
const (
	maxPipeRows  = 1 << 24
	maxPipeBytes = 1 << 34
)

// bytes reads n bytes into field k's buffer.
func (p *pipeReader) bytes(k int, n uint64) ([]byte, error) {
	if n > maxPipeBytes {
		return nil, p.fail(fmt.Errorf("a damaged stream (%d bytes in one frame)", n))
	}
	if uint64(cap(p.bufs[k])) < n {
		p.bufs[k] = make([]byte, n)
	}
	b := p.bufs[k][:n]
	if _, err := io.ReadFull(p.br, b); err != nil {
		return nil, p.fail(err)
	}
	return b, nil
}

// Next returns the next sample: the next row of the current batch, or of the next.
func (p *pipeReader) Next() ([][]byte, error) {
	for p.row >= p.cols.Rows {
		if _, err := p.NextColumns(); err != nil {
			return nil, err
		}
		p.row = 0
		p.at = append(p.at[:0], make([]uint64, len(p.vals))...)
	}
	c := &p.cols
	for k := range p.vals {
		n := uint64(p.hdr.Fields[k].RecordSize)
		if c.Lens[k] != nil {
			n = c.Lens[k][p.row]
		}
		if n > uint64(len(c.Data[k]))-p.at[k] {
			return nil, p.fail(fmt.Errorf("a damaged stream (a batch's values pass its bytes)"))
		}
		p.vals[k] = c.Data[k][p.at[k] : p.at[k]+n]
		p.at[k] += n
	}
	p.row++
	return p.vals, nil
}

// NextColumns returns the next batch.
func (p *pipeReader) NextColumns() (*Columns, error) {
	if err := p.head(); err != nil {
		return nil, err
	}
	return p.columns()
}

// columns reads a batch frame's samples (after head).
func (p *pipeReader) columns() (*Columns, error) {
	c := &p.cols
	if c.Data == nil {
		c.Data, c.Lens, p.lens = make([][]byte, len(p.vals)), make([][]uint64, len(p.vals)), make([][]uint64, len(p.vals))
	}
	variable := func(k int) bool { return p.hdr.Fields[k].Kind == VariableField }
	rows, err := binary.ReadUvarint(p.br)
	if err != nil || rows > maxPipeRows {
		return nil, p.fail(fmt.Errorf("a damaged stream (a batch of %d rows)", rows))
	}
	c.Rows = int(rows)
	for k := range c.Data {
		c.Lens[k] = nil
		if variable(k) {
			if uint64(cap(p.raw)) < 8*rows {
				p.raw = make([]byte, 8*rows)
			}
			raw := p.raw[:8*rows]
			if _, err := io.ReadFull(p.br, raw); err != nil {
				return nil, p.fail(err)
			}
			l := p.lens[k][:0]
			for i := range rows {
				l = append(l, binary.LittleEndian.Uint64(raw[8*i:]))
			}
			p.lens[k], c.Lens[k] = l, l
		}
		n, err := binary.ReadUvarint(p.br)
		if err != nil {
			return nil, p.fail(err)
		}
		if c.Data[k], err = p.bytes(k, n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (p *pipeReader) Close() error {
	if !p.ended {
		p.ended = true
		p.in.Close()
		if p.cmd.Process != nil {
			p.cmd.Process.Kill()
		}
		p.cmd.Wait()
	}
	return nil
}
