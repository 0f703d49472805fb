package view

import (
	"context"
	"maps"

	"github.com/blockfs/blockfs/cache"
)

// What a mount serves, by capability (go-fuse's way: one small interface per thing a caller
// may ask): Opener opens an epoch's files for reading, Namer names them and the tree's other
// files, Describer says what info.json and the mount's accounting need. A Set (one dataset),
// a Mixture (several, or a node's parts) and Fields (a dataset with fields) are each all three:
// Content. Implementations are safe for concurrent use.

// Opener is the read capability: the epochs' files, with their sizes.
type Opener interface {
	// Records returns the number of records of epoch n.
	Records(n uint64) (uint64, error)
	// FileSize returns the size of the file of kind k over positions rg of epoch n.
	FileSize(ctx context.Context, n uint64, k Kind, rg Range) (int64, error)
	// Open returns the file of kind k over positions rg of epoch n. Wrap it in a Reader to
	// read it (NewReader: with readahead where the file can).
	Open(ctx context.Context, n uint64, k Kind, rg Range) (File, error)
}

// Namer is the names capability: what the tree calls an epoch's files, and its names sidecar.
type Namer interface {
	// Kinds returns the files each epoch has, in the order a directory lists them.
	Kinds() []Kind
	// Suffix returns the suffix of an epoch's file of kind k (after epoch-NNNN).
	Suffix(k Kind) string
	// OpenNames returns the names file of the records' sources, if there is one.
	OpenNames() (File, bool)
}

// Describer is the facts capability: what is served, said for info.json and the mount.
type Describer interface {
	// Dir names what is served (a mount's fsname).
	Dir() string
	// Stamp returns the file whose modification time is the data's.
	Stamp() string
	// Facts returns what .blockfs/info.json says of the data, its order and the tree's names.
	Facts() map[string]any
	// OrderBytes returns the bytes of the cache's budget the order state may hold.
	OrderBytes() int64
}

// Content is what a mount serves, as package fs sees it: every capability.
type Content interface {
	Opener
	Namer
	Describer
}

// ReadaheadSizer is a Content whose readers read ahead by other than the mount's readahead
// (Fields: each field its share, in its own bytes).
type ReadaheadSizer interface {
	// Readahead returns the readahead of a reader of a file of kind k, given the mount's.
	Readahead(k Kind, mount int64) int64
}

// ReadaheadOf returns how far a reader of s's file of kind k reads ahead, given the mount's
// readahead: not at all for offsets (a reader reads them whole, once), s's own where it sizes
// it (ReadaheadSizer), else the mount's. Whether a file can read ahead at all is its own to say
// (NewReader).
func ReadaheadOf(s Opener, k Kind, mount int64) int64 {
	if k.Stat() == Offsets {
		return 0
	}
	if r, ok := s.(ReadaheadSizer); ok {
		return r.Readahead(k, mount)
	}
	return mount
}

// group is what a shape served from several Sets under one cache shares (a Mixture's sources,
// a dataset's fields), embedded in it: the Sets, the cache, what it is named and the facts
// the mount gives it. Immutable after construction.
type group struct {
	Sets  []*Set
	Cache *cache.Cache // the cache the Sets' namespaces share
	dir   string       // what is served: the mixture file, the dataset's directory
	facts map[string]any
}

// Dir returns what is served: the mixture file, or the dataset's directory.
func (g *group) Dir() string { return g.dir }

// OrderBytes returns the order state the Sets hold, together.
func (g *group) OrderBytes() int64 {
	var n int64
	for _, s := range g.Sets {
		n += s.OrderBytes()
	}
	return n
}

// OpenNames reports false: the records are named by their sources' own files, or carry their
// own names (fields).
func (g *group) OpenNames() (File, bool) { return nil, false }

// factsCopy returns a copy of the facts the mount gave, for Facts to add to.
func (g *group) factsCopy() map[string]any {
	f := maps.Clone(g.facts)
	if f == nil {
		f = map[string]any{}
	}
	return f
}

// Records returns the number of records in an epoch (the same in every epoch of a dataset).
func (s *Set) Records(uint64) (uint64, error) { return s.DS.Records(), nil }

// Kinds returns an epoch's files: its data and ids, and offsets for variable-length records.
func (s *Set) Kinds() []Kind {
	if s.Variable() {
		return []Kind{Data, IDs, Offsets}
	}
	return []Kind{Data, IDs}
}

// Suffix returns the suffix of an epoch's file of kind k.
func (s *Set) Suffix(k Kind) string { return kindSuffix[k] }

// Open returns the file of kind k over positions rg of epoch n.
func (s *Set) Open(ctx context.Context, n uint64, k Kind, rg Range) (File, error) {
	e, err := s.Epoch(n)
	if err != nil {
		return nil, err
	}
	return e.Open(ctx, k, rg)
}

var (
	_ Content        = (*Set)(nil)
	_ Content        = (*Mixture)(nil)
	_ Content        = (*Fields)(nil)
	_ ReadaheadSizer = (*Fields)(nil)
)
