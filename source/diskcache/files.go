package diskcache

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/source"
)

// scan indexes the own directory's NAMESPACE/NAME files (oldest modification first),
// deleting its temporary files. Names of other patterns, and anything not a regular file, are
// left as they are.
func (b *Blocks) scan() error {
	var dirs []string
	if err := b.at(func(root int) (err error) { dirs, err = readDirAt(root, "."); return err }); err != nil {
		return err
	}
	type found struct {
		rel   string
		size  int64
		mtime time.Time
	}
	var all []found
	for _, d := range dirs {
		if !namespaceRE.MatchString(d) {
			continue
		}
		var names []string
		err := b.at(func(root int) (err error) { names, err = readDirAt(root, d); return err })
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, fs.ErrNotExist) {
			continue // not a directory of ours (a symbolic link, a file), or deleted meanwhile
		}
		if err != nil {
			return err
		}
		for _, name := range names {
			rel := d + "/" + name
			if tmpRE.MatchString(name) {
				_ = b.unlinkAt(rel) // a crash's leftover: never trusted
				continue
			}
			if !fileRE.MatchString(name) {
				continue
			}
			var st unix.Stat_t
			if b.at(func(root int) error { return unix.Fstatat(root, rel, &st, unix.AT_SYMLINK_NOFOLLOW) }) != nil ||
				st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue // deleted meanwhile, or not a file: replaced when the file is kept again
			}
			all = append(all, found{rel, st.Size, time.Unix(st.Mtim.Unix())})
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
	if _, err := fmt.Sscanf(name, "%d-", &id); err != nil || !b.keeps(id) {
		return false
	}
	e, ok := b.t.Extent(id)
	return ok && e.Ident.HasCRC && name == fileName(id, e)
}

// fileSuffix ends the name of every cached file.
const fileSuffix = ".blk"

// The names of the cache's files: fileName's, and a temporary file's (tmpName's). The cache
// deletes no other name.
var (
	fileRE = regexp.MustCompile(`^[0-9]+-[0-9a-f]{8}-[0-9]+\.blk$`)
	tmpRE  = regexp.MustCompile(`^[0-9]+-[0-9a-f]{8}-[0-9]+\.blk\.[0-9a-f]{16}\.tmp$`)
)

// tmpName returns a new name for a temporary file of the copy named name.
func tmpName(name string) string {
	return fmt.Sprintf("%s.%016x%s", name, rand.Uint64(), tmpSuffix)
}

// fileName is the name of file id's copy: "ID-CRC32C-SIZE.blk".
func fileName(id source.FileID, e source.Extent) string {
	return fmt.Sprintf("%d-%08x-%d%s", id, e.Ident.CRC32C, e.Size, fileSuffix)
}

// file is one cacheable file of the table.
type file struct {
	id   source.FileID
	rel  string // NAMESPACE/NAME
	path string // for messages: DIR/blockfs-cache-UID/NAMESPACE/NAME
	size int64
	crc  uint32
}

// evictLocked takes files out of the index until need more bytes fit within the limit, and
// returns them ("NAMESPACE/NAME") for the caller to delete after unlocking: the least recent
// files outside the fixed set first, then (only if that is not enough) the set's. Requires
// b.mu.
func (b *Blocks) evictLocked(need int64) []string {
	var gone []string
	for pass := 0; pass < 2 && b.used+need > b.limit; pass++ {
		for el := b.lru.Back(); el != nil && b.used+need > b.limit; {
			prev := el.Prev()
			if e := el.Value.(*entry); pass == 1 || !e.keep {
				b.lru.Remove(el)
				delete(b.ents, e.rel)
				b.used -= e.size
				gone = append(gone, e.rel)
			}
			el = prev
		}
	}
	return gone
}

// remove deletes evicted files (rels).
func (b *Blocks) remove(rels []string) {
	for _, rel := range rels {
		b.evicted.Add(1)
		if err := b.unlinkAt(rel); err != nil {
			b.logf("blockfs: disk cache: %v", err)
		}
	}
}

// drop deletes f's copy, which failed its check, and takes it out of the index.
func (b *Blocks) drop(f file) {
	b.forget(f.rel)
	if err := b.unlinkAt(f.rel); err != nil {
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
