package layout

// The writers of test datasets, for the tests in package layout_test.
var (
	WriteFixed    = writeFixed
	WriteVariable = writeVariable
)

// CreateFields starts a dataset with fields at dst (replacing one at Commit with force).
// blockSize is the target bytes of a block of all the fields together.
func CreateFields(dst string, fields []Field, blockSize int64, source string, force bool) (*FieldWriter, error) {
	return CreateFieldsWith(dst, fields, FieldsOptions{BlockSize: blockSize, Source: source, Force: force})
}
