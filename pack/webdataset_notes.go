package pack

import (
	"fmt"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
)

// What a WebDataset scan found beside the samples, for pack's summary and its refusals.

// lacking reports whether some sample lacks a field.
func (sc *wdsScan) lacking() bool {
	for j := range sc.names {
		if sc.count[j] < sc.samples {
			return true
		}
	}
	return false
}

// filledNote says how many empty values fill gives, by field: "filled 194 empty values
// (--fill-missing): cls 100 of 294 samples, ..."; "" when none (or without fill).
func (sc *wdsScan) filledNote(fill bool) string {
	if !fill {
		return ""
	}
	var parts []string
	var total int64
	for j, name := range sc.names {
		if n := sc.samples - sc.count[j]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
			total += n
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("filled %d empty values (%s) of %d samples: %s", total, optname.Flag("fill-missing"), sc.samples, strings.Join(parts, ", "))
}

// skippedNote says what the scan skipped other than folders: "skipped 3 members, not
// webdataset sample files: ..."; "" when nothing.
func (sc *wdsScan) skippedNote() string {
	var parts []string
	var total int64
	for kind := wdsNotRegular; kind <= wdsNoExtension; kind++ {
		if n := sc.skipped[kind]; n > 0 {
			ex := sc.skippedEx[kind]
			parts = append(parts, fmt.Sprintf("%d %s (%q in %s)", n, wdsKindNames[kind], ex.member, ex.shard))
			total += n
		}
	}
	if total == 0 {
		return ""
	}
	plural := "s"
	if total == 1 {
		plural = ""
	}
	return fmt.Sprintf("skipped %d member%s, not webdataset sample files: %s", total, plural, strings.Join(parts, ", "))
}
