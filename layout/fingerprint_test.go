package layout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFingerprint(t *testing.T) {
	base := func() *Manifest {
		return &Manifest{Format: FormatName, Version: Version, Kind: Fixed, RecordSize: 4, Records: 4, Bytes: 16,
			Source: "/data/a.npy", Blocks: []BlockEntry{{File: "blocks/000000.bin", Records: 2, Bytes: 8, CRC32C: 7}, {File: "blocks/000001.bin", Records: 2, Bytes: 8, CRC32C: 9}}}
	}
	fp := base().Fingerprint()
	assert.Len(t, fp, 32)
	moved := base()
	moved.Blocks[0].File, moved.Source = "elsewhere.bin", "/other/a.npy"
	assert.Equal(t, fp, moved.Fingerprint(), "names and places are not part of the data")
	for name, change := range map[string]func(m *Manifest){
		"crc":        func(m *Manifest) { m.Blocks[1].CRC32C = 10 },
		"split":      func(m *Manifest) { m.Blocks[0].Records, m.Blocks[1].Records = 1, 3 },
		"seed":       func(m *Manifest) { m.PreShuffle = PreShuffle{Shuffled: true, Seed: 1} },
		"dtype":      func(m *Manifest) { m.DType = "<f4" },
		"shape":      func(m *Manifest) { m.Shape = []int64{1} },
		"recordsize": func(m *Manifest) { m.RecordSize = 2 },
		"names":      func(m *Manifest) { m.Names = &NamesEntry{File: "names.txt", Bytes: 10, CRC32C: 3} },
	} {
		m := base()
		change(m)
		assert.NotEqual(t, fp, m.Fingerprint(), name)
	}
	// A file in place (no CRCs) is told apart by its name and shape.
	flat := &Manifest{Format: FormatName, Kind: Fixed, RecordSize: 4, Records: 4, Bytes: 16, Source: "/x/a.bin"}
	other := *flat
	other.Source = "/x/b.bin"
	assert.NotEqual(t, flat.Fingerprint(), other.Fingerprint())
	other.Source = "/y/a.bin"
	assert.Equal(t, flat.Fingerprint(), other.Fingerprint())
}
