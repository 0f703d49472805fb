package pack

import (
	"fmt"
	"hash/maphash"
)

// WebDataset requires a sample's files to be next to each other in its shard. A tar made in
// directory order (`cd dir && tar -cf s.tar .`) lists them apart: the sample "s0003" then
// begins, ends at another sample's file, and begins again later; read as samples, that is
// two samples each lacking fields, which --fill-missing would fill with empty values (294
// samples from 100). wdsKeys remembers the keys of each shard's samples and the first that
// comes back. A key that comes back where every sample has every field is two whole samples,
// as webdataset reads it, and packs; where a sample lacks a field, the key that came back is
// what to say (wdsApart), with or without --fill-missing, rather than that the field is
// missing.

// maxShardKeys bounds the keys remembered of one shard (16 bytes each, and the map's share):
// past it, a key that comes back is not caught (a shard of millions of samples).
const maxShardKeys = 1 << 22

// wdsKeys is the keys of one shard's samples so far, as two 64-bit hashes (a false repeat
// needs a 128-bit collision), and the first key that came back in any shard.
type wdsKeys struct {
	shard  string
	s1, s2 maphash.Seed
	seen   map[[2]uint64]struct{}
	again  *wdsPlace // the first sample whose key came back after other samples of its shard
}

// start notes that a sample of key begins at member of shard (a new shard forgets the last
// one's keys) and reports whether its key came back.
func (k *wdsKeys) start(shard, key, member string) bool {
	if k.seen == nil || shard != k.shard {
		if k.seen == nil {
			k.s1, k.s2 = maphash.MakeSeed(), maphash.MakeSeed()
		}
		k.shard, k.seen = shard, make(map[[2]uint64]struct{})
	}
	h := [2]uint64{maphash.String(k.s1, key), maphash.String(k.s2, key)}
	if _, ok := k.seen[h]; ok {
		if k.again == nil {
			k.again = &wdsPlace{shard: shard, key: key, member: member}
		}
		return true
	}
	if len(k.seen) < maxShardKeys {
		k.seen[h] = struct{}{}
	}
	return false
}

// apart is the error for the first key that came back, nil when none did.
func (k *wdsKeys) apart() error {
	if k.again == nil {
		return nil
	}
	return fmt.Errorf("%s: sample %q comes back at member %q, after other samples: a sample's files must be next to each other in its shard (WebDataset's rule; a tar made in directory order, as `tar -cf s.tar .` makes it, lists them apart). Make the shard with sorted names (tar --sort=name -cf s.tar -C DIR .), or pack the folder itself (blockfs pack DIR OUT)",
		k.again.shard, k.again.key, k.again.member)
}
