package layout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"path/filepath"
)

// Fingerprint identifies the data a manifest describes, for a reader's saved position (the
// Python package's Loader.state_dict) to be checked against the data it resumes on, and for
// the disk cache's directory: the record kind, size, count, dtype and shape, the pre-shuffle,
// every block's record count, size and CRC32C values, and the names file's (and for compressed
// blocks the codec, frame size and stored sizes). It is the same
// wherever the dataset is copied (block file names and the directory are not part of it). A
// file served in place has no CRC32C values: its fingerprint is its base name, size and shape,
// so a file changed in place with the same size is not told apart. The result is 32 hex
// digits (the first 128 bits of a SHA-256).
func (m *Manifest) Fingerprint() string {
	h := sha256.New()
	str := func(s string) { num(h, uint64(len(s))); h.Write([]byte(s)) }
	str(m.Format)
	str(string(m.Kind))
	num(h, uint64(m.RecordSize), m.Records, m.Bytes, uint64(len(m.Shape)))
	str(m.DType)
	for _, d := range m.Shape {
		num(h, uint64(d))
	}
	flag := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	num(h, flag(m.IDs), flag(m.PreShuffle.Shuffled), m.PreShuffle.Seed, uint64(len(m.Blocks)))
	for _, b := range m.Blocks {
		num(h, b.Records, b.Bytes, uint64(b.CRC32C), uint64(b.IDsCRC32C), uint64(b.OffsetsCRC32C))
	}
	if m.Names != nil {
		num(h, 1, m.Names.Bytes, uint64(m.Names.CRC32C))
	}
	if c := m.Compression; c != nil {
		// Only a compressed dataset hashes these: every other's fingerprint is as it was.
		str(c.Codec)
		num(h, uint64(c.Frame))
		for _, b := range m.Blocks {
			num(h, b.StoredBytes)
		}
	}
	if len(m.Blocks) == 0 || !m.hasCRCs() {
		str(filepath.Base(m.Source))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// hasCRCs reports whether any block has a CRC32C (a packed dataset; a file in place has none).
func (m *Manifest) hasCRCs() bool {
	for _, b := range m.Blocks {
		if b.CRC32C != 0 {
			return true
		}
	}
	return false
}

func num(h hash.Hash, vs ...uint64) {
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
}
