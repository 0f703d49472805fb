package near

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDistance(t *testing.T) {
	assert.Equal(t, 2, Distance("trian", "train", 5))
	assert.Equal(t, 3, Distance("abcdef", "a", 2), "over the limit")
	assert.Equal(t, 0, Distance("seed", "seed", 2))
}

func TestBest(t *testing.T) {
	flags := []string{"seed", "shuffle", "mix", "cache-size", "readahead"}
	assert.Equal(t, "seed", Best("seeds", flags, 2))
	assert.Equal(t, "cache-size", Best("cache-szie", flags, 2))
	assert.Equal(t, "", Best("x", flags, 2), "a letter is near everything short: no hint")
	assert.Equal(t, "", Best("verbose", flags, 2))
}
