package objstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/source"
)

// named is a source.Table of no files.
type named struct{ name string }

func (t *named) Extent(source.FileID) (source.Extent, bool) { return source.Extent{}, false }

// TestBlocksOfOneATable: opening a dataset and the mount after read one table through one
// Blocks (one staging area), and another table through its own.
func TestBlocksOfOneATable(t *testing.T) {
	st, err := New(&hangClient{}, "p", Options{})
	require.NoError(t, err)
	a, b := &named{"a"}, &named{"b"}
	require.Same(t, st.BlocksOf(a), st.BlocksOf(a))
	require.Same(t, st.BlocksOf(a), st.Blocks(a).(*Blocks))
	require.NotSame(t, st.BlocksOf(a), st.BlocksOf(b))
	require.NotNil(t, st.BlocksOf(table{}), "a table that cannot key a map has Blocks of its own")
}
