package view

import (
	"sync"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// Set hands out the epochs of one dataset under one seed, mode and mix, keeping the few most
// recently used (an Epoch costs O(blocks)). Safe for concurrent use.
type Set struct {
	// Immutable after NewSet.
	DS    *layout.Dataset
	Cache *cache.Cache
	Opt   shuffle.Options // Epoch is ignored

	mu     sync.Mutex
	recent []*Epoch // most recent first; guarded by mu
}

// epochCacheSize is how many epochs a Set keeps built.
const epochCacheSize = 4

// NewSet validates opt against the dataset and returns a Set.
func NewSet(ds *layout.Dataset, c *cache.Cache, opt shuffle.Options) (*Set, error) {
	s := &Set{DS: ds, Cache: c, Opt: opt}
	if _, err := s.Epoch(0); err != nil {
		return nil, err
	}
	return s, nil
}

// Epoch returns epoch n.
func (s *Set) Epoch(n uint64) (*Epoch, error) {
	s.mu.Lock()
	for i, e := range s.recent {
		if e.ord.Options().Epoch == n {
			copy(s.recent[1:i+1], s.recent[:i])
			s.recent[0] = e
			s.mu.Unlock()
			return e, nil
		}
	}
	s.mu.Unlock()
	opt := s.Opt
	opt.Epoch = n
	e, err := newEpoch(s.DS, s.Cache, opt)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recent) < epochCacheSize {
		s.recent = append(s.recent, nil)
	}
	copy(s.recent[1:], s.recent[:len(s.recent)-1])
	s.recent[0] = e
	return e, nil
}
