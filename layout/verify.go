package layout

import (
	"context"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

// CheckCRC reads file id whole from src, its reads served as how says, and compares its
// CRC32C with the manifest's (a file without one passes). A mismatch is an error wrapping
// ErrCorrupt that names the file and block; a failed read keeps its cause (see ioError). It
// reads in pieces, and checks them itself: src may read only each piece
// (source.Read.CallerChecks), where an object store would otherwise read and check the whole
// object for each.
func (d *Dataset) CheckCRC(ctx context.Context, src source.Blocks, id FileID, how source.Read) error {
	return d.scanFile(ctx, src, id, how, nil)
}

// Verifiable returns nil when every file of d has a checksum to check as it is read, and
// otherwise says why not (--verify's refusal).
func (d *Dataset) Verifiable() error { return d.shape.verifiable() }

// scanFile is CheckCRC that also hands each piece read, in order, to each (nil: none).
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
	if err := source.CheckCRC32C(crc, f.CRC32C); err != nil {
		return wrapf(ErrCorrupt, err, f.Name, f.Block, "%s (the file is damaged; re-pack the dataset)", err.(*source.CRCMismatch).Detail())
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
	src := st.Blocks(d)
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
		if err := d.CheckCRC(ctx, src, id, source.Read{}); err != nil {
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
		return d.CheckCRC(ctx, src, id, source.Read{})
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
