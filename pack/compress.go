package pack

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// ParseCompress parses pack's --compress: "zstd" or "zstd:LEVEL" (1 to 22; zstd's default 3),
// "" or "none" for raw blocks (nil).
func ParseCompress(s string) (*layout.Compression, error) {
	codec, level, hasLevel := strings.Cut(s, ":")
	switch codec {
	case "", "none":
		if hasLevel {
			return nil, fmt.Errorf("%s %s: no level without a codec (zstd:LEVEL)", optname.Flag("compress"), s)
		}
		return nil, nil
	case layout.CodecZstd:
	default:
		return nil, fmt.Errorf("%s %s: unknown codec %q (zstd, zstd:LEVEL or none)", optname.Flag("compress"), s, codec)
	}
	c := &layout.Compression{Codec: codec, Level: layout.DefaultLevel, Frame: layout.DefaultFrame}
	if hasLevel {
		n, err := strconv.Atoi(level)
		if err != nil || n < 1 || n > 22 {
			return nil, fmt.Errorf("%s %s: the zstd level is a number from 1 to 22 (3 is zstd's default)", optname.Flag("compress"), s)
		}
		c.Level = n
	}
	return c, nil
}

// CompressText names a compression for messages and part options: "zstd:3", or "" for none.
func CompressText(c *layout.Compression) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s:%d", c.Codec, c.Level)
}

// compressNote returns what the user should know of a writer's --compress: that the trial
// kept the dataset (name: a field's) raw, and why; "" otherwise.
func compressNote(w *layout.Writer, name string) string {
	ratio, raw, ok := w.CompressResult()
	if !ok || !raw {
		return ""
	}
	what := "the dataset"
	if name != "" {
		what = fmt.Sprintf("field %q", name)
	}
	if ratio == 0 {
		return fmt.Sprintf("%s is stored raw: no block of it holds the %s %s tries before it compresses", what, humanize.IBytes(layout.MinTrial), optname.Flag("compress"))
	}
	return fmt.Sprintf("%s is stored raw: its first block compressed to %.0f%% of its bytes with %s, too little to pay for decompressing it (above %.0f%%)",
		what, 100*ratio, optname.Flag("compress"), 100*layout.KeepRawRatio)
}

// joinCompression enters a part's compression in the merged manifest m: the first
// compressed part's (format version 2); every compressed part has the same frames.
func joinCompression(m, part *layout.Manifest, name string) error {
	c := part.Compression
	switch {
	case c == nil:
		return nil
	case m.Compression == nil:
		cc := *c
		m.Compression, m.Version = &cc, layout.VersionCompressed
	case m.Compression.Codec != c.Codec || m.Compression.Frame != c.Frame:
		return fmt.Errorf("%s is foreign: its blocks are compressed with %s in frames of %d, other parts' with %s in frames of %d; pack it again with the same %s",
			name, c.Codec, c.Frame, m.Compression.Codec, m.Compression.Frame, optname.Flag("compress"))
	}
	return nil
}
