package pack

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
)

// headerPeek is how much of a lines input headerNote reads: enough for two lines of any
// usual CSV.
const headerPeek = 64 << 10

// headerNote returns a note for pack's user when src is a .csv or .tsv file whose first line
// looks like a header (see looksLikeHeader) and --skip-header was not given; "" otherwise.
func headerNote(src string) string {
	sep := byte(0)
	switch strings.ToLower(filepath.Ext(src)) {
	case ".csv":
		sep = ','
	case ".tsv":
		sep = '\t'
	default:
		return ""
	}
	f, err := os.Open(src)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, headerPeek)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF {
		return ""
	}
	lines := bytes.SplitN(buf[:n], []byte{'\n'}, 3)
	if len(lines) < 2 || len(bytes.TrimSpace(lines[1])) == 0 {
		return "" // no second line to compare with
	}
	first := string(bytes.TrimSuffix(lines[0], []byte{'\r'}))
	if !looksLikeHeader(first, string(lines[1]), sep) {
		return ""
	}
	shown := first
	if len(shown) > 60 {
		shown = shown[:57] + "..."
	}
	return fmt.Sprintf("the first line of %s looks like a header (%q), and it was packed as record 0; %s leaves it out", filepath.Base(src), shown, optname.Flag("skip-header"))
}

// looksLikeHeader reports whether first looks like the header of a table whose rows look like
// second, fields separated by sep (CSV quoting understood): the two have as many fields, every
// field of first is a non-empty name, not a number, and some field of second is a number. A
// table of text columns only cannot be told this way and gets no note.
func looksLikeHeader(first, second string, sep byte) bool {
	a, b := splitFields(first, sep), splitFields(second, sep)
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	numbers := 0
	for i := range a {
		if a[i] == "" || isNumber(a[i]) {
			return false
		}
		if isNumber(b[i]) {
			numbers++
		}
	}
	return numbers > 0
}

// splitFields splits one line of a table at sep as a CSV reader does (nil if it cannot), each
// field's spaces trimmed.
func splitFields(line string, sep byte) []string {
	r := csv.NewReader(strings.NewReader(line))
	r.Comma, r.LazyQuotes, r.FieldsPerRecord = rune(sep), true, -1
	fields, err := r.Read()
	if err != nil {
		return nil
	}
	for i, f := range fields {
		fields[i] = strings.TrimSpace(f)
	}
	return fields
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
