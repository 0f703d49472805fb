//go:build !tables

package pack

import "fmt"

// This build does not link apache/arrow-go (see samplepipe.go): Parquet and Arrow are read by
// running blockfs-tables.

// ReadTable opens Parquet or Arrow inputs in this process: only blockfs-tables can.
func ReadTable(format Format, paths, columns []string) (ColumnReader, error) {
	return nil, fmt.Errorf("this blockfs does not read %s itself; %s does (blockfs pack runs it)", format, TablesBinary)
}

// openTable opens Parquet or Arrow inputs through blockfs-tables.
func openTable(format Format, paths, columns []string) (SampleReader, error) {
	return openPiped(format, paths, columns)
}
