package pack

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"
)

// ExpandInputs turns pack --part's INPUT arguments into the inputs, in order: a file or folder
// as given, a glob ('shards/*.npy', quoted so that the shell leaves it) as its matches sorted
// by name, and @LISTFILE as the paths it lists, one a line in file order (blank lines and lines
// starting with '#' skipped; a relative path is relative to the current directory, as on the
// command line). A glob that matches nothing, or a list that lists nothing, is an error.
func ExpandInputs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "@"):
			list, err := readList(a[1:])
			if err != nil {
				return nil, err
			}
			out = append(out, list...)
		case infiles.IsGlob(a):
			if _, err := os.Lstat(a); err == nil {
				out = append(out, a) // a file whose name has a '*' in it
				continue
			}
			m, err := infiles.GlobSorted(a)
			if err != nil {
				return nil, err
			}
			out = append(out, m...)
		default:
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no inputs: give files, quoted globs or @LISTFILE")
	}
	return out, nil
}

// readList reads a list file of input paths, one a line.
func readList(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read the list of inputs: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no inputs", name)
	}
	return out, nil
}

// multiInput reads several inputs of one format as one stream, in order: the records of the
// first, then of the second, and so on. It opens each input as it comes to it (a part of many
// shards holds one open at a time) and requires each to have the first's element (raw: the
// same record size; npy: the same dtype and record shape).
type multiInput struct {
	paths []string
	sizes []int64 // as listed (openListed)
	open  func(path string) (input, element, error)
	el    element
	first string // the input that set el, for errors
	n     int64  // the inputs' bytes (their sizes on disk)
	cur   input
	i     int    // index in paths of cur
	base  uint64 // source id of cur's first record
	id    uint64 // source id of the next record
}

// openMulti opens the first of paths (to learn the element) and returns the stream of all.
// sizes are the inputs' sizes, summed for progress and the pre-shuffle's buckets.
func openMulti(paths []string, sizes []int64, open func(string) (input, element, error)) (*multiInput, error) {
	m := &multiInput{paths: paths, open: open, first: paths[0]}
	for _, s := range sizes {
		m.n += s
	}
	m.sizes = sizes
	cur, el, err := openListed(paths[0], sizes[0], open)
	if err != nil {
		return nil, err
	}
	m.cur, m.el = cur, el
	return m, nil
}

// openListed opens path, an input listed at size bytes, with open, and refuses it when it is
// another size now: its records are not what the listing (and the merge's digest of it) says,
// and an input emptied since would silently become no records.
func openListed(path string, size int64, open func(string) (input, element, error)) (input, element, error) {
	in, el, err := open(path)
	if err != nil {
		return nil, element{}, err
	}
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		in.close()
		now := "gone"
		if err == nil {
			now = fmt.Sprintf("%d bytes", st.Size())
		}
		return nil, element{}, fmt.Errorf("%s is %s, %d bytes when the inputs were listed: did it change while being packed? Pack the part again", path, now, size)
	}
	return in, el, nil
}

// next returns the next record of the current input, moving on to the next input at the end
// of one.
func (m *multiInput) next() (record, error) {
	for {
		rec, err := m.cur.next()
		if err == nil {
			m.id++
			return rec, nil
		}
		if !errors.Is(err, io.EOF) {
			return rec, err
		}
		if more, err := m.advance(); !more || err != nil {
			return record{}, cmp.Or(err, io.EOF)
		}
	}
}

// advance closes the current input and opens the next, if there is one.
func (m *multiInput) advance() (bool, error) {
	if m.i+1 == len(m.paths) {
		return false, nil
	}
	if err := m.cur.close(); err != nil {
		return false, err
	}
	m.cur = nil
	m.i++
	cur, el, err := openListed(m.paths[m.i], m.sizes[m.i], m.open)
	if err != nil {
		return false, err
	}
	m.cur, m.base = cur, m.id
	return true, sameElement(m.paths[m.i], el, m.first, m.el)
}

// multiFixed is inOrder's copy of fixed-size records that fit in the read buffer, for several
// inputs: each input's records go straight into the writer's block buffer (readFixed).
func (p *packer) multiFixed(m *multiInput, total int64) error {
	for {
		fx, ok := m.cur.(*fixedInput)
		if !ok || fx.r == nil {
			return fmt.Errorf("%s: not an input of fixed-size records", m.paths[m.i])
		}
		n := uint64(fx.left)
		if err := p.readFixed(fx, m.id, total); err != nil {
			return err
		}
		m.id += n
		if more, err := m.advance(); !more || err != nil {
			if err != nil {
				return err
			}
			return p.progress(0, total)
		}
	}
}

// sameElement refuses an input whose records are not those of the first input.
func sameElement(path string, el element, first string, want element) error {
	if el.kind == want.kind && el.recordSize == want.recordSize && el.dtype == want.dtype && slices.Equal(el.shape, want.shape) {
		return nil
	}
	return fmt.Errorf("%s holds records of %s, but %s holds records of %s: the inputs of a pack in parts must hold records of one kind", path, el, first, want)
}

// String describes an element for errors: "fixed 16 B <f4 [4]".
func (el element) String() string {
	s := string(el.kind)
	if el.kind != "" && el.recordSize > 0 {
		s += fmt.Sprintf(" %d B", el.recordSize)
	}
	if el.dtype != "" {
		s += fmt.Sprintf(" %s %v", el.dtype, el.shape)
	}
	return s
}

func (m *multiInput) name() string { return m.cur.name() }

// describe names the record with source id id, which is in the current input.
func (m *multiInput) describe(id uint64) string {
	if m.cur == nil || id < m.base {
		return fmt.Sprintf("record %d of the part", id)
	}
	return m.cur.describe(id - m.base)
}

func (m *multiInput) size() int64 { return m.n }

func (m *multiInput) close() error {
	if m.cur == nil {
		return nil
	}
	err := m.cur.close()
	m.cur = nil
	return err
}
