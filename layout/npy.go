package layout

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
)

// NpyMagic starts every .npy file.
const NpyMagic = "\x93NUMPY"

// Npy describes a NumPy .npy file: an array of Records rows along the first axis, each
// RecordSize bytes of DType elements shaped Shape (the array's shape without its first axis).
type Npy struct {
	Major      int
	DType      string  // numpy type string, e.g. "<f4"
	Shape      []int64 // per-record shape
	Records    int64   // length of the first axis
	RecordSize int64   // bytes per record
	DataOffset int64   // where the array data starts
}

// maxNpyHeader bounds the header a .npy file may declare.
const maxNpyHeader = 1 << 20

// IsNpy reports whether r starts with the .npy magic.
func IsNpy(r io.ReaderAt) bool {
	var m [6]byte
	n, _ := r.ReadAt(m[:], 0)
	return n == 6 && string(m[:]) == NpyMagic
}

// ParseNpy reads and checks the header of a .npy file of the given size (format versions 1.0,
// 2.0 and 3.0). It accepts C-order arrays of simple dtypes with at least one axis, and refuses
// Fortran order, object (pickled) and structured dtypes, and data shorter or longer than the
// header says. name is used in errors.
func ParseNpy(name string, r io.ReaderAt, size int64) (*Npy, error) {
	bad := func(format string, args ...any) error {
		return errorf(ErrFormat, name, -1, format, args...)
	}
	var pre [12]byte
	if n, _ := r.ReadAt(pre[:], 0); n < 10 || string(pre[:6]) != NpyMagic {
		return nil, bad("not a .npy file (no \\x93NUMPY magic)")
	}
	major := int(pre[6])
	var hlen, start int64
	switch major {
	case 1:
		hlen, start = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		hlen, start = int64(binary.LittleEndian.Uint32(pre[8:12])), 12
	default:
		return nil, bad(".npy format version %d.%d is not supported (1.0, 2.0 and 3.0 are)", major, pre[7])
	}
	if hlen > maxNpyHeader || start+hlen > size {
		return nil, bad(".npy header of %d bytes does not fit in the file of %d bytes (truncated?)", hlen, size)
	}
	hdr := make([]byte, hlen)
	if _, err := r.ReadAt(hdr, start); err != nil {
		return nil, bad("cannot read the .npy header: %v", err)
	}
	npy, err := parseNpyDict(string(bytes.TrimRight(hdr, " \n\x00")))
	if err != nil {
		return nil, bad("%v", err)
	}
	npy.Major = major
	npy.DataOffset = start + hlen
	want := npy.DataOffset + npy.Records*npy.RecordSize
	if npy.Records > 0 && npy.RecordSize > 0 && (npy.Records > math.MaxInt64/npy.RecordSize || want < 0) {
		return nil, bad("array of %d records of %d bytes is too large", npy.Records, npy.RecordSize)
	}
	if size != want {
		return nil, bad(".npy data is %d bytes but the header's shape needs %d (truncated or damaged file)", size-npy.DataOffset, want-npy.DataOffset)
	}
	return npy, nil
}

var (
	npyDescr   = regexp.MustCompile(`'descr'\s*:\s*('([^']*)'|\[)`)
	npyFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// parseNpyDict reads the Python dict literal of a .npy header.
func parseNpyDict(h string) (*Npy, error) {
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(h, "}") {
		return nil, fmt.Errorf(".npy header is not a dictionary")
	}
	d := npyDescr.FindStringSubmatch(h)
	if d == nil {
		return nil, fmt.Errorf(".npy header has no 'descr'")
	}
	if d[1] == "[" {
		return nil, fmt.Errorf("structured dtypes are not supported; save a plain array (or pack it as raw records with %s)", optname.Flag("record-size"))
	}
	f := npyFortran.FindStringSubmatch(h)
	if f == nil {
		return nil, fmt.Errorf(".npy header has no 'fortran_order'")
	}
	if f[1] == "True" {
		return nil, fmt.Errorf("the array is in Fortran order; save it in C order (np.ascontiguousarray) and pack again")
	}
	s := npyShape.FindStringSubmatch(h)
	if s == nil {
		return nil, fmt.Errorf(".npy header has no 'shape'")
	}
	descr := d[2]
	if strings.Contains(descr, "O") {
		return nil, fmt.Errorf("object arrays (pickled Python objects, dtype %q) cannot be packed; convert to a numeric dtype", descr)
	}
	item, err := DTypeSize(descr)
	if err != nil {
		return nil, err
	}
	var dims []int64
	for _, part := range strings.Split(s[1], ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(part, "L"), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf(".npy shape (%s) is not a tuple of sizes", s[1])
		}
		dims = append(dims, v)
	}
	if len(dims) == 0 {
		return nil, fmt.Errorf("the array is a scalar (shape ()); records are rows along the first axis")
	}
	for _, v := range dims[1:] {
		if v == 0 {
			return nil, fmt.Errorf("the array's rows are empty (shape %v has a 0 after the first axis)", dims)
		}
	}
	rs := item
	for _, v := range dims[1:] {
		if v != 0 && rs > math.MaxInt64/v {
			return nil, fmt.Errorf(".npy shape %v is too large", dims)
		}
		rs *= v
	}
	return &Npy{DType: descr, Shape: dims[1:], Records: dims[0], RecordSize: rs}, nil
}

var dtypeRE = regexp.MustCompile(`^[<>|=]?([biufcVSU])([1-9][0-9]{0,5})$`)

// DTypeSize returns the size in bytes of one element of a numpy type string: b, i, u, f, c,
// V and S give their size directly, U counts 4-byte characters.
func DTypeSize(dtype string) (int64, error) {
	g := dtypeRE.FindStringSubmatch(dtype)
	if g == nil {
		return 0, fmt.Errorf("dtype %q is not supported (numpy type strings such as \"<f4\", \"|u1\", \"|S16\")", dtype)
	}
	n, _ := strconv.ParseInt(g[2], 10, 64)
	if g[1] == "U" {
		n *= 4
	}
	return n, nil
}

// dtypeNames are the numpy names a user may give instead of a type string.
var dtypeNames = map[string]string{
	"bool": "|b1", "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
	"uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float16": "<f2", "float32": "<f4",
	"float64": "<f8", "complex64": "<c8", "complex128": "<c16",
}

// ParseDType returns dtype as a numpy type string with its byte order: a name (float32), or a
// type string with or without the order ("<f4", ">i2", "f4"; none or "=" is this machine's,
// little-endian; one-byte and byte-string types take "|").
func ParseDType(dtype string) (string, error) {
	if t, ok := dtypeNames[strings.ToLower(dtype)]; ok {
		return t, nil
	}
	g := dtypeRE.FindStringSubmatch(dtype)
	if g == nil {
		return "", fmt.Errorf("dtype %q is not a numpy type (a name such as float32 or uint16, or a type string such as \"<f4\")", dtype)
	}
	order := dtype[:len(dtype)-len(g[1])-len(g[2])]
	switch {
	case g[2] == "1" || g[1] == "S" || g[1] == "V" || g[1] == "b":
		order = "|"
	case order == "" || order == "=" || order == "|":
		order = "<"
	}
	return order + g[1] + g[2], nil
}

// IntSize returns the size in bytes of an element of a one-axis array of integers (1, 2, 4 or
// 8 bytes, signed or unsigned, either byte order), or 0 when h describes anything else.
func (h *Npy) IntSize() int {
	if len(h.Shape) != 0 || len(h.DType) != 3 || !strings.Contains("iu", h.DType[1:2]) {
		return 0
	}
	switch h.RecordSize {
	case 1, 2, 4, 8:
		return int(h.RecordSize)
	}
	return 0
}

// Ints decodes raw, the data of a one-axis array of integers (IntSize > 0), as int64s. An
// unsigned 64-bit value above math.MaxInt64 comes out negative.
func (h *Npy) Ints(raw []byte) []int64 {
	var order binary.ByteOrder = binary.LittleEndian
	if h.DType[0] == '>' {
		order = binary.BigEndian
	}
	size, signed := h.IntSize(), h.DType[1] == 'i'
	v := make([]int64, len(raw)/size)
	for i := range v {
		b := raw[i*size:]
		switch {
		case size == 1 && signed:
			v[i] = int64(int8(b[0]))
		case size == 1:
			v[i] = int64(b[0])
		case size == 2 && signed:
			v[i] = int64(int16(order.Uint16(b)))
		case size == 2:
			v[i] = int64(order.Uint16(b))
		case size == 4 && signed:
			v[i] = int64(int32(order.Uint32(b)))
		case size == 4:
			v[i] = int64(order.Uint32(b))
		default:
			v[i] = int64(order.Uint64(b))
		}
	}
	return v
}
