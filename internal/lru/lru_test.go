package lru

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBoundAndOrder(t *testing.T) {
	c := New[int, string](10, 2)
	c.Add(1, "a", 4)
	c.Add(2, "b", 4)
	_, ok := c.Get(1) // 1 is now the most recent
	assert.True(t, ok)
	c.Add(3, "c", 4) // 12 > 10: evicts 2, the least recent
	assert.Equal(t, []int{3, 1}, c.Keys())
	n, cost := c.Len()
	assert.Equal(t, 2, n)
	assert.EqualValues(t, 8, cost)
	c.Add(4, "d", 100) // over the bound alone, but MinItems keeps two
	assert.Equal(t, []int{4, 3}, c.Keys())
	c.Add(4, "e", 1) // replacing an entry updates its cost
	v, _ := c.Get(4)
	assert.Equal(t, "e", v)
	_, cost = c.Len()
	assert.EqualValues(t, 5, cost)
	_, ok = c.Get(9)
	assert.False(t, ok)
}
