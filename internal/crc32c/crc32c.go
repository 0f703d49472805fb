// Package crc32c is blockfs's one CRC32C (Castagnoli): the table every writer sums with and
// the sum of parts fetched concurrently (Combine). The one check of a sum against the
// manifest's is source.CheckCRC32C.
package crc32c

import (
	"hash"
	"hash/crc32"
)

// Table is the CRC32C table; the manifest's checksums are CRC32C.
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of p.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, Table) }

// Update returns the CRC32C of the bytes summed in crc followed by p.
func Update(crc uint32, p []byte) uint32 { return crc32.Update(crc, Table, p) }

// New returns a CRC32C hash.
func New() hash.Hash32 { return crc32.New(Table) }

// Combine returns the CRC32C of A followed by B, given crcA = CRC32C(A), crcB = CRC32C(B) and
// lenB = len(B): the parts of one object are fetched and summed concurrently, then combined in
// order. (The GF(2) method of zlib's crc32_combine: appending lenB zero bytes to A is a linear
// map of crcA, applied by repeated squaring.)
func Combine(crcA, crcB uint32, lenB int64) uint32 {
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
	// Each pass squares the last operator (in cur) into next: the first pass applies one zero
	// byte (eight bits), each later one twice as many as the pass before.
	next, cur := &even, &odd
	for {
		gf2Square(next, cur)
		if lenB&1 != 0 {
			crcA = gf2Times(next, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			return crcA ^ crcB
		}
		next, cur = cur, next
	}
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
