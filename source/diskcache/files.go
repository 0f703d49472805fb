package diskcache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/blockfs/blockfs/source"
)

// scan indexes DIR/*/* (oldest modification first), deleting temporary files.
func (b *Blocks) scan() error {
	dirs, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	type found struct {
		rel   string
		size  int64
		mtime time.Time
	}
	var all []found
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(b.dir, d.Name()))
		if err != nil {
			return err
		}
		for _, e := range ents {
			rel := d.Name() + "/" + e.Name()
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				_ = os.Remove(filepath.Join(b.dir, rel)) // a crash's leftover: never trusted
				continue
			}
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), fileSuffix) {
				continue
			}
			st, err := e.Info()
			if err != nil {
				continue // deleted meanwhile
			}
			all = append(all, found{rel, st.Size(), st.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.Before(all[j].mtime) })
	for _, f := range all {
		b.ents[f.rel] = b.lru.PushFront(&entry{rel: f.rel, size: f.size, keep: b.inSet(f.rel)})
		b.used += f.size
	}
	return nil
}

// inSet reports whether the cached file rel ("NAMESPACE/ID-CRC-SIZE.blk") is one of this
// mount's fixed set.
func (b *Blocks) inSet(rel string) bool {
	ns, name, ok := strings.Cut(rel, "/")
	if !ok || ns != b.ns {
		return false
	}
	var id source.FileID
	if _, err := fmt.Sscanf(name, "%d-", &id); err != nil || id >= b.keepBelow {
		return false
	}
	e, ok := b.t.Extent(id)
	return ok && e.Ident.HasCRC && name == fileName(id, e)
}

// fileSuffix ends the name of every cached file.
const fileSuffix = ".blk"

// fileName is the name of file id's copy: "ID-CRC32C-SIZE.blk".
func fileName(id source.FileID, e source.Extent) string {
	return fmt.Sprintf("%d-%08x-%d%s", id, e.Ident.CRC32C, e.Size, fileSuffix)
}

// file is one cacheable file of the table.
type file struct {
	id   source.FileID
	rel  string // NAMESPACE/NAME
	path string
	size int64
	crc  uint32
}

// evictLocked takes files out of the index until need more bytes fit within the limit, and
// returns their paths for the caller to delete after unlocking: the least recent files
// outside the fixed set first, then (only if that is not enough) the set's. Requires b.mu.
func (b *Blocks) evictLocked(need int64) []string {
	var gone []string
	for pass := 0; pass < 2 && b.used+need > b.limit; pass++ {
		for el := b.lru.Back(); el != nil && b.used+need > b.limit; {
			prev := el.Prev()
			if e := el.Value.(*entry); pass == 1 || !e.keep {
				b.lru.Remove(el)
				delete(b.ents, e.rel)
				b.used -= e.size
				gone = append(gone, filepath.Join(b.dir, filepath.FromSlash(e.rel)))
			}
			el = prev
		}
	}
	return gone
}

// remove deletes evicted files.
func (b *Blocks) remove(paths []string) {
	for _, p := range paths {
		b.evicted.Add(1)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.logf("blockfs: disk cache: %v", err)
		}
	}
}

// drop deletes f's copy, which failed its check, and takes it out of the index.
func (b *Blocks) drop(f file) {
	b.forget(f.rel)
	if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.logf("blockfs: disk cache: %v", err)
	}
}

// forget takes rel out of the index (its file is gone or bad).
func (b *Blocks) forget(rel string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := b.ents[rel]; el != nil {
		b.used -= el.Value.(*entry).size
		b.lru.Remove(el)
		delete(b.ents, rel)
	}
}
