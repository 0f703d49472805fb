package view

import "context"

// Served is what a mount serves, as package fs sees it: the epochs of one dataset (Set) or of a
// mixture of several (Mixture). Implementations are safe for concurrent use.
type Served interface {
	// Records returns the number of records of epoch n.
	Records(n uint64) (uint64, error)
	// Kinds returns the files each epoch has, in the order a directory lists them.
	Kinds() []Kind
	// Suffix returns the suffix of an epoch's file of kind k (after epoch-NNNN).
	Suffix(k Kind) string
	// Readahead returns the readahead of a reader of a file of kind k, given the mount's.
	Readahead(k Kind, mount int64) int64
	// FileSize returns the size of the file of kind k over positions rg of epoch n.
	FileSize(ctx context.Context, n uint64, k Kind, rg Range) (int64, error)
	// Open returns the file of kind k over positions rg of epoch n.
	Open(ctx context.Context, n uint64, k Kind, rg Range) (File, error)
	// Dir names what is served (a mount's fsname).
	Dir() string
	// Stamp returns the file whose modification time is the data's.
	Stamp() string
	// OpenNames returns the names file of the records' sources, if there is one.
	OpenNames() (File, bool)
	// Stats returns the page cache's counters now.
	Stats() CacheStats
	// Facts returns what .blockfs/info.json says of the data, its order and the tree's names.
	Facts() map[string]any
	// OrderBytes returns the bytes of the cache's budget the order state may hold.
	OrderBytes() int64
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

// Readahead returns the mount's readahead: a dataset's reader reads that far ahead.
func (s *Set) Readahead(k Kind, mount int64) int64 { return mount }

// Open returns the file of kind k over positions rg of epoch n.
func (s *Set) Open(ctx context.Context, n uint64, k Kind, rg Range) (File, error) {
	e, err := s.Epoch(n)
	if err != nil {
		return nil, err
	}
	return e.Open(ctx, k, rg)
}

var (
	_ Served = (*Set)(nil)
	_ Served = (*Mixture)(nil)
)
