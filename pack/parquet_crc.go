//go:build tables

package pack

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Parquet page checksums. A page header may carry a CRC-32 (IEEE, as zlib's) of the page's
// body as stored (after the header, compressed if the chunk is): Arrow's C++ writer (pyarrow's
// write_page_checksum) and parquet-mr (parquet.page.write-checksum.enabled) write them when
// asked. arrow-go (v18.8.0) neither writes nor checks them, so pack checks them itself: before
// reading a file, it walks the pages of each chosen column chunk, reading each header, and
// computes the CRC of every page whose header has one. A file whose pages have none costs a
// read of each page's header; one with CRCs, a second read of the chosen columns (from the
// page cache, mostly). A page whose body fails its CRC refuses the file, naming the row group,
// the column and the page's offset. A header this walk cannot parse is left to arrow-go's
// reader, which reads the same bytes and refuses them if they are damaged.

// pageHeaderMax bounds a page header (statistics of long binary values make big ones), as
// arrow-go bounds the headers it reads.
const pageHeaderMax = 16 << 20

// crcStats counts the pages a check walked and the pages with a CRC among them.
type crcStats struct{ pages, checked int }

// checkPageCRCs checks the CRC of every page that has one in the column chunks of leaves (the
// Parquet columns to read) of every row group of the file at path, whose footer is md.
func checkPageCRCs(path string, md *metadata.FileMetaData, leaves []int) (crcStats, error) {
	var st crcStats
	f, err := openInputFile(path)
	if err != nil {
		return st, fmt.Errorf("cannot read the input: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for g := 0; g < md.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		for _, l := range leaves {
			cc, err := rg.ColumnChunk(l)
			if err != nil {
				return st, fmt.Errorf("%s: row group %d: %w", path, g, err)
			}
			start := cc.DataPageOffset()
			if d := cc.DictionaryPageOffset(); cc.HasDictionaryPage() && d > 0 && d < start {
				start = d
			}
			err = checkChunkCRCs(f, start, start+cc.TotalCompressedSize(), buf, &st)
			var bad *pageCRCError
			if errors.As(err, &bad) {
				return st, fmt.Errorf("%s: row group %d, column %s: the page at byte %d fails its CRC (stored %08x, its bytes give %08x): the file is damaged; restore it or write it again",
					path, g, cc.PathInSchema(), bad.at, bad.stored, bad.computed)
			}
			if err != nil {
				return st, fmt.Errorf("cannot read %s: %w", path, err)
			}
		}
	}
	return st, nil
}

// pageCRCError is a page whose body does not give its header's CRC.
type pageCRCError struct {
	at               int64
	stored, computed uint32
}

func (e *pageCRCError) Error() string { return fmt.Sprintf("page at byte %d fails its CRC", e.at) }

// checkChunkCRCs walks the pages of the column chunk at [pos, end) of r, checking each CRC a
// header has. buf is a scratch buffer. It stops quietly at a header it cannot parse.
func checkChunkCRCs(r io.ReaderAt, pos, end int64, buf []byte, st *crcStats) error {
	for pos < end {
		h, err := readPageHeader(r, pos, end)
		if err != nil {
			return err
		}
		if h == nil {
			return nil // not a header this walk can read: arrow-go's reader says what is wrong
		}
		body := pos + int64(h.size)
		if h.compressed < 0 || body+int64(h.compressed) > end {
			return nil
		}
		st.pages++
		if h.hasCRC {
			st.checked++
			sum, err := crcOf(r, body, int64(h.compressed), buf)
			if err != nil {
				return err
			}
			if sum != h.crc {
				return &pageCRCError{at: pos, stored: h.crc, computed: sum}
			}
		}
		pos = body + int64(h.compressed)
	}
	return nil
}

// crcOf returns the CRC-32 (IEEE) of n bytes of r at off, read through buf.
func crcOf(r io.ReaderAt, off, n int64, buf []byte) (uint32, error) {
	var sum uint32
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := r.ReadAt(buf[:k], off); err != nil {
			return 0, err
		}
		sum = crc32.Update(sum, crc32.IEEETable, buf[:k])
		off, n = off+k, n-k
	}
	return sum, nil
}

// readPageHeader reads the page header at pos (before end) of r: nil if it does not parse.
func readPageHeader(r io.ReaderAt, pos, end int64) (*pageHeader, error) {
	for n := int64(1 << 10); ; n *= 16 {
		n = min(n, end-pos, pageHeaderMax)
		b := make([]byte, n)
		if _, err := r.ReadAt(b, pos); err != nil && err != io.EOF {
			return nil, err
		}
		h, err := parsePageHeader(b)
		if err == nil {
			return &h, nil
		}
		if err != errShort || n == end-pos || n == pageHeaderMax {
			return nil, nil
		}
	}
}
