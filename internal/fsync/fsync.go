// Package fsync makes what a writer put on disk durable: the one place that syncs a
// filesystem (the blocks of a pack, before its manifest) and a folder (a rename in it), for
// layout's writer and pack's parts and merge alike.
package fsync

import (
	"os"

	"golang.org/x/sys/unix"
)

// FS flushes everything written to the filesystem holding dir (syncfs(2)).
func FS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// Dir syncs the folder dir, so that a rename or a new entry in it is durable.
func Dir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
