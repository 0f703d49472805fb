//go:build tables

package pack

import (
	"encoding/binary"
	"errors"
)

// A Parquet page header is a Thrift struct in the compact protocol. parsePageHeader reads the
// few fields the CRC check needs and skips the others, with no dependency on arrow-go's
// internal Thrift code: a field header byte is the field id's delta from the previous one (or
// 0 and the id as a zigzag varint) and the type; integers are zigzag varints.

// pageHeader is what the CRC check needs of a page header.
type pageHeader struct {
	size       int    // the header's bytes
	compressed int32  // compressed_page_size (field 3): the body's bytes as stored
	crc        uint32 // crc (field 4), if hasCRC
	hasCRC     bool
}

var (
	errShort  = errors.New("page header: out of bytes")
	errHeader = errors.New("page header: not Thrift's compact protocol")
)

// Thrift compact protocol types.
const (
	tcStop, tcTrue, tcFalse, tcByte, tcI16, tcI32, tcI64, tcDouble = 0, 1, 2, 3, 4, 5, 6, 7
	tcBinary, tcList, tcSet, tcMap, tcStruct                       = 8, 9, 10, 11, 12
)

// maxThriftDepth bounds the nesting a header's skipped fields may have.
const maxThriftDepth = 32

// compactReader reads the compact protocol from b.
type compactReader struct {
	b   []byte
	pos int
}

func (r *compactReader) byte1() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errShort
	}
	r.pos++
	return r.b[r.pos-1], nil
}

func (r *compactReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.pos:])
	if n == 0 {
		return 0, errShort
	}
	if n < 0 {
		return 0, errHeader
	}
	r.pos += n
	return v, nil
}

func (r *compactReader) varint() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// skipN skips n bytes.
func (r *compactReader) skipN(n uint64) error {
	if n > uint64(len(r.b)-r.pos) {
		return errShort
	}
	r.pos += int(n)
	return nil
}

// skip skips a value of type t.
func (r *compactReader) skip(t byte, depth int) error {
	if depth > maxThriftDepth {
		return errHeader
	}
	switch t {
	case tcTrue, tcFalse:
		return nil
	case tcByte:
		return r.skipN(1)
	case tcDouble:
		return r.skipN(8)
	case tcI16, tcI32, tcI64:
		_, err := r.uvarint()
		return err
	case tcBinary:
		n, err := r.uvarint()
		if err != nil {
			return err
		}
		return r.skipN(n)
	case tcList, tcSet:
		h, err := r.byte1()
		if err != nil {
			return err
		}
		n, et := uint64(h>>4), h&0x0f
		if n == 15 {
			if n, err = r.uvarint(); err != nil {
				return err
			}
		}
		return r.skipElems(n, []byte{et}, depth)
	case tcMap:
		n, err := r.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := r.byte1()
		if err != nil {
			return err
		}
		return r.skipElems(n, []byte{kv >> 4, kv & 0x0f}, depth)
	case tcStruct:
		return r.structFields(depth+1, func(byte, int16) (bool, error) { return false, nil })
	}
	return errHeader
}

// skipElems skips n elements of a list, set or map, each a value of every type of types.
func (r *compactReader) skipElems(n uint64, types []byte, depth int) error {
	if n > uint64(len(r.b)-r.pos) { // every element takes a byte at least
		return errShort
	}
	for range n {
		for _, t := range types {
			if t == tcTrue || t == tcFalse { // a collection's booleans are a byte each
				t = tcByte
			}
			if err := r.skip(t, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// structFields reads a struct's fields up to its stop, calling field with each field's type
// and id: field reads the value and returns true, or returns false to have it skipped.
func (r *compactReader) structFields(depth int, field func(t byte, id int16) (bool, error)) error {
	var id int16
	for {
		h, err := r.byte1()
		if err != nil {
			return err
		}
		t := h & 0x0f
		if t == tcStop {
			return nil
		}
		if d := int16(h >> 4); d != 0 {
			id += d
		} else {
			v, err := r.varint()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		read, err := field(t, id)
		if err == nil && !read {
			err = r.skip(t, depth)
		}
		if err != nil {
			return err
		}
	}
}

// parsePageHeader parses the page header at the start of b; errShort if b ends first.
func parsePageHeader(b []byte) (pageHeader, error) {
	r := &compactReader{b: b}
	var h pageHeader
	var sized bool
	err := r.structFields(0, func(t byte, id int16) (bool, error) {
		if t != tcI32 || (id != 3 && id != 4) {
			return false, nil
		}
		v, err := r.varint()
		switch {
		case err != nil:
		case id == 3:
			h.compressed, sized = int32(v), true
		default:
			h.crc, h.hasCRC = uint32(int32(v)), true
		}
		return true, err
	})
	if err == nil && !sized {
		err = errHeader
	}
	h.size = r.pos
	return h, err
}
