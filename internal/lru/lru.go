// Package lru is a small cost-bounded LRU for the derived structures blockfs keeps per epoch
// (window permutations, variable-length window layouts, epochs). Lookups, insertions and
// evictions are O(1): a small source of a mixture drawn millions of times an epoch keeps tens
// of thousands of tiny windows.
package lru

import (
	"container/list"
	"sync"
)

// Cache keeps the most recently used entries while their total cost is at most MaxCost, and
// always keeps at least MinItems of them. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	maxCost  uint64
	minItems int

	mu    sync.Mutex
	order *list.List          // of *item[K, V], most recent first; guarded by mu
	index map[K]*list.Element // guarded by mu
	cost  uint64              // guarded by mu
}

type item[K comparable, V any] struct {
	key  K
	val  V
	cost uint64
}

// EntryBytes is what the cache itself holds for each entry (its list element and index
// slot), for callers that count an entry's cost in bytes.
const EntryBytes = 128

// New returns a cache bounded by maxCost, keeping at least minItems entries.
func New[K comparable, V any](maxCost uint64, minItems int) *Cache[K, V] {
	return &Cache[K, V]{maxCost: maxCost, minItems: minItems, order: list.New(), index: map[K]*list.Element{}}
}

// Get returns the entry for k and makes it the most recent.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*item[K, V]).val, true
	}
	var zero V
	return zero, false
}

// Add inserts v for k as the most recent entry (replacing any entry for k) and evicts the
// least recent entries while the cost is over the bound.
func (c *Cache[K, V]) Add(k K, v V, cost uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[k]; ok {
		c.cost -= e.Value.(*item[K, V]).cost
		c.order.Remove(e)
	}
	c.index[k] = c.order.PushFront(&item[K, V]{k, v, cost})
	c.cost += cost
	for c.order.Len() > c.minItems && c.cost > c.maxCost {
		last := c.order.Remove(c.order.Back()).(*item[K, V])
		delete(c.index, last.key)
		c.cost -= last.cost
	}
}

// Len returns the number of entries and their total cost.
func (c *Cache[K, V]) Len() (int, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.cost
}

// Keys returns the keys, most recent first.
func (c *Cache[K, V]) Keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]K, 0, c.order.Len())
	for e := c.order.Front(); e != nil; e = e.Next() {
		keys = append(keys, e.Value.(*item[K, V]).key)
	}
	return keys
}
