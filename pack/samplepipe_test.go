package pack

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ServeSamples reads what to read as a SamplesSpec on stdin, the one openPiped writes, and
// refuses anything else before it reads a file.
func TestServeSamplesSpec(t *testing.T) {
	spec, err := json.Marshal(SamplesSpec{Format: Parquet, Paths: []string{"a.parquet", "b,c.parquet"}, Columns: []string{"x.y"}})
	require.NoError(t, err)
	var back SamplesSpec
	require.NoError(t, json.Unmarshal(spec, &back))
	assert.Equal(t, SamplesSpec{Format: Parquet, Paths: []string{"a.parquet", "b,c.parquet"}, Columns: []string{"x.y"}}, back)

	for in, want := range map[string]string{
		``:                 "as JSON on stdin",
		`--format parquet`: "as JSON on stdin",
		`{"format":"parquet","paths":["a"],"x":1}`: "unknown field",
		`{"format":"parquet","paths":[]}`:          "no files to read",
	} {
		var out bytes.Buffer
		err := ServeSamples(strings.NewReader(in), &out)
		assert.ErrorContains(t, err, want, "spec %q", in)
		assert.Zero(t, out.Len(), "spec %q", in)
	}
}
