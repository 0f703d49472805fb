package s3

import "hash/crc32"

// castagnoli is the CRC32C table; the manifest's checksums are CRC32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32cCombine returns the CRC32C of A followed by B, given crcA = CRC32C(A), crcB =
// CRC32C(B) and lenB = len(B): the parts of one object are fetched and summed concurrently,
// then combined in order. (The GF(2) method of zlib's crc32_combine: appending lenB zero
// bytes to A is a linear map of crcA, applied by repeated squaring.)
func crc32cCombine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32 // operators for 2^k zero bits
	odd[0] = 0x82f63b78      // the reflected Castagnoli polynomial: one zero bit
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four zero bits
	// Each pass squares once more: the first applies one zero byte (eight bits).
	for {
		gf2Square(&even, &odd)
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		gf2Square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

// gf2Times multiplies the 32x32 GF(2) matrix mat by the vector vec.
func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

// gf2Square sets square to mat times mat.
func gf2Square(square, mat *[32]uint32) {
	for i := range 32 {
		square[i] = gf2Times(mat, mat[i])
	}
}
