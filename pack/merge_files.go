package pack

import (
	"encoding/binary"
	"fmt"
	"path"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// IDsDir is the folder of a merged dataset that holds the ids of pre-shuffled parts, offset
// to the whole dataset's numbering: ids/part-I/NNNNNN.ids for block NNNNNN of part I.
const IDsDir = "ids"

// offsetIDs reads block i's ids file of part p, b, checks it, and writes it with base added to
// each id as out/ids/part-I/NNNNNN.ids. It returns the new file's path in the dataset and its
// CRC32C.
func offsetIDs(out partsOut, p *mergePart, i int, b layout.BlockEntry, base uint64) (string, uint32, error) {
	data, err := out.read(path.Join(PartsDir, p.pm.Dataset, b.IDsFile))
	if err != nil {
		return "", 0, fmt.Errorf("%s's dataset does not check: block %d: %v; pack the part again", p.file, i, unwrap(err))
	}
	if err := source.CheckCRC32C(layout.CRC32C(data), b.IDsCRC32C); err != nil || uint64(len(data)) != 8*b.Records {
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
	if err := out.write(rel, data); err != nil {
		return "", 0, err
	}
	return rel, layout.CRC32C(data), nil
}

// mergedNames is the names file of a merged pack of a folder: the parts' names in part order.
const mergedNames = "names.txt"

// mergeNames writes the parts' names files, in part order, as out/names.txt and returns its
// entry.
func mergeNames(out partsOut, parts []*mergePart) (*layout.NamesEntry, error) {
	var all []byte
	for _, p := range parts {
		if p.ds == nil {
			continue
		}
		if p.ds.Names == nil {
			return nil, fmt.Errorf("%s's dataset has no names; pack the part again", p.file)
		}
		data, err := out.read(path.Join(PartsDir, p.pm.Dataset, p.ds.Names.File))
		if err != nil || source.CheckCRC32C(layout.CRC32C(data), p.ds.Names.CRC32C) != nil || uint64(len(data)) != p.ds.Names.Bytes {
			return nil, fmt.Errorf("%s's dataset does not check: its names file is missing or damaged; pack the part again", p.file)
		}
		all = append(all, data...)
	}
	if err := out.write(mergedNames, all); err != nil {
		return nil, err
	}
	return &layout.NamesEntry{File: mergedNames, Bytes: uint64(len(all)), CRC32C: layout.CRC32C(all)}, nil
}
