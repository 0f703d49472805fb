package pack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"
)

// A part of inputs of several fields into an object store (PackPartToStore): each field's
// dataset streams to PREFIX/fields/NAME/parts/part-I-of-N/ as pack streams any (each block as
// it is written, its manifest last; a part run again replaces it, removing what the new one
// has not), one upload per field.

// fieldStore is the object store a part of several fields goes to.
type fieldStore struct {
	ctx context.Context
	url string // OUT
	opt objstore.Options
}

// errFieldsStored tells PackPartToStore that the part's fields went to their own uploads:
// the upload of its dataset under PREFIX/parts/ has nothing.
var errFieldsStored = errors.New("the part's fields are stored in their folders")

// storeFieldsPart packs the part's samples of several fields, r, into the local scratch
// directory dst, streaming each field's blocks to its folder in the store, then its manifest.
// It returns errFieldsStored with res once every field is stored. It closes r.
func storeFieldsPart(ctx context.Context, r SampleReader, dst string, opt Options, res *Result, fp *fieldPart, own []string) (*Result, error) {
	streams := map[string]*objstore.Stream{}
	abort := func() {
		for _, u := range streams {
			u.Abort()
		}
	}
	for i, s := range r.Fields() {
		st, err := stores.Open(fp.store.url+"/"+fieldPartDir(s.Name, fp.part.Name()), fp.store.opt)
		if err != nil {
			err = openStoreError{err}
		}
		spool := filepath.Join(filepath.Dir(dst), fmt.Sprintf("spool-%d", i))
		if err == nil {
			err = os.Mkdir(spool, 0o700)
		}
		var u *objstore.Stream
		if err == nil {
			u, err = st.Begin(fp.store.ctx, true, spool)
		}
		if err != nil {
			r.Close()
			abort()
			return nil, err
		}
		streams[s.Name] = u
	}
	opt.Fields.Own, opt.Fields.OwnDecided = own, true
	opt.FieldBlockDone = func(field, dir string, files []string) error { return streams[field].Add(dir, files) }
	fr, err := PackFields(ctx, r, dst, opt.Format, 0, opt)
	if err != nil {
		abort()
		return nil, err
	}
	for _, fl := range fr.Manifest.Fields {
		if err := streams[fl.Name].Finish(filepath.Join(dst, filepath.FromSlash(fl.Dir))); err != nil {
			abort()
			return nil, err
		}
	}
	fp.m = fr.Manifest
	if res.Manifest, err = fieldsSummary(dirOut{dst}, fr.Manifest, ""); err != nil {
		return nil, err
	}
	return res, errFieldsStored
}
