package view

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

func removeBlock(dir string, b int) error {
	return os.Remove(filepath.Join(dir, fmt.Sprintf("blocks/%06d.bin", b)))
}

var bg = context.Background()
