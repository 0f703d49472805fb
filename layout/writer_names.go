package layout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blockfs/blockfs/internal/crc32c"
)

// namesName is the file the writer keeps record names in.
const namesName = "names.txt"

// AddName records the source name of the next source id (names are given in source order,
// independently of Append's order). A name may not contain a newline.
func (w *Writer) AddName(name string) error {
	if w.names == nil {
		return errors.New("writer does not keep names")
	}
	if strings.ContainsAny(name, "\n\x00") {
		return fmt.Errorf("name %q contains a newline or NUL, which the names file cannot hold", name)
	}
	w.namesBuf = append(append(w.namesBuf, name...), '\n')
	w.namesCount++
	if len(w.namesBuf) >= 1<<20 {
		return w.flushNames()
	}
	return nil
}

func (w *Writer) flushNames() error {
	w.namesCRC = crc32c.Update(w.namesCRC, w.namesBuf)
	w.namesBytes += uint64(len(w.namesBuf))
	_, err := w.names.Write(w.namesBuf)
	w.namesBuf = w.namesBuf[:0]
	return err
}

// closeNames writes out and closes the names file, if the writer keeps names, and enters it in
// the manifest. It fails unless AddName was called once per record.
func (w *Writer) closeNames() error {
	if w.names == nil {
		return nil
	}
	err := w.flushNames()
	if cerr := w.names.Close(); err == nil {
		err = cerr
	}
	if err == nil && w.namesCount != w.m.Records {
		err = fmt.Errorf("%d names for %d records", w.namesCount, w.m.Records)
	}
	if err != nil {
		return err
	}
	w.m.Names = &NamesEntry{File: namesName, Bytes: w.namesBytes, CRC32C: w.namesCRC}
	return nil
}
