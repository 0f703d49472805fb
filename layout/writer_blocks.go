package layout

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/crc32c"
)

// flush closes the block being filled, if any: it appends its entry to the manifest and hands
// its files to the background writer, then continues in a recycled buffer. Once the background
// writer has failed, flush queues nothing and returns its first error, leaving the block as is.
func (w *Writer) flush() error {
	if len(w.ids) == 0 {
		return nil
	}
	return w.queueBlock(fileJob{data: w.data, size: int64(len(w.data)), recycle: true})
}

// queueBlock closes the block of the records in w.ids (and w.offsets), whose data file is
// written from data: w.data for flush, a reader for appendAlone. It appends the block's entry
// to the manifest and hands its files to the background writer. Once the background writer
// has failed, it queues nothing and returns its first error.
func (w *Writer) queueBlock(data fileJob) error {
	if err := w.bg.Err(); err != nil {
		return err
	}
	i := len(w.m.Blocks)
	e := BlockEntry{
		File:    fmt.Sprintf("blocks/%06d.bin", i),
		Records: uint64(len(w.ids)),
		Bytes:   uint64(data.size),
	}
	// The background writer computes the data file's CRC32C; Commit copies it into the
	// manifest after bg.Stop.
	data.path, data.block = filepath.Join(w.tmp, e.File), i
	jobs := []fileJob{data}
	if w.opt.IDs {
		e.IDsFile = fmt.Sprintf("blocks/%06d.ids", i)
		buf := u64bytes(w.ids)
		e.IDsCRC32C = CRC32C(buf)
		jobs = append(jobs, fileJob{path: filepath.Join(w.tmp, e.IDsFile), data: buf})
	}
	if w.opt.Kind == Variable {
		e.OffsetsFile = fmt.Sprintf("blocks/%06d.off", i)
		buf := u64bytes(w.offsets)
		e.OffsetsCRC32C = CRC32C(buf)
		jobs = append(jobs, fileJob{path: filepath.Join(w.tmp, e.OffsetsFile), data: buf})
		w.offsets = w.offsets[:1]
	}
	w.m.Blocks = append(w.m.Blocks, e)
	w.m.Records += e.Records
	w.m.Bytes += e.Bytes
	w.startBackground()
	w.bg.Put(jobs) // waits while one block is being written and another is queued
	if data.recycle {
		select {
		case b := <-w.free:
			w.data = b[:0]
		default:
			w.data = nil
		}
	}
	w.ids = w.ids[:0]
	return nil
}

// fileJob is one file for the background writer to create, from data or, for a block's data
// file, from src.
type fileJob struct {
	path    string
	data    []byte
	recycle bool // data is block's data buffer: checksum it, then give it back to the writer
	block   int  // for a block's data file (recycle or src): the block's number
	// A data file copied from src: size bytes, checksummed on the way; done is closed once
	// the copy is over (or skipped after an earlier error).
	src  io.Reader
	size int64
	done chan struct{}
}

// startBackground starts the goroutine that writes block files, so that reading the input and
// writing blocks overlap. At most three block buffers exist: one being filled, one queued, one
// being written.
func (w *Writer) startBackground() {
	if w.bg.Running() {
		return
	}
	w.free = make(chan []byte, 3)
	w.bg.Start(1, w.writeBlock)
}

// writeBlock writes the files of one block. After the first error it writes nothing more but
// still checksums and recycles each block buffer, so flush never waits in vain. Background
// writer only.
func (w *Writer) writeBlock(jobs []fileJob) {
	for _, j := range jobs {
		if j.src != nil {
			w.copyBlock(j)
			continue
		}
		if j.recycle {
			w.writeData(j)
			w.free <- j.data
			continue
		}
		if w.bg.Err() == nil {
			if err := writeFile(j.path, j.data); err != nil {
				w.bg.Set(err)
			}
		}
	}
	w.blockDone(jobs)
}

// writeData writes a block's data file from j.data (compressed with WriterOptions.Compress)
// unless the writer has failed already, and records its checksum. Background writer only.
func (w *Writer) writeData(j fileJob) {
	var crc uint32
	switch {
	case w.bg.Err() != nil:
	case w.comp != nil:
		var err error
		if crc, err = w.comp.writeData(j.path, j.block, j.data); err != nil {
			w.bg.Set(err)
		}
	default:
		crc = CRC32C(j.data)
		if err := writeFile(j.path, j.data); err != nil {
			w.bg.Set(err)
		}
	}
	w.setCRC(j.block, crc)
}

// setCRC records block's data file's CRC32C. Background writer only.
func (w *Writer) setCRC(block int, crc uint32) {
	for len(w.dataCRC) <= block {
		w.dataCRC = append(w.dataCRC, 0)
	}
	w.dataCRC[block] = crc
}

// blockDone calls opt.BlockDone with the files of one block, all written, unless the writer
// has failed. Background writer only.
func (w *Writer) blockDone(jobs []fileJob) {
	if w.opt.BlockDone == nil || w.bg.Err() != nil {
		return
	}
	files := make([]string, len(jobs))
	for i, j := range jobs {
		rel, err := filepath.Rel(w.tmp, j.path)
		if err != nil {
			w.bg.Set(err)
			return
		}
		files[i] = filepath.ToSlash(rel)
	}
	if err := w.opt.BlockDone(w.tmp, files); err != nil {
		w.bg.Set(err)
	}
}

// copyBlock writes a block's data file from j.src (unless the writer has failed already),
// records its checksum and closes j.done. Background writer only.
func (w *Writer) copyBlock(j fileJob) {
	defer close(j.done)
	var crc uint32
	if w.bg.Err() == nil {
		var err error
		if w.comp != nil {
			crc, err = w.comp.copyData(j.path, j.block, j.src, j.size)
		} else {
			crc, err = writeFileFrom(j.path, j.src, j.size)
		}
		if err != nil {
			w.bg.Set(err)
		}
	}
	w.setCRC(j.block, crc)
}

func u64bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// writeFile creates path with data, without syncing (Commit syncs the whole filesystem once).
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFileFrom creates path with n bytes read from r, a buffer at a time, and returns their
// CRC32C. Without syncing, like writeFile.
func writeFileFrom(path string, r io.Reader, n int64) (uint32, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	h := crc32c.New()
	// Neither side offers ReadFrom or WriteTo, so CopyBuffer uses buf.
	got, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(r, n), make([]byte, min(n, 1<<20)+1))
	if err == nil && got < n {
		err = fmt.Errorf("writing %s: the record ended after %d of its %d bytes: %w", path, got, n, io.ErrUnexpectedEOF)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return h.Sum32(), err
}
