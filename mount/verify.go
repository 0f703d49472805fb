package mount

import (
	"context"
	"fmt"

	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/stack"
)

// Verify reads the whole dataset at opt.Data (blockfs verify): a directory, a dataset with
// fields, or a packed dataset (or one with fields) in an object store, opened with opt.S3. It
// checks the manifest, every file's presence, type and size and every block file's CRC32C,
// and a dataset with fields' fields against its manifest; report hears each problem. An error
// is returned only when the dataset cannot be read at all.
func Verify(opt Options, report func(error)) (layout.VerifyResult, error) {
	data := opt.Data
	if k := Locate(data).Kind; k == ShardsIndex || k == Shards || k == Remote && RemoteShards(data, opt.S3) {
		_, sd, err := withFields(opt)
		if err != nil {
			return layout.VerifyResult{}, err
		}
		return verifyShards(sd, report), nil
	}
	switch {
	case IsRemote(data):
		man, err := RemoteFields(data, opt.S3)
		if err != nil {
			return layout.VerifyResult{}, err
		}
		if man == nil {
			st, err := openStore(data, opt.S3)
			if err != nil {
				return layout.VerifyResult{}, err
			}
			return layout.VerifyStore(st, report)
		}
		return verifyFields(data, man, report, func(at string) (layout.VerifyResult, *layout.Dataset, error) {
			st, err := openStore(at, opt.S3)
			if err != nil {
				return layout.VerifyResult{}, nil, err
			}
			res, err := layout.VerifyStore(st, report)
			if err != nil || res.Problems > 0 {
				return res, nil, err
			}
			ds, err := layout.OpenStore(st)
			return res, ds, err
		})
	case layout.IsFields(data):
		man, err := layout.ReadFieldsManifest(data)
		if err != nil {
			return layout.VerifyResult{}, err
		}
		return verifyFields(data, man, report, func(at string) (layout.VerifyResult, *layout.Dataset, error) {
			res, err := local.Verify(at, report)
			if err != nil || res.Problems > 0 {
				return res, nil, err
			}
			ds, err := local.Open(at)
			return res, ds, err
		})
	}
	return local.Verify(data, report)
}

// verifyShards reads every block of every field of shards in place whole: its places in the
// index checked against their CRC32Cs, its values read from the shards (or the index) and
// checked against theirs.
func verifyShards(sd *shardsData, report func(error)) layout.VerifyResult {
	var res layout.VerifyResult
	for i, ds := range sd.dss {
		src := stack.Open(ds)
		for b := range ds.Blocks() {
			res.Blocks++
			buf := make([]byte, ds.Size(layout.DataFile(b)))
			if err := src.Fill(context.Background(), layout.DataFile(b), 0, [][]byte{buf}, source.Read{}); err != nil {
				report(fmt.Errorf("field %q: block %d: %w", sd.man.Fields[i].Name, b, err))
				res.Problems++
				continue
			}
			res.Bytes += int64(len(buf))
		}
	}
	return res
}

// openStore opens the object store at url.
func openStore(url string, opt objstore.Options) (*objstore.Store, error) {
	st, err := stores.Open(url, opt)
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return st, nil
}

// verifyFields verifies every field of the dataset with fields at data (a directory or an
// s3:// URL) whose manifest is man, with verify (which verifies the dataset at a field's place
// and opens it when it has no problem), and that each is what the manifest says of it
// (layout.FieldsManifest.CheckField): its kind, record size, dtype, shape and records, and
// cut at the same samples as the others.
func verifyFields(data string, man *layout.FieldsManifest, report func(error), verify func(at string) (layout.VerifyResult, *layout.Dataset, error)) (layout.VerifyResult, error) {
	var all layout.VerifyResult
	dss := make([]*layout.Dataset, len(man.Fields))
	for i, fl := range man.Fields {
		at, err := FieldData(data, fl)
		if err != nil {
			return all, err
		}
		res, ds, err := verify(at)
		if err != nil {
			return all, fmt.Errorf("field %q: %w", fl.Name, err)
		}
		all.Problems += res.Problems
		all.Blocks += res.Blocks
		all.Bytes += res.Bytes
		all.Framed, all.FramedStored, all.FramedRaw = all.Framed+res.Framed, all.FramedStored+res.FramedStored, all.FramedRaw+res.FramedRaw
		if res.Problems > 0 {
			continue
		}
		dss[i] = ds
		var anchor *layout.Dataset
		if a := man.Anchor(); a < i {
			anchor = dss[a] // nil if it had problems
		}
		if err := man.CheckField(i, ds, anchor); err != nil {
			report(err)
			all.Problems++
		}
	}
	return all, nil
}
