// Package lru is a small cost-bounded LRU for the few derived structures blockfs keeps per
// epoch (window permutations, variable-length window layouts, epochs). It is meant for tens of
// entries: lookups scan a slice.
package lru

import "sync"

// Cache keeps the most recently used entries while their total cost is at most MaxCost, and
// always keeps at least MinItems of them. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	maxCost  uint64
	minItems int

	mu    sync.Mutex
	items []item[K, V] // most recent first; guarded by mu
	cost  uint64       // guarded by mu
}

type item[K comparable, V any] struct {
	key  K
	val  V
	cost uint64
}

// New returns a cache bounded by maxCost, keeping at least minItems entries.
func New[K comparable, V any](maxCost uint64, minItems int) *Cache[K, V] {
	return &Cache[K, V]{maxCost: maxCost, minItems: minItems}
}

// Get returns the entry for k and makes it the most recent.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range c.items {
		if it.key == k {
			copy(c.items[1:i+1], c.items[:i])
			c.items[0] = it
			return it.val, true
		}
	}
	var zero V
	return zero, false
}

// Add inserts v for k as the most recent entry (replacing any entry for k) and evicts the
// least recent entries while the cost is over the bound.
func (c *Cache[K, V]) Add(k K, v V, cost uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range c.items {
		if it.key == k {
			c.cost -= it.cost
			c.items = append(c.items[:i], c.items[i+1:]...)
			break
		}
	}
	c.items = append(c.items, item[K, V]{})
	copy(c.items[1:], c.items[:len(c.items)-1])
	c.items[0] = item[K, V]{k, v, cost}
	c.cost += cost
	for len(c.items) > c.minItems && c.cost > c.maxCost {
		last := c.items[len(c.items)-1]
		c.cost -= last.cost
		c.items[len(c.items)-1] = item[K, V]{}
		c.items = c.items[:len(c.items)-1]
	}
}

// Len returns the number of entries and their total cost.
func (c *Cache[K, V]) Len() (int, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.cost
}

// Keys returns the keys, most recent first.
func (c *Cache[K, V]) Keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]K, len(c.items))
	for i, it := range c.items {
		keys[i] = it.key
	}
	return keys
}
