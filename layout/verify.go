package layout

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

// CheckCRC reads file id whole from src and compares its CRC32C with the manifest's (a file
// without one passes). A mismatch is an error wrapping ErrCorrupt that names the file and
// block; a failed read keeps its cause (see ioError). It reads in pieces, and checks them
// itself: src may read only each piece (source.Read.CallerChecks), where an object store
// would otherwise read and check the whole object for each.
func (d *Dataset) CheckCRC(ctx context.Context, src source.Blocks, id FileID) error {
	return d.checkCRC(ctx, src, id, source.Read{})
}

// checkCRC is CheckCRC with its reads served as how says, besides the caller's checking.
func (d *Dataset) checkCRC(ctx context.Context, src source.Blocks, id FileID, how source.Read) error {
	return d.scanFile(ctx, src, id, how, nil)
}

// scanFile is checkCRC that also hands each piece read, in order, to each (nil: none).
func (d *Dataset) scanFile(ctx context.Context, src source.Blocks, id FileID, how source.Read, each func([]byte)) error {
	f, ok := d.File(id)
	if !ok || !f.HasCRC { // a packed file, compressed or not, always has one
		return nil
	}
	how = how.Checked()
	buf := make([]byte, min(f.Size, 4<<20))
	var crc uint32
	for off := int64(0); off < f.Size; off += int64(len(buf)) {
		n := min(int64(len(buf)), f.Size-off)
		if err := src.Fill(ctx, id, off, [][]byte{buf[:n]}, how); err != nil {
			return d.ioError(id, err)
		}
		crc = crc32c.Update(crc, buf[:n])
		if each != nil {
			each(buf[:n])
		}
	}
	if err := crc32c.Check(crc, f.CRC32C); err != nil {
		return wrapf(ErrCorrupt, err, f.Name, f.Block, "%s (the file is damaged; re-pack the dataset)", err.(*crc32c.Mismatch).Detail())
	}
	return nil
}

// fileIDs returns the FileIDs of block b that have a file.
func (d *Dataset) fileIDs(b int) []FileID {
	var ids []FileID
	for _, r := range []Role{RoleData, RoleIDs, RoleOffsets} {
		if _, ok := d.File(RoleFile(b, r)); ok {
			ids = append(ids, RoleFile(b, r))
		}
	}
	return ids
}

// VerifyResult counts what Verify checked.
type VerifyResult struct {
	Blocks   int   // blocks in the dataset
	Problems int   // problems reported
	Bytes    int64 // bytes read and checksummed (as stored)
	// Compressed files: how many were decompressed whole (every frame checked), their bytes
	// as stored and uncompressed.
	Framed       int
	FramedStored int64
	FramedRaw    int64
}

// VerifyStore checks the dataset in st (a directory, an object store): the manifest, every
// file's presence, type and size, and every file's CRC32C. It calls report for each problem
// (naming the file and block) and goes on; it returns an error only when the manifest itself
// cannot be read.
func VerifyStore(st Store, report func(error)) (VerifyResult, error) {
	var res VerifyResult
	m, err := storeManifest(st)
	if err != nil {
		return res, err
	}
	bad := map[int]bool{}
	problem := func(block int, err error) {
		bad[block] = true
		res.Problems++
		report(err)
	}
	d, err := newDataset(st, m, problem)
	if err != nil {
		return res, err
	}
	res.Blocks = d.Blocks()
	src := d.StoredSource()
	ctx := context.Background()
	var fc *frameCheck
	if c := d.Manifest.Compression; c != nil {
		if fc, err = newFrameCheck(c.Frame); err != nil {
			return res, err
		}
	}
	for b := 0; b < d.Blocks(); b++ {
		if bad[b] {
			continue
		}
		for _, id := range d.fileIDs(b) {
			if err := d.checkFile(ctx, src, id, fc, &res); err != nil {
				problem(b, err)
				break
			}
			res.Bytes += d.StoredSize(id)
		}
	}
	if id, ok := d.Names(); ok && !bad[-1] {
		if err := d.CheckCRC(ctx, src, id); err != nil {
			problem(-1, err)
		}
		res.Bytes += d.StoredSize(id)
	}
	return res, nil
}

// checkFile checks file id's CRC32C (CheckCRC). A compressed file's frames are decompressed
// in the same pass, by fc: every frame's CRC32C and length checked, as a read would (a file
// whose CRC32C matched can still hold a frame that does not decompress, if pack wrote it so).
// The file is read once, from an object store too.
func (d *Dataset) checkFile(ctx context.Context, src source.Blocks, id FileID, fc *frameCheck, res *VerifyResult) error {
	f, ok := d.File(id)
	if !ok || !f.Framed {
		return d.CheckCRC(ctx, src, id)
	}
	fc.reset(f.Size, f.Raw)
	if err := d.scanFile(ctx, src, id, source.Read{}, fc.add); err != nil {
		return err
	}
	if err := fc.done(); err != nil {
		return wrapf(ErrCorrupt, err, f.Name, f.Block, "%v", err)
	}
	res.Framed++
	res.FramedStored += f.Size
	res.FramedRaw += f.Raw
	return nil
}

// Verified is a source.Blocks that checks each file's CRC32C the first time any of it is read
// (blockfs mount --verify): a file that fails gives an error for every read, so its bytes
// never reach the cache. Safe for concurrent use; O(files) bits of state.
type Verified struct {
	ds    *Dataset
	src   source.Blocks
	ok    []atomic.Bool
	locks [64]sync.Mutex // striped by FileID, so one file is checked once at a time
}

// NewVerified returns src with checksums checked, or an error if ds has no checksums.
func NewVerified(ds *Dataset, src source.Blocks) (*Verified, error) {
	if err := ds.shape.verifiable(); err != nil {
		return nil, err
	}
	return &Verified{ds: ds, src: src, ok: make([]atomic.Bool, ds.Blocks()*numRoles+1)}, nil
}

// Size implements source.Blocks.
func (v *Verified) Size(id FileID) int64 { return v.src.Size(id) }

// Fill implements source.Blocks: it checks file id (once) and then reads from it.
func (v *Verified) Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how source.Read) error {
	if err := v.check(ctx, id, how); err != nil {
		return err
	}
	return v.src.Fill(ctx, id, off, bufs, how)
}

// check returns nil once file id has matched its CRC32C; until then it checks it (a failure
// is not remembered, so a repaired file passes later).
func (v *Verified) check(ctx context.Context, id FileID, how source.Read) error {
	if id >= FileID(len(v.ok)) {
		return &source.Error{Op: "read", Name: v.ds.Dir, Off: -1, Err: source.ErrNoFile}
	}
	if v.ok[id].Load() {
		return nil
	}
	mu := &v.locks[id%FileID(len(v.locks))]
	mu.Lock()
	defer mu.Unlock()
	if v.ok[id].Load() {
		return nil
	}
	if err := v.ds.checkCRC(ctx, v.src, id, how); err != nil {
		return err
	}
	v.ok[id].Store(true)
	return nil
}
