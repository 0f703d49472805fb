package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/blockfs/blockfs/internal/fuseread"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/mount/report"
)

func newStats() *cobra.Command {
	var once, asJSON bool
	var every time.Duration
	c := &cobra.Command{
		Use:   "stats MOUNTPOINT",
		Short: "Watch a mount: throughput, stall, hit rate, disk or store rate, memory, and each reader",
		Long: `Watch a mount live, refreshed every --interval: its throughput (MB/s, records/s), the data
stall (the share of readers' time spent waiting for the disk or the object store), the cache's
hit rate, what is read below the cache (disk or store) per second, the daemon's memory, and a
line per open file (its reader's pid, how far into the file and how fast the daemon served it,
and its stall: the kernel reads ahead of a reader, so a reader may be behind what was served,
and read at a rate while none is served), and why reads failed, if any did.

On a terminal the view is redrawn in place until Ctrl-C. Otherwise (a pipe, a log) it prints
one JSON object per interval; --json does so on a terminal too. --once prints one snapshot
(over one interval) and exits. The figures come from MOUNTPOINT/.blockfs/stats.json, which
--metrics serves to Prometheus too (docs/USAGE.md).`,
		Args: exactArgs("MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			if every < 100*time.Millisecond {
				return usagef("--interval %v is too short (at least 100ms)", every)
			}
			return runStats(args[0], every, once, asJSON || !term.IsTerminal(int(os.Stdout.Fd())))
		},
	}
	fl := c.Flags()
	fl.BoolVar(&once, "once", false, "print one snapshot, over one interval, and exit")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object per interval even on a terminal")
	every = time.Second
	fl.Var((*seconds)(&every), "interval", "time between snapshots: seconds, or with a unit (500ms, 2m)")
	return c
}

// seconds is a duration flag that takes a number of seconds too (mount.ParseDuration).
type seconds time.Duration

func (d *seconds) String() string { return time.Duration(*d).String() }
func (d *seconds) Type() string   { return "duration" }

func (d *seconds) Set(s string) error {
	v, err := mount.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: give seconds (1, 0.5) or a unit (500ms, 2m)", s)
	}
	*d = seconds(v)
	return nil
}

// maxStatsBytes bounds a mount's stats.json (a line per open file: a few MiB for thousands).
const maxStatsBytes = 64 << 20

// statsFile reads the stats.json of the mount at mnt through fuseread: a daemon that does not
// answer within mountAnswerTime is an error naming the mount, and ctx (Ctrl-C) ends the wait.
func statsFile(ctx context.Context, mnt string) (report.Stats, error) {
	var s report.Stats
	name := filepath.Join(mount.MetaDir, report.StatsName)
	b, err := fuseread.ReadFile(ctx, filepath.Join(mnt, name), maxStatsBytes, mountAnswerTime)
	if err != nil {
		if errors.Is(err, fuseread.ErrTimeout) || ctx.Err() != nil {
			return s, noAnswer(mnt, "a read of its "+name, err)
		}
		return s, fmt.Errorf("cannot read %s's stats: %w", mnt, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s/%s: %w", mnt, name, err)
	}
	return s, nil
}

// recordSize returns the record size of the mount at mnt from its info.json, 0 when records
// vary (or it does not say).
func recordSize(ctx context.Context, mnt string) (int64, error) {
	b, err := fuseread.ReadFile(ctx, filepath.Join(mnt, mount.MetaDir, mount.InfoName), maxInfoBytes, mountAnswerTime)
	if errors.Is(err, fuseread.ErrTimeout) || ctx.Err() != nil {
		return 0, noAnswer(mnt, "a read of its "+mount.MetaDir+"/"+mount.InfoName, err)
	}
	var info struct {
		Kind       string `json:"kind"`
		RecordSize int64  `json:"record_size"`
	}
	if err != nil || json.Unmarshal(b, &info) != nil || info.Kind != "fixed" {
		return 0, nil
	}
	return info.RecordSize, nil
}

// View is one interval of a mount: what the live view shows, and the JSON line.
type View struct {
	Time          string  `json:"time"`
	Seconds       float64 `json:"interval_seconds"`
	MBps          float64 `json:"mb_per_s"`          // bytes served a second / 1e6
	Records       float64 `json:"records_per_s"`     // -1 when the records vary in size
	Stall         float64 `json:"stall"`             // waits over readers' time in the interval
	HitRate       float64 `json:"hit_rate"`          // cache hits over pages asked for; -1 with none asked
	SourceMBps    float64 `json:"source_mb_per_s"`   // bytes read below the cache a second / 1e6
	Store         bool    `json:"store"`             // the source is an object store
	CacheBytes    int64   `json:"cache_bytes"`       // held now
	CacheCapacity int64   `json:"cache_capacity"`    // the cache's size
	CacheShort    int64   `json:"cache_short"`       // what readers at once want beyond the budget
	RSS           int64   `json:"daemon_rss_bytes"`  // the daemon's resident memory
	WaitSeconds   float64 `json:"read_wait_seconds"` // since the mount, all readers
	ReadErrors    uint64  `json:"read_errors"`       // since the mount
	// LastErrors are the mount's last distinct failed reads (stats.json's), the most recent
	// last, each with its reason.
	LastErrors []report.ErrorStats `json:"last_errors,omitempty"`
	Sources    []SourceView        `json:"sources,omitempty"` // a mixture's sources, a dataset's fields
	Readers    []ReaderView        `json:"readers"`
}

// SourceView is one source of a mixture, or field of a dataset with fields, in an interval:
// what it gave the cache.
type SourceView struct {
	Name string  `json:"name"`
	MBps float64 `json:"mb_per_s"` // bytes it gave the cache a second / 1e6
}

// ReaderView is one open file in an interval.
type ReaderView struct {
	File     string  `json:"file"`
	PID      uint32  `json:"pid"`
	Position float64 `json:"position"` // share of the file before its latest read's end
	MBps     float64 `json:"mb_per_s"`
	Stall    float64 `json:"stall"` // its waits over its time in the interval
}

// interval computes the view between two snapshots dt apart; rs is the record size (0: vary).
func interval(a, b report.Stats, dt time.Duration, rs int64) View {
	sec := dt.Seconds()
	served := func(s report.Stats) uint64 { return s.DataServed + s.IDsServed + s.OffsetsServed + s.SourceServed }
	ac, bc := a.Cache, b.Cache
	v := View{Time: time.Now().Format(time.RFC3339), Seconds: sec, MBps: float64(served(b)-served(a)) / sec / 1e6, Records: -1,
		SourceMBps: float64(bc.DiskBytes-ac.DiskBytes) / sec / 1e6, Store: inStore(b), CacheBytes: bc.CachedBytes,
		CacheCapacity: bc.CapacityBytes, CacheShort: bc.Short, RSS: b.RSS, WaitSeconds: b.WaitSeconds, HitRate: -1, Readers: []ReaderView{},
		ReadErrors: b.ReadErrors, LastErrors: b.LastErrors}
	if rs > 0 {
		v.Records = float64(b.DataServed-a.DataServed) / float64(rs) / sec
	}
	if d := b.ReaderSeconds - a.ReaderSeconds; d > 0 {
		v.Stall = min(1, (b.WaitSeconds-a.WaitSeconds)/d)
	}
	if asked := (bc.Hits - ac.Hits) + (bc.Misses - ac.Misses) + (bc.Merged - ac.Merged); asked > 0 {
		v.HitRate = float64(bc.Hits-ac.Hits) / float64(asked)
	}
	prevSrc := map[int]uint64{} // a mount's sources stay, by index
	for _, src := range a.Sources {
		prevSrc[src.Index] = src.BytesRead
	}
	for _, src := range b.Sources {
		mbps := (float64(src.BytesRead) - float64(prevSrc[src.Index])) / sec / 1e6
		v.Sources = append(v.Sources, SourceView{Name: src.Name, MBps: mbps})
	}
	before := map[uint64]report.ReaderStats{}
	for _, r := range a.Readers {
		before[r.ID] = r
	}
	for _, r := range b.Readers {
		p := before[r.ID] // zero for a reader opened in the interval
		rv := ReaderView{File: r.File, PID: r.PID, MBps: float64(r.Bytes-p.Bytes) / sec / 1e6}
		if r.Size > 0 {
			rv.Position = float64(r.Position) / float64(r.Size)
		}
		if d := r.Active - p.Active; d > 0 {
			rv.Stall = min(1, (r.WaitSeconds-p.WaitSeconds)/d)
		}
		v.Readers = append(v.Readers, rv)
	}
	return v
}

// inStore reports whether the mount reads any of its data from an object store.
func inStore(s report.Stats) bool {
	for _, st := range s.Stores() {
		if st != nil {
			return true
		}
	}
	return false
}

// shownErrors is how many of the last failures the terminal view lists.
const shownErrors = 3

// render draws a view for a terminal.
func render(mnt string, v View) string {
	var b strings.Builder
	pct := func(f float64) string {
		if f < 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*f)
	}
	below := "disk"
	if v.Store {
		below = "store"
	}
	recs := "-"
	if v.Records >= 0 {
		recs = fmt.Sprintf("%.0f", v.Records)
	}
	fmt.Fprintf(&b, "blockfs stats %s   %s (every %.1fs)\n\n", mnt, v.Time, v.Seconds)
	fmt.Fprintf(&b, "  throughput  %9.1f MB/s   %12s records/s\n", v.MBps, recs)
	fmt.Fprintf(&b, "  stall       %9s        (readers' time waiting for the %s; %.1f s in all)\n", pct(v.Stall), below, v.WaitSeconds)
	fmt.Fprintf(&b, "  hit rate    %9s\n", pct(v.HitRate))
	fmt.Fprintf(&b, "  %-5s rate  %9.1f MB/s\n", below, v.SourceMBps)
	fmt.Fprintf(&b, "  memory      cache %s of %s; daemon RSS %s\n", ibytes(uint64(max(0, v.CacheBytes))), ibytes(uint64(max(0, v.CacheCapacity))), ibytes(uint64(max(0, v.RSS))))
	if v.CacheShort > 0 {
		fmt.Fprintf(&b, "  warning     the readers at once want %s more cache than the budget allows: raise %s\n", ibytes(uint64(v.CacheShort)), optname.Flag("cache-size"))
	}
	for _, s := range v.Sources {
		fmt.Fprintf(&b, "  source      %9.1f MB/s into the cache: %s\n", s.MBps, s.Name)
	}
	if v.ReadErrors > 0 {
		fmt.Fprintf(&b, "  errors      %9d reads failed since the mount; the latest:\n", v.ReadErrors)
		for _, e := range v.LastErrors[max(0, len(v.LastErrors)-shownErrors):] {
			fmt.Fprintf(&b, "    %s %s at %d (%d times): %s\n", e.Latest, e.File, e.Offset, e.Count, e.Reason)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  %-40s %8s %9s %11s %7s\n", "reader (open file)", "pid", "served to", "MB/s served", "stall")
	if len(v.Readers) == 0 {
		fmt.Fprintf(&b, "  (no file open)\n")
	} else {
		b.WriteString("  (as the daemon served them: the kernel reads ahead of a reader, which may read for a while from what it holds)\n")
	}
	for _, r := range v.Readers {
		fmt.Fprintf(&b, "  %-40s %8d %9s %11.1f %7s\n", r.File, r.PID, pct(r.Position), r.MBps, pct(r.Stall))
	}
	return b.String()
}

// runStats shows the mount at mnt every interval: a view redrawn in place, or JSON lines.
// Ctrl-C and SIGTERM end it at once, even while it waits for the mount (exit 0); a mount that
// does not answer within mountAnswerTime ends it with one line naming the mount (exit 1).
func runStats(dir string, every time.Duration, once, asJSON bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mnt, err := blockfsMountAt(ctx, dir)
	if err != nil || ctx.Err() != nil {
		return quit(ctx, err)
	}
	if mnt == "" {
		return usagef("%s is not a blockfs mount (no fuse.blockfs mount there in /proc/self/mountinfo); give the mountpoint", dir)
	}
	rs, err := recordSize(ctx, mnt)
	if err != nil {
		return quit(ctx, err)
	}
	prev, err := statsFile(ctx, mnt)
	if err != nil {
		return quit(ctx, err)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := statsFile(ctx, mnt)
		if err != nil {
			return quit(ctx, err)
		}
		now := time.Now()
		if cur.PID != prev.PID || cur.Uptime < prev.Uptime {
			// Mounted again since: its counters start over, and so does the interval.
			prev, last = cur, now
			continue
		}
		v := interval(prev, cur, now.Sub(last), rs)
		prev, last = cur, now
		if asJSON {
			line, _ := json.Marshal(v)
			fmt.Println(string(line))
		} else {
			if !once {
				fmt.Print("\x1b[H\x1b[2J") // home, clear
			}
			fmt.Print(render(mnt, v))
		}
		if once {
			return nil
		}
	}
}

// quit returns err, or nil once Ctrl-C or SIGTERM (ctx) has asked stats to end.
func quit(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
