package layout

// The writers of test datasets, for the tests in package layout_test.
var (
	WriteFixed    = writeFixed
	WriteVariable = writeVariable
)
