package fs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/view"
)

// Names of the mounted tree. An epoch file is "epoch-" and the epoch number in decimal,
// zero-padded to at least 4 digits; only that canonical spelling resolves.
const (
	epochPrefix  = "epoch-"
	shardPrefix  = "shard-"
	metaDir      = ".blockfs"
	infoName     = "info.json"
	statsName    = "stats.json"
	namesName    = "names.txt"
	idsSuffix    = ".ids"
	offsetSuffix = ".offsets"
	// maxShards bounds W in shard-R-of-W.
	maxShards = 1 << 32
)

// EpochName returns the file name of epoch n.
func EpochName(n uint64) string { return fmt.Sprintf("%s%04d", epochPrefix, n) }

// parseEpochName parses "epoch-NNNN", "epoch-NNNN.ids" and "epoch-NNNN.offsets".
func parseEpochName(name string) (epoch uint64, kind view.Kind, ok bool) {
	rest, found := strings.CutPrefix(name, epochPrefix)
	if !found {
		return 0, 0, false
	}
	kind = view.Data
	if r, cut := strings.CutSuffix(rest, idsSuffix); cut {
		rest, kind = r, view.IDs
	} else if r, cut := strings.CutSuffix(rest, offsetSuffix); cut {
		rest, kind = r, view.Offsets
	}
	n, ok := parseCanonical(rest)
	if !ok || EpochName(n) != epochPrefix+rest {
		return 0, 0, false
	}
	return n, kind, true
}

// parseShardName parses "shard-R-of-W" with 0 <= R < W <= maxShards, both in canonical
// decimal (no sign, no leading zeros).
func parseShardName(name string) (r, w uint64, ok bool) {
	rest, found := strings.CutPrefix(name, shardPrefix)
	if !found {
		return 0, 0, false
	}
	rs, ws, found := strings.Cut(rest, "-of-")
	if !found {
		return 0, 0, false
	}
	r, okR := parseCanonical(rs)
	w, okW := parseCanonical(ws)
	if !okR || !okW || strconv.FormatUint(r, 10) != rs || strconv.FormatUint(w, 10) != ws {
		return 0, 0, false
	}
	if w == 0 || w > maxShards || r >= w {
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
