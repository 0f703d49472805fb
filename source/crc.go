package source

import "fmt"

// CRCMismatch is a CRC32C computed over bytes read that disagrees with the manifest's. It wraps
// ErrCorrupt: errors.Is(err, ErrCorrupt) holds.
type CRCMismatch struct {
	Got  uint32 // the sum of the bytes read
	Want uint32 // the manifest's
}

// Error reads "bytes do not match the dataset's CRC32C: CRC32C is G, the manifest says W".
func (m *CRCMismatch) Error() string { return fmt.Sprintf("%v: %s", ErrCorrupt, m.Detail()) }

// Detail says what disagrees, without the sentinel: "CRC32C is G, the manifest says W".
func (m *CRCMismatch) Detail() string {
	return fmt.Sprintf("CRC32C is %#08x, the manifest says %#08x", m.Got, m.Want)
}

// Unwrap returns ErrCorrupt.
func (m *CRCMismatch) Unwrap() error { return ErrCorrupt }

// CheckCRC32C compares got, the CRC32C of the bytes read, with want, the manifest's: nil when they
// agree, else a *CRCMismatch. Callers wrap it with the file's name.
func CheckCRC32C(got, want uint32) error {
	if got == want {
		return nil
	}
	return &CRCMismatch{Got: got, Want: want}
}
