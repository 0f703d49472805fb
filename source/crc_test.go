package source

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckCRC32C(t *testing.T) {
	require.NoError(t, CheckCRC32C(7, 7))
	err := CheckCRC32C(1, 2)
	require.ErrorIs(t, err, ErrCorrupt)
	var m *CRCMismatch
	require.True(t, errors.As(err, &m))
	require.Equal(t, "bytes do not match the dataset's CRC32C: CRC32C is 0x00000001, the manifest says 0x00000002", err.Error())
}
