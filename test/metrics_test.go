package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29: where the time goes. A dataset in MinIO is mounted through the fault proxy; half
// of it is read (and cached) at full speed, then the proxy adds latency to every request and
// two readers run at once: one of the cached half (served from memory) and one of the other
// half (every block from the slowed store). stats.json must show the stall for the second
// and none for the first; /metrics must parse and hold every metric docs/USAGE.md lists;
// blockfs stats --once must print the same in JSON.
func TestStallAndMetrics(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 4096, 0) // 4 MB of 1000-byte records
	url := "s3://data/stall"
	mustRun(t, "pack", "--quiet", "--endpoint="+srv.endpoint(), "--format", "raw", "--record-size", "1000", "--no-shuffle", "--block-size", "128KiB", raw, url)
	addr := freeAddr(t)
	m := mount(t, url, "--endpoint="+proxy.endpoint(), "--shuffle", "none", "--cache-size", "64MiB", "--readahead", "256KiB",
		"--disk-cache", filepath.Join(dir, "dc"), "--metrics", addr)

	cached, slow := m.path("shard-0-of-2/epoch-0000"), m.path("shard-1-of-2/epoch-0000")
	sh(t, "dd if="+cached+" of=/dev/null bs=1M status=none")
	proxy.delay.Store(int64(60 * time.Millisecond))
	defer proxy.delay.Store(0)

	// Both open at once; the cached half read with O_DIRECT, so its reads reach the daemon.
	fa, err := os.Open(slow)
	require.NoError(t, err)
	defer fa.Close()
	fb, err := os.OpenFile(cached, os.O_RDONLY|syscall.O_DIRECT, 0)
	require.NoError(t, err)
	defer fb.Close()
	var wg sync.WaitGroup
	for _, f := range []*os.File{fa, fb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := io.Copy(io.Discard, struct{ io.Reader }{f})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()

	var st struct {
		Wait    float64 `json:"read_wait_seconds"`
		Waited  uint64  `json:"reads_waited"`
		Stall   float64 `json:"stall"`
		Readers []struct {
			File   string  `json:"file"`
			PID    int     `json:"pid"`
			Reads  uint64  `json:"reads"`
			Waited uint64  `json:"reads_waited"`
			Wait   float64 `json:"wait_seconds"`
			Bytes  uint64  `json:"bytes"`
			Pos    int64   `json:"position"`
			Size   int64   `json:"size"`
			Stall  float64 `json:"stall"`
		} `json:"readers"`
		Store map[string]any `json:"store"`
	}
	require.NoError(t, json.Unmarshal(readWhole(t, m.path(".blockfs/stats.json"), 1<<20), &st))
	byFile := map[string]int{}
	for i, r := range st.Readers {
		byFile[r.File] = i
	}
	require.Contains(t, byFile, "shard-1-of-2/epoch-0000", "readers: %+v", st.Readers)
	require.Contains(t, byFile, "shard-0-of-2/epoch-0000", "readers: %+v", st.Readers)
	a, b := st.Readers[byFile["shard-1-of-2/epoch-0000"]], st.Readers[byFile["shard-0-of-2/epoch-0000"]]
	t.Logf("slowed reader: %d reads, %d waited, %.2f s waiting, stall %.2f; cached reader: %d reads, %d waited, %.3f s", a.Reads, a.Waited, a.Wait, a.Stall, b.Reads, b.Waited, b.Wait)
	assert.Equal(t, os.Getpid(), a.PID, "the reader's pid")
	assert.EqualValues(t, a.Size, a.Pos, "the slowed reader read to the end")
	assert.Greater(t, a.Wait, 0.1, "the slowed reader waited for the store (32 blocks, 60 ms a request)")
	assert.Positive(t, a.Waited)
	assert.Greater(t, a.Stall, 0.2, "most of the slowed reader's time went waiting")
	assert.Positive(t, b.Reads, "the cached reader's reads reached the daemon")
	assert.Zero(t, b.Waited, "the cached reader never waited")
	assert.Zero(t, b.Wait, "the cached reader never waited")
	assert.GreaterOrEqual(t, st.Wait, a.Wait)
	require.NotNil(t, st.Store, "an s3:// mount counts its store's requests")
	assert.Positive(t, st.Store["requests"])

	// blockfs stats --once: not on a terminal, one JSON line, with both readers.
	out := mustRun(t, "stats", "--once", "--interval", "300ms", m.dir)
	var view struct {
		Stall   *float64 `json:"stall"`
		MBps    *float64 `json:"mb_per_s"`
		Hit     *float64 `json:"hit_rate"`
		Store   bool     `json:"store"`
		Readers []struct {
			File     string  `json:"file"`
			Position float64 `json:"position"`
		} `json:"readers"`
	}
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one line: %q", out)
	require.NoError(t, json.Unmarshal([]byte(out), &view), out)
	require.NotNil(t, view.Stall)
	require.NotNil(t, view.MBps)
	require.NotNil(t, view.Hit)
	assert.True(t, view.Store)
	require.Len(t, view.Readers, 2, out)
	for _, r := range view.Readers {
		assert.InDelta(t, 1, r.Position, 1e-9, "%s read to its end", r.File)
	}

	// Without --once and off a terminal: a JSON object per interval, until stopped.
	live := exec.Command(bin, "stats", "--interval", "200ms", m.dir)
	pipe, err := live.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, live.Start())
	lines := bufio.NewScanner(pipe)
	for i := range 3 {
		require.True(t, lines.Scan(), "line %d of blockfs stats", i)
		var v map[string]any
		require.NoError(t, json.Unmarshal(lines.Bytes(), &v), "line %d: %s", i, lines.Text())
		assert.Contains(t, v, "readers")
	}
	require.NoError(t, live.Process.Signal(os.Interrupt))
	assert.NoError(t, live.Wait(), "blockfs stats ends cleanly on Ctrl-C")

	// /metrics parses, and has every metric docs/USAGE.md documents.
	fams := scrape(t, addr)
	for _, name := range documentedMetrics(t) {
		if strings.HasPrefix(name, "blockfs_source_load") {
			continue // a mixture's or fields dataset's (TestSourceMetricsLocal)
		}
		if strings.HasPrefix(name, "blockfs_decompress_") {
			continue // a compressed dataset's (TestCompressedS3)
		}
		assert.Contains(t, fams, name, "documented metric %s is not served", name)
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines"} {
		assert.Contains(t, fams, name)
	}
	value := func(name string, labels map[string]string) float64 {
		f := fams[name]
		require.NotNil(t, f, name)
	next:
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("%s has no metric with labels %v", name, labels)
		return 0
	}
	assert.InDelta(t, st.Wait, value("blockfs_read_wait_seconds_total", nil), 0.5, "the stall in /metrics is stats.json's")
	assert.GreaterOrEqual(t, value("blockfs_read_bytes_total", map[string]string{"file": "data"}), float64(4096*1000))
	assert.Positive(t, value("blockfs_read_duration_seconds", nil))
	assert.Positive(t, value("blockfs_read_wait_duration_seconds", nil))
	assert.Positive(t, value("blockfs_store_requests_total", map[string]string{"source": "0"}))
	assert.EqualValues(t, 2, value("blockfs_open_readers", nil))
}

// scrape reads http://addr/metrics and parses it with Prometheus' own text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// documentedMetrics returns the blockfs_ metrics docs/USAGE.md's metrics table lists.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../docs/USAGE.md")
	require.NoError(t, err)
	defer f.Close()
	re := regexp.MustCompile("^\\| `(blockfs_[a-z_]+)`")
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, len(names), 20, "docs/USAGE.md's metrics table")
	return names
}

// TestMetricsRefusals: --metrics serves loopback only unless asked; blockfs stats names what
// is wrong in one line.
func TestMetricsRefusals(t *testing.T) {
	p := packRaw(t, 64, "64KiB")
	mnt := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics", "0.0.0.0:9560"}, "--metrics-allow-remote"},
		{[]string{"--metrics", ":9560"}, "--metrics-allow-remote"},
		{[]string{"--metrics", "127.0.0.1"}, "HOST:PORT"},
		{[]string{"--metrics-allow-remote"}, "goes with --metrics"},
	} {
		_, errs, code := run(t, append([]string{"mount", p.dir, mnt}, c.args...)...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errs)
		assert.Contains(t, errs, c.want, "%v", c.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)
	}
	assert.False(t, isMounted(mnt))
	_, errs, code := run(t, "stats", "--once", t.TempDir())
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "is not a blockfs mount")
}

// TestStatsUnderTmux runs blockfs stats in a tmux window of 100x30 while a reader reads, and
// captures the pane (tmux capture-pane): the live view, as a person sees it.
func TestStatsUnderTmux(t *testing.T) {
	requireFUSE(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("BLOCKFS_REQUIRE_FUSE") != "" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("tmux is not installed")
	}
	p := packRaw(t, 8192, "256KiB")
	m := mount(t, p.dir, "--cache-size", "64MiB", "--readahead", "4MiB")
	// Two readers at about 10 MB/s each while the view runs.
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, name := range []string{"epoch-0001", "shard-1-of-2/epoch-0002"} {
		f, err := os.Open(m.path(name))
		require.NoError(t, err)
		defer f.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := f.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	screen := statsScreen(t, m.dir)
	close(done)
	wg.Wait()
	t.Logf("blockfs stats under tmux:\n%s", screen)
	for _, want := range []string{"throughput", "MB/s", "stall", "hit rate", "disk  rate", "memory", "reader (open file)", "epoch-0001", "shard-1-of-2/epoch-0002"} {
		assert.Contains(t, screen, want)
	}
	if out := os.Getenv("BLOCKFS_STATS_SCREEN"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(screen), 0o644)) // scripts/stats-screen.sh
	}
}

// statsScreen runs blockfs stats on mnt in a detached tmux session and returns the pane's text
// after a few refreshes.
func statsScreen(t *testing.T, mnt string) string {
	session := fmt.Sprintf("blockfs-test-%d", os.Getpid())
	cmd := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "24", bin+" stats --interval 500ms "+mnt)
	cmd.Env = append(os.Environ(), "TERM=xterm")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	time.Sleep(1800 * time.Millisecond)
	screen, err := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
	require.NoError(t, err)
	return string(screen)
}

// TestOrderPlot: order --stats --plot draws its figures into a PNG and an SVG with the axes
// the figures need; bad --plot names are refused in one line.
func TestOrderPlot(t *testing.T) {
	p := packRaw(t, 20000, "16KiB")
	dir := t.TempDir()
	labels := filepath.Join(dir, "labels.txt")
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "%d\n", i*10/20000) // stored in class order
	}
	require.NoError(t, os.WriteFile(labels, []byte(b.String()), 0o644))
	png, svg := filepath.Join(dir, "order.png"), filepath.Join(dir, "order.svg")
	out := mustRun(t, "order", p.dir, "--stats", "--mix", "2", "--labels", labels, "--plot", png)
	assert.Contains(t, out, "plot: "+png)
	assert.Contains(t, out, "distinct blocks per batch of 256", "the figures are printed too")
	f, err := os.Open(png)
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 24)
	_, err = io.ReadFull(f, head)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG\r\n\x1a\n", string(head[:8]), "a PNG")
	w, h := be32(head[16:]), be32(head[20:])
	t.Logf("%s: %dx%d", png, w, h)
	assert.Greater(t, w, uint32(500))
	assert.Greater(t, h, w, "four panels stacked")

	mustRun(t, "order", p.dir, "--stats", "--mix", "2", "--labels", labels, "--plot", svg)
	text := string(readWhole(t, svg, 1<<20))
	for _, want := range []string{"batch of 256 records", "distinct blocks in the batch", "labels&#39; distance from the dataset&#39;s (TV)",
		"position in epoch e", "position in epoch e+1", "this order", "uniform shuffle"} {
		assert.Contains(t, text, want, "the SVG's axes and legends")
	}
	for _, c := range [][]string{{"--stats", "--plot", filepath.Join(dir, "x.txt")}, {"--ids", "--plot", png}, {"--stats", "--plot", "/no/such/dir/x.png"}} {
		_, errs, code := run(t, append([]string{"order", p.dir}, c...)...)
		assert.Equal(t, 2, code, "%v: %s", c, errs)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)
	}
}

// TestOrderPlotMixture: order --stats --plot of a mixture draws how far each batch strays from
// the sources' shares, beside a uniform shuffle of the same records.
func TestOrderPlotMixture(t *testing.T) {
	a, b := packRaw(t, 6000, "16KiB"), packRaw(t, 3000, "16KiB")
	dir := t.TempDir()
	mix := writeMixture(t, dir, "mix.json", fmt.Sprintf(`{"epoch_records": 9000, "sources": [{"data": %q, "weight": 2}, {"data": %q, "weight": 1}]}`, a.dir, b.dir))
	svg := filepath.Join(dir, "mix.svg")
	out := mustRun(t, "order", mix, "--stats", "--plot", svg)
	assert.Contains(t, out, "plot: "+svg)
	assert.Contains(t, out, "largest |count - share| in a batch of 256", "the figures are printed too")
	text := string(readWhole(t, svg, 1<<20))
	for _, want := range []string{"sources&#39; shares per batch", "batch of 256 records", "largest |count - share| of a source", "this order", "uniform shuffle"} {
		assert.Contains(t, text, want, "the SVG's axes and legends")
	}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// TestSourceMetricsLocal: a mixture of two local datasets has per-source series in /metrics,
// as stats.json's "sources" has (issue 39: only store and disk cache series had a source).
func TestSourceMetricsLocal(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	rawSource(t, dir, "small", 0, 3000, 64)
	rawSource(t, dir, "large", 1, 5000, 64)
	mix := writeMixture(t, dir, "mix.json", `{"sources": [{"data": "small", "weight": 0.5}, {"data": "large", "weight": 0.5}]}`)
	addr := freeAddr(t)
	m := mount(t, mix, "--metrics", addr)
	_, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	fams := scrape(t, addr)
	for _, name := range []string{"blockfs_source_loads_total", "blockfs_source_loaded_bytes_total"} {
		f := fams[name]
		require.NotNil(t, f, name)
		got := map[string]float64{}
		for _, mt := range f.Metric {
			labels := map[string]string{}
			for _, l := range mt.Label {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["source"]+" "+labels["name"]] = mt.Counter.GetValue()
		}
		assert.Len(t, got, 2, "%s: %v", name, got)
		assert.Positive(t, got["0 small"], "%s: %v", name, got)
		assert.Positive(t, got["1 large"], "%s: %v", name, got)
	}
}
