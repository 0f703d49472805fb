package pack

import (
	"fmt"
	"hash/maphash"
)

// WebDataset requires a sample's files to be next to each other in its shard. A tar made in
// directory order (`cd dir && tar -cf s.tar .`) lists them apart: the sample "s0003" then
// begins, ends at another sample's file, and begins again later, and read as samples that
// would be two samples each lacking fields, which --fill-missing would fill with empty values
// (294 samples from 100). wdsKeys remembers the keys of one shard's samples and refuses one
// that comes back, naming the fix.

// maxShardKeys bounds the keys remembered of one shard (16 bytes each, and the map's share):
// past it, a key that comes back is not caught (a shard of millions of samples).
const maxShardKeys = 1 << 22

// wdsKeys is the keys of one shard's samples so far, as two 64-bit hashes (a false repeat
// needs a 128-bit collision).
type wdsKeys struct {
	shard  string
	s1, s2 maphash.Seed
	seen   map[[2]uint64]struct{}
}

// start notes that a sample of key begins at member of shard (a new shard forgets the last
// one's keys), or refuses a key the shard had before.
func (k *wdsKeys) start(shard, key, member string) error {
	if k.seen == nil || shard != k.shard {
		if k.seen == nil {
			k.s1, k.s2 = maphash.MakeSeed(), maphash.MakeSeed()
		}
		k.shard, k.seen = shard, make(map[[2]uint64]struct{})
	}
	h := [2]uint64{maphash.String(k.s1, key), maphash.String(k.s2, key)}
	if _, ok := k.seen[h]; ok {
		return wdsApart(shard, key, member)
	}
	if len(k.seen) < maxShardKeys {
		k.seen[h] = struct{}{}
	}
	return nil
}

// wdsApart is the error for a sample whose files are not next to each other in its shard.
func wdsApart(shard, key, member string) error {
	return fmt.Errorf("%s: sample %q comes back at member %q, after other samples: a sample's files must be next to each other in its shard (WebDataset's rule; a tar made in directory order, as `tar -cf s.tar .` makes it, lists them apart). Make the shard with sorted names (tar --sort=name -cf s.tar -C DIR .), or pack the folder itself (blockfs pack DIR OUT)",
		shard, key, member)
}
