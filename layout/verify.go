package layout

import (
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
)

// ExpectedCRC returns the CRC32C the manifest gives for file id, and whether it gives one
// (flat datasets have none).
func (d *Dataset) ExpectedCRC(id FileID) (uint32, bool) {
	if d.flat != nil {
		return 0, false
	}
	b := int(id / numRoles)
	if b == d.Blocks() {
		if d.Manifest.Names == nil {
			return 0, false
		}
		return d.Manifest.Names.CRC32C, true
	}
	e := d.Manifest.Blocks[b]
	switch id % numRoles {
	case RoleData:
		return e.CRC32C, true
	case RoleIDs:
		return e.IDsCRC32C, e.IDsFile != ""
	default:
		return e.OffsetsCRC32C, e.OffsetsFile != ""
	}
}

// CheckCRC reads file id whole and compares its CRC32C with the manifest's. A mismatch is an
// error wrapping ErrCorrupt that names the file and block.
func (d *Dataset) CheckCRC(id FileID) error {
	want, ok := d.ExpectedCRC(id)
	if !ok {
		return nil
	}
	size := d.Size(id)
	buf := make([]byte, min(size, 4<<20))
	var crc uint32
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if err := d.ReadAt(id, [][]byte{buf[:n]}, off); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
	}
	if crc != want {
		block := int(id / numRoles)
		if block == d.Blocks() {
			block = -1
		}
		return errorf(ErrCorrupt, d.Path(id), block, "CRC32C is %#08x, the manifest says %#08x (the file is damaged; re-pack the dataset)", crc, want)
	}
	return nil
}

// fileIDs returns the FileIDs of block b that have a file.
func (d *Dataset) fileIDs(b int) []FileID {
	ids := []FileID{DataFile(b)}
	if d.HasIDs() {
		ids = append(ids, IDsFile(b))
	}
	if d.Kind() == Variable {
		ids = append(ids, OffsetsFile(b))
	}
	return ids
}

// VerifyResult counts what Verify checked.
type VerifyResult struct {
	Blocks   int   // blocks in the dataset
	Problems int   // problems reported
	Bytes    int64 // bytes read and checksummed
}

// Verify checks the dataset in dir: the manifest, every file's presence, type and size, and
// every file's CRC32C. It calls report for each problem (naming the file and block) and goes
// on; it returns an error only when the manifest itself cannot be read.
func Verify(dir string, report func(error)) (VerifyResult, error) {
	var res VerifyResult
	abs, m, err := loadManifest(dir)
	if err != nil {
		return res, err
	}
	bad := map[int]bool{}
	problem := func(block int, err error) {
		bad[block] = true
		res.Problems++
		report(err)
	}
	d, err := newDataset(abs, m, problem)
	if err != nil {
		return res, err
	}
	res.Blocks = d.Blocks()
	for b := 0; b < d.Blocks(); b++ {
		if bad[b] {
			continue
		}
		for _, id := range d.fileIDs(b) {
			if err := d.CheckCRC(id); err != nil {
				problem(b, err)
				break
			}
			res.Bytes += d.Size(id)
		}
	}
	if id, ok := d.Names(); ok && !bad[-1] {
		if err := d.CheckCRC(id); err != nil {
			problem(-1, err)
		}
		res.Bytes += d.Size(id)
	}
	return res, nil
}

// Verifier checks each file's CRC32C the first time it is read (blockfs mount --verify).
// Safe for concurrent use; O(files) bits of state.
type Verifier struct {
	ds    *Dataset
	ok    []atomic.Bool
	locks [64]sync.Mutex // striped by FileID, so one file is checked once at a time
}

// NewVerifier returns a Verifier for ds, or an error if ds has no checksums.
func NewVerifier(ds *Dataset) (*Verifier, error) {
	if ds.flat != nil {
		return nil, fmt.Errorf("%s is served in place and has no checksums to verify", ds.flat.path)
	}
	return &Verifier{ds: ds, ok: make([]atomic.Bool, ds.Blocks()*numRoles+1)}, nil
}

// Check returns nil once file id has matched its CRC32C; until then it checks it (a failure
// is not remembered, so a repaired file passes later).
func (v *Verifier) Check(id FileID) error {
	if v.ok[id].Load() {
		return nil
	}
	mu := &v.locks[id%FileID(len(v.locks))]
	mu.Lock()
	defer mu.Unlock()
	if v.ok[id].Load() {
		return nil
	}
	if err := v.ds.CheckCRC(id); err != nil {
		return err
	}
	v.ok[id].Store(true)
	return nil
}
