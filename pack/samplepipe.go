package pack

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Parquet and Arrow are read with apache/arrow-go, whose packages take 10-17 MiB of resident
// memory in any process that links them, before it reads a byte. The mount's daemon must not
// carry that (its RSS is its cache plus a small constant), so arrow-go is linked only into a
// second binary, blockfs-tables (the same command, built with the tag "tables"), and blockfs
// pack runs it to read a table: the child writes the samples to a pipe in the stream below,
// and the parent's SampleReader reads them from there.
//
// The stream: one line of JSON (pipeHeader), then frames: 'S' uvarint(input bytes read so far)
// and, per field, uvarint(length) and the value's bytes; 'E' at the end; 'X' uvarint(length)
// and an error message, the child's error.

// TablesBinary is the name of the binary that reads Parquet and Arrow.
const TablesBinary = "blockfs-tables"

// pipeHeader is the stream's first line.
type pipeHeader struct {
	Fields []FieldSpec `json:"fields"`
	Total  int64       `json:"total"`
}

// WriteSamples writes r's samples to w as the stream above (blockfs-tables read-samples). An
// error of r's is written into the stream for the reader to return, and returned.
func WriteSamples(w io.Writer, r SampleReader) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	_, total := r.Progress()
	hdr, err := json.Marshal(pipeHeader{Fields: r.Fields(), Total: total})
	if err != nil {
		return err
	}
	bw.Write(append(hdr, '\n'))
	var num [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(num[:binary.PutUvarint(num[:], v)]) }
	for {
		values, err := r.Next()
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
		bw.WriteByte('S')
		uv(uint64(done))
		for _, v := range values {
			uv(uint64(len(v)))
			bw.Write(v)
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
	ended  bool
}

// findTables returns the blockfs-tables binary: $BLOCKFS_TABLES_BIN, else beside this
// program, else on PATH.
func findTables() (string, error) {
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
	return "", fmt.Errorf("reading Parquet and Arrow needs %s beside blockfs (make build makes both; the wheel carries both), or $BLOCKFS_TABLES_BIN", TablesBinary)
}

// openPiped runs blockfs-tables read-samples on the inputs and returns its stream as a
// SampleReader.
func openPiped(format Format, paths, columns []string) (SampleReader, error) {
	bin, err := findTables()
	if err != nil {
		return nil, err
	}
	args := []string{"read-samples", "--format", string(format)}
	if len(columns) > 0 {
		args = append(args, "--columns", strings.Join(columns, ","))
	}
	cmd := exec.Command(bin, append(append(args, "--"), paths...)...)
	p := &pipeReader{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = p.stderr
	if p.in, err = cmd.StdoutPipe(); err != nil {
		return nil, err
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

func (p *pipeReader) Next() ([][]byte, error) {
	if p.ended {
		return nil, io.EOF
	}
	kind, err := p.br.ReadByte()
	if err != nil {
		return nil, p.fail(err)
	}
	switch kind {
	case 'E':
		p.ended = true
		p.in.Close()
		if err := p.cmd.Wait(); err != nil {
			return nil, fmt.Errorf("%s: %v: %s", TablesBinary, err, strings.TrimSpace(p.stderr.String()))
		}
		return nil, io.EOF
	case 'X':
		n, err := binary.ReadUvarint(p.br)
		if err != nil || n > 1<<20 {
			return nil, p.fail(fmt.Errorf("a damaged stream"))
		}
		msg := make([]byte, n)
		io.ReadFull(p.br, msg)
		p.ended = true
		p.in.Close()
		p.cmd.Wait()
		return nil, errors.New(string(msg))
	case 'S':
	default:
		return nil, p.fail(fmt.Errorf("a damaged stream (frame %q)", kind))
	}
	done, err := binary.ReadUvarint(p.br)
	if err != nil {
		return nil, p.fail(err)
	}
	p.done = int64(done)
	for k := range p.vals {
		n, err := binary.ReadUvarint(p.br)
		if err != nil {
			return nil, p.fail(err)
		}
		if uint64(cap(p.bufs[k])) < n {
			p.bufs[k] = make([]byte, n)
		}
		p.vals[k] = p.bufs[k][:n]
		if _, err := io.ReadFull(p.br, p.vals[k]); err != nil {
			return nil, p.fail(err)
		}
	}
	return p.vals, nil
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
