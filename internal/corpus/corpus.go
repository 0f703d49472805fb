// Package corpus makes test data that compresses as real data does, for the tests of the
// packages that write and read compressed blocks (it imports nothing of blockfs, so a
// package's own tests can use it).
package corpus

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

// Text returns n bytes of words, compressible as a JSON Lines corpus is.
func Text(r *rand.Rand, n int) []byte {
	words := []string{"the", "epoch", "block", "shuffle", "record", "{\"id\": ", "\"text\": ", "token", "\n"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		fmt.Fprintf(&b, "%d ", r.IntN(1000))
	}
	return b.Bytes()[:n]
}
