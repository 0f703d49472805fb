//go:build tables

package pack

import "fmt"

// This build links apache/arrow-go (blockfs-tables; see samplepipe.go) and reads Parquet and
// Arrow itself.

// ReadTable opens Parquet or Arrow inputs in this process.
func ReadTable(format Format, paths, columns []string) (ColumnReader, error) {
	switch format {
	case Parquet:
		return OpenParquet(paths, columns)
	case Arrow:
		return OpenArrow(paths, columns)
	}
	return nil, fmt.Errorf("%s is not a table format", format)
}

// openTable opens Parquet or Arrow inputs in this process.
func openTable(format Format, paths, columns []string) (SampleReader, error) {
	return ReadTable(format, paths, columns)
}
