package pack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/fsync"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
)

// An index in parts (docs/FORMAT.md, "Shards in place"): blockfs index --part I/N SHARDS OUT
// indexes part I's share of the shards (Part.Share of them, in their sorted order) into
// OUT/parts/part-I-of-N, an index of its own; blockfs index --merge OUT, once every part is
// there, writes OUT's index: the parts' shards and blocks one after another, each field's
// files concatenated, as one index of all the shards would be.

// IndexPart indexes part p's share of shards into out/parts/part-I-of-N (made again if there).
func IndexPart(ctx context.Context, format Format, source string, shards []infiles.Shard, out string, p Part, opt IndexOptions) (*layout.ShardsIndex, error) {
	lo, hi := p.Share(len(shards))
	if lo == hi {
		return nil, fmt.Errorf("part %d of %d gets none of the %d shards: index in at most %d parts", p.Index, p.Count, len(shards), len(shards))
	}
	for _, sh := range shards {
		opt.Total += sh.Size
	}
	opt.Of = &layout.IndexWhole{Shards: len(shards), Bytes: opt.Total}
	if err := os.MkdirAll(filepath.Join(out, PartsDir), 0o755); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", out, unwrap(err))
	}
	opt.Force = true // a part run again replaces its index
	return Index(ctx, format, source, shards[lo:hi], filepath.Join(out, PartsDir, p.Name()), opt)
}

// MergeIndex writes the index at out of its parts (out/parts/part-I-of-N, every I of one N).
func MergeIndex(out string, force bool) (*layout.ShardsIndex, error) {
	unlock, err := lockMerge(out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if layout.IsShardsIndex(out) && !force {
		return nil, fmt.Errorf("%s holds a merged index already; give %s to merge again", out, optname.Flag("force"))
	}
	parts, err := readIndexParts(out)
	if err != nil {
		return nil, err
	}
	m := &layout.ShardsIndex{Format: layout.IndexFormat, Version: layout.IndexVersion, Input: parts[0].Input,
		Source: parts[0].Source, FillMissing: parts[0].FillMissing}
	if err := sameWhole(out, parts); err != nil {
		return nil, err
	}
	for i, ix := range parts {
		if ix.Input != m.Input || ix.Source != m.Source || ix.FillMissing != m.FillMissing {
			return nil, fmt.Errorf("%s: part %d of %d indexes other shards (%s at %s) than part 0 (%s at %s), or with other options: index every part with the same arguments",
				out, i, len(parts), ix.Input, ix.Source, m.Input, m.Source)
		}
		for _, f := range ix.Fields {
			if !slices.Contains(m.Fields, f) {
				m.Fields = append(m.Fields, f)
			}
		}
	}
	var total int64 // the shards' bytes, from which one index chooses the fields it stores
	for _, ix := range parts {
		for _, sh := range ix.Shards {
			total += sh.Size
		}
	}
	for _, f := range m.Fields {
		// Stored as one index would store it: its values at most 1/storeShare of the shards'
		// bytes (each part only saw its own), and every part that has it has its values.
		stored, bytes := true, uint64(0)
		for i, ix := range parts {
			k := slices.Index(ix.Fields, f)
			if k < 0 && !m.FillMissing {
				return nil, fmt.Errorf("%s: part %d of %d has no field %q, which other parts have: index with %s to give its samples an empty %s, or fix the data",
					out, i, len(parts), f, optname.Flag("fill-missing"), f)
			}
			if k < 0 {
				continue
			}
			stored = stored && slices.Contains(ix.Stored, f)
			for _, b := range ix.Blocks {
				bytes += b.Bytes[k]
			}
		}
		if stored && bytes <= uint64(total/storeShare) {
			m.Stored = append(m.Stored, f)
		}
	}
	return m, writeMerged(out, m, parts)
}

// sameWhole checks that every part was made over the same shards: the same count and bytes of
// them all, the parts' shards as many and each in one part. A shard added, removed or changed
// between the parts' runs deals the shards otherwise: some would be indexed twice, or not at
// all.
func sameWhole(out string, parts []*layout.ShardsIndex) error {
	seen := map[string]int{}
	n := 0
	for i, ix := range parts {
		if ix.Of == nil || *ix.Of != *parts[0].Of {
			return fmt.Errorf("%s: part %d of %d was indexed over other shards than part 0 (%s, against %s): the shards changed between the parts' runs; index every part again",
				out, i, len(parts), wholeText(ix.Of), wholeText(parts[0].Of))
		}
		for _, sh := range ix.Shards {
			if j, ok := seen[sh.Name]; ok {
				return fmt.Errorf("%s: shard %s is in parts %d and %d: the shards changed between the parts' runs; index every part again", out, sh.Name, j, i)
			}
			seen[sh.Name] = i
		}
		n += len(ix.Shards)
	}
	if n != parts[0].Of.Shards {
		return fmt.Errorf("%s: the parts hold %d shards of the %d they were indexed over: the shards changed between the parts' runs; index every part again", out, n, parts[0].Of.Shards)
	}
	return nil
}

// wholeText says what a part was indexed over.
func wholeText(w *layout.IndexWhole) string {
	if w == nil {
		return "not said: an index from an older blockfs"
	}
	return fmt.Sprintf("%d shards of %d bytes", w.Shards, w.Bytes)
}

// readIndexParts reads the part indexes under out/parts, in part order, refusing a missing
// part or parts of several counts.
func readIndexParts(out string) ([]*layout.ShardsIndex, error) {
	ents, err := os.ReadDir(filepath.Join(out, PartsDir))
	if err != nil {
		return nil, fmt.Errorf("%s has no parts (%v): run blockfs index %s I/N SHARDS %s for each part first", out, unwrap(err), optname.Flag("part"), out)
	}
	n := 0
	found := map[int]string{}
	for _, e := range ents {
		p, ok, err := partName(e.Name(), "")
		if !ok {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(out, PartsDir), err)
		}
		i, c := p.Index, p.Count
		if n != 0 && c != n {
			return nil, fmt.Errorf("%s: parts of %d and of %d: remove the parts of the other run (%s)", out, n, c, e.Name())
		}
		n, found[i] = c, filepath.Join(out, PartsDir, e.Name())
	}
	if n == 0 {
		return nil, fmt.Errorf("%s has no parts: run blockfs index %s I/N SHARDS %s for each part first", out, optname.Flag("part"), out)
	}
	parts := make([]*layout.ShardsIndex, n)
	for i := range n {
		dir, ok := found[i]
		if !ok || !layout.IsShardsIndex(dir) {
			return nil, fmt.Errorf("%s: part %d of %d is missing: run blockfs index %s %d/%d with the same shards", out, i, n, optname.Flag("part"), i, n)
		}
		if parts[i], err = layout.ReadShardsIndex(dir); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// writeMerged writes m's files from the parts' into out, the manifest last: each field's
// offsets, members (and values, for a field every part stores) the parts' one after another;
// a part without the field (its samples lack it: --fill-missing) gives empty values.
func writeMerged(out string, m *layout.ShardsIndex, parts []*layout.ShardsIndex) error {
	// What a merge killed before it could clean up (SIGTERM, SIGKILL) left: a merge of one OUT
	// at a time is all that makes sense, so none of these is another's.
	if ents, err := os.ReadDir(out); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".merge-") {
				os.RemoveAll(filepath.Join(out, e.Name()))
			}
		}
	}
	tmp, err := os.MkdirTemp(out, ".merge-")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", out, unwrap(err))
	}
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(filepath.Join(tmp, "fields"), 0o755); err != nil {
		return err
	}
	for _, f := range m.Fields {
		if err := mergeIndexField(out, tmp, f, slices.Contains(m.Stored, f), parts); err != nil {
			return err
		}
	}
	for _, ix := range parts {
		first := len(m.Shards)
		m.Shards = append(m.Shards, ix.Shards...)
		m.Records += ix.Records
		for _, b := range ix.Blocks {
			nb := layout.IndexBlock{Shard: first + b.Shard, Records: b.Records}
			for _, f := range m.Fields {
				if k := slices.Index(ix.Fields, f); k >= 0 {
					nb.Bytes, nb.CRC32C = append(nb.Bytes, b.Bytes[k]), append(nb.CRC32C, b.CRC32C[k])
					nb.OffsetsCRC32C = append(nb.OffsetsCRC32C, b.OffsetsCRC32C[k])
					nb.MembersCRC32C = append(nb.MembersCRC32C, b.MembersCRC32C[k])
					continue
				}
				nb.Bytes, nb.CRC32C = append(nb.Bytes, 0), append(nb.CRC32C, 0)
				nb.OffsetsCRC32C = append(nb.OffsetsCRC32C, zerosCRC(8*(b.Records+1)))
				nb.MembersCRC32C = append(nb.MembersCRC32C, zerosCRC(8*b.Records))
			}
			if len(m.Blocks) == layout.MaxBlocks {
				return fmt.Errorf("%s: the parts make more than %d blocks: index with a larger %s", out, layout.MaxBlocks, optname.Flag("block-size"))
			}
			m.Blocks = append(m.Blocks, nb)
		}
	}
	if err := m.Validate(out); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, layout.IndexName), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	if err := fsync.FS(tmp); err != nil {
		return err
	}
	os.Remove(filepath.Join(out, layout.IndexName)) // the old manifest first: never one over new files
	if err := os.RemoveAll(filepath.Join(out, "fields")); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(tmp, "fields"), filepath.Join(out, "fields")); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(tmp, layout.IndexName), filepath.Join(out, layout.IndexName)); err != nil {
		return err
	}
	return fsync.Dir(out)
}

// mergeIndexField writes field f's files in tmp from the parts' under out.
func mergeIndexField(out, tmp, f string, stored bool, parts []*layout.ShardsIndex) error {
	kinds := []func(string) string{layout.IndexOffsetsFile, layout.IndexMembersFile}
	if stored {
		kinds = append(kinds, layout.IndexValuesFile)
	}
	for _, kind := range kinds {
		dst, err := os.Create(filepath.Join(tmp, filepath.FromSlash(kind(f))))
		if err != nil {
			return err
		}
		for i, ix := range parts {
			if k := slices.Index(ix.Fields, f); k >= 0 {
				err = copyPartFile(dst, out, filepath.Join(PartsDir, Part{i, len(parts)}.Name(), filepath.FromSlash(kind(f))), partFileSize(ix, k, kind(f), f))
			} else { // empty values: zero offsets (records + blocks), starts (records), no values
				n := partFileSize(ix, -1, kind(f), f)
				_, err = io.CopyN(dst, zeroReader{}, n)
			}
			if err != nil {
				dst.Close()
				return fmt.Errorf("merging %s: %w", kind(f), unwrap(err))
			}
		}
		if err := dst.Close(); err != nil {
			return err
		}
	}
	return nil
}

// partFileSize is the size of file (field f's offsets, members or values; f is the part's
// field k; -1: a field the part lacks, whose values are empty) in the part indexed by ix: 8
// bytes a record and one more a block, 8 a record, and the values' bytes.
func partFileSize(ix *layout.ShardsIndex, k int, file, f string) int64 {
	switch file {
	case layout.IndexOffsetsFile(f):
		return 8 * int64(ix.Records+uint64(len(ix.Blocks)))
	case layout.IndexMembersFile(f):
		return 8 * int64(ix.Records)
	}
	var n int64
	for _, b := range ix.Blocks {
		if k >= 0 { // a field the part lacks has no values
			n += int64(b.Bytes[k])
		}
	}
	return n
}

// copyPartFile appends the part's file rel (under out) to dst: a file a part's run wrote, so a
// regular file inside out (no symlink leading elsewhere: its bytes would become out's file),
// of exactly size bytes (what the part's index says), opened without waiting (a FIFO) and
// read no further than size.
func copyPartFile(dst *os.File, out, rel string, size int64) error {
	path := filepath.Join(out, rel)
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%s: %v; index the part again", path, unwrap(err))
	}
	root, err := filepath.EvalSymlinks(out)
	if err != nil {
		return err
	}
	if !userfile.Within(root, real) {
		return fmt.Errorf("%s leads outside %s (to %s): a part's files are its own; index the part again", path, out, real)
	}
	src, n, err := userfile.Open(real, size)
	if err != nil {
		return fmt.Errorf("%s: %v; index the part again", path, unwrap(err))
	}
	defer src.Close()
	// What was opened, not what the path led to a moment before: a directory of OUT swapped
	// for a symlink between the two would lead the open elsewhere.
	if opened, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", src.Fd())); err == nil {
		if !userfile.Within(root, opened) {
			return fmt.Errorf("%s leads outside %s (to %s): a part's files are its own; index the part again", path, out, opened)
		}
	}
	if n != size {
		return fmt.Errorf("%s holds %d bytes, not the %d its part's index says; index the part again", path, n, size)
	}
	got, err := io.Copy(dst, userfile.Reader(src, size))
	if err == nil && got != size {
		err = fmt.Errorf("%s: read %d of its %d bytes (it changed while merged); index the part again", path, got, size)
	}
	return err
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// zerosCRC returns the CRC32C of n zero bytes.
func zerosCRC(n uint64) uint32 {
	var buf [4096]byte
	crc := uint32(0)
	for n > 0 {
		k := min(n, uint64(len(buf)))
		crc = crc32c.Update(crc, buf[:k])
		n -= k
	}
	return crc
}
