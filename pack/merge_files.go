package pack

import (
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/layout"
)

// IDsDir is the folder of a merged dataset that holds the ids of pre-shuffled parts, offset
// to the whole dataset's numbering: ids/part-I/NNNNNN.ids for block NNNNNN of part I.
const IDsDir = "ids"

// offsetIDs reads block i's ids file of part p, b, checks it, and writes it with base added to
// each id as out/ids/part-I/NNNNNN.ids. It returns the new file's path in the dataset and its
// CRC32C.
func offsetIDs(out string, p *mergePart, i int, b layout.BlockEntry, base uint64) (string, uint32, error) {
	src := filepath.Join(out, PartsDir, p.pm.Dataset, filepath.FromSlash(b.IDsFile))
	data, err := os.ReadFile(src)
	if err != nil {
		return "", 0, fmt.Errorf("%s's dataset does not check: block %d: %v; pack the part again", p.file, i, unwrap(err))
	}
	if err := crc32c.Check(layout.CRC32C(data), b.IDsCRC32C); err != nil || uint64(len(data)) != 8*b.Records {
		return "", 0, fmt.Errorf("%s's dataset does not check: block %d: %s is damaged; pack the part again", p.file, i, b.IDsFile)
	}
	for k := 0; k < len(data); k += 8 {
		id := binary.LittleEndian.Uint64(data[k:])
		if id >= p.ds.Records {
			return "", 0, fmt.Errorf("%s's dataset does not check: block %d: id %d of %d records; pack the part again", p.file, i, id, p.ds.Records)
		}
		binary.LittleEndian.PutUint64(data[k:], id+base)
	}
	rel := path.Join(IDsDir, fmt.Sprintf("part-%d", p.pm.Part), fmt.Sprintf("%06d.ids", i))
	dst := filepath.Join(out, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, err
	}
	if err := writeAtomic(dst, data); err != nil {
		return "", 0, err
	}
	return rel, layout.CRC32C(data), nil
}

// mergedNames is the names file of a merged pack of a folder: the parts' names in part order.
const mergedNames = "names.txt"

// mergeNames writes the parts' names files, in part order, as out/names.txt and returns its
// entry.
func mergeNames(out string, parts []*mergePart) (*layout.NamesEntry, error) {
	dst := filepath.Join(out, mergedNames)
	f, err := os.CreateTemp(out, "."+mergedNames+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	e := &layout.NamesEntry{File: mergedNames}
	for _, p := range parts {
		if p.ds == nil {
			continue
		}
		if p.ds.Names == nil {
			return nil, fmt.Errorf("%s's dataset has no names; pack the part again", p.file)
		}
		data, err := os.ReadFile(filepath.Join(out, PartsDir, p.pm.Dataset, filepath.FromSlash(p.ds.Names.File)))
		if err != nil || crc32c.Check(layout.CRC32C(data), p.ds.Names.CRC32C) != nil || uint64(len(data)) != p.ds.Names.Bytes {
			return nil, fmt.Errorf("%s's dataset does not check: its names file is missing or damaged; pack the part again", p.file)
		}
		if _, err := f.Write(data); err != nil {
			return nil, err
		}
		e.CRC32C = crc32c.Update(e.CRC32C, data)
		e.Bytes += uint64(len(data))
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return nil, err
	}
	return e, nil
}

// syncFS flushes everything written to the filesystem holding dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
