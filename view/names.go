package view

import (
	"fmt"
	"strconv"
	"strings"
)

// The names of a mounted tree and the shard rule, declared here once. fs serves them, the
// command line builds paths with them, and .blockfs/info.json publishes them (Tree) for every
// other client (the Python package, docs' examples).
//
//	epoch-NNNN             an epoch's records (Data); NNNN the epoch number in decimal,
//	epoch-NNNN.ids         zero-padded to at least 4 digits: only that spelling resolves
//	epoch-NNNN.offsets     (variable-length datasets only)
//	shard-R-of-W/          the same files for slice R of W of every epoch (ShardRange)
//	.blockfs/info.json     the mount's facts; stats.json its counters; names.txt the
//	                       dataset's source names, if it has them
const (
	epochPrefix   = "epoch-"
	epochDigits   = "%04d"
	shardPrefix   = "shard-"
	shardOf       = "-of-"
	IDsSuffix     = ".ids"      // an epoch's source ids
	OffsetsSuffix = ".offsets"  // an epoch's record offsets
	SourceSuffix  = ".source"   // a mixture's epoch: the source of each record
	MetaDir       = ".blockfs"  // the directory of the mount's own files
	InfoName      = "info.json" // in MetaDir
	StatsName     = "stats.json"
	NamesName     = "names.txt"
	// MaxShards bounds W in shard-R-of-W.
	MaxShards = 1 << 32
)

// The printf patterns of an epoch file and a shard directory, as Tree publishes them.
const (
	epochPattern = epochPrefix + epochDigits
	shardPattern = shardPrefix + "%d" + shardOf + "%d"
)

// kindSuffix is the suffix of each Kind's epoch file.
var kindSuffix = [...]string{Data: "", IDs: IDsSuffix, Offsets: OffsetsSuffix, Sources: SourceSuffix}

// EpochName returns the file name of epoch n's records.
func EpochName(n uint64) string { return fmt.Sprintf(epochPattern, n) }

// EpochFile returns the file name of kind k (Data, IDs or Offsets) of epoch n.
func EpochFile(n uint64, k Kind) string { return EpochName(n) + kindSuffix[k] }

// ShardDir returns the name of the directory of shard r of w.
func ShardDir(r, w uint64) string { return fmt.Sprintf(shardPattern, r, w) }

// Tree returns the names as .blockfs/info.json publishes them (its "tree"): printf patterns
// of an epoch file and a shard directory, the sidecars' suffixes, the names of the meta
// directory and its files, and the shard rule, "floor" (ShardRange).
func Tree() map[string]string {
	return map[string]string{
		"epoch": epochPattern, "shard_dir": shardPattern, "ids": IDsSuffix, "offsets": OffsetsSuffix,
		"meta_dir": MetaDir, "info": InfoName, "stats": StatsName, "names": NamesName, "shard_rule": "floor",
	}
}

// ShardRange returns slice r of w of an epoch of n records: floor(n / w) consecutive positions
// starting at r times that; the remainder at the end of the epoch belongs to no shard. Requires
// 0 <= r < w. Every shard file, and blockfs order --shard, use it.
func ShardRange(n, r, w uint64) Range {
	per := n / w
	return Range{r * per, (r + 1) * per}
}

// ParseShardDir parses "shard-R-of-W" with 0 <= R < W <= MaxShards, both in canonical decimal
// (no sign, no leading zeros).
func ParseShardDir(name string) (r, w uint64, ok bool) {
	rest, found := strings.CutPrefix(name, shardPrefix)
	if !found {
		return 0, 0, false
	}
	rs, ws, found := strings.Cut(rest, shardOf)
	if !found {
		return 0, 0, false
	}
	r, okR := parseCanonical(rs)
	w, okW := parseCanonical(ws)
	if !okR || !okW || strconv.FormatUint(r, 10) != rs || strconv.FormatUint(w, 10) != ws {
		return 0, 0, false
	}
	if w == 0 || w > MaxShards || r >= w {
		return 0, 0, false
	}
	return r, w, true
}

// parseCanonical parses a run of ASCII digits into a uint64.
func parseCanonical(s string) (uint64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
