package report

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blockfs/blockfs/internal/connlimit"
	"github.com/blockfs/blockfs/internal/fdlimit"
	"github.com/blockfs/blockfs/internal/optname"
)

// --metrics ADDR serves the mount's counters at http://ADDR/metrics in Prometheus' text format
// (client_golang, the Prometheus project's own Go client, with its process and Go collectors):
// docs/USAGE.md, "Metrics", says what each metric means. The counters are read from the same
// snapshot as stats.json at each scrape; only the two histograms cost the read path anything
// (an observation per FUSE read), and only with --metrics.

// CheckAddr checks --metrics ADDR: host:port, with a loopback host (127.0.0.1,
// localhost, [::1]) unless remote is set (--metrics-allow-remote).
func CheckAddr(addr string, remote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return optname.Errorf("metrics", "%s %q: want HOST:PORT, e.g. 127.0.0.1:9560 (%v)", optname.Flag("metrics"), addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return optname.Errorf("metrics", "%s %q: port %q is not a number from 0 to 65535", optname.Flag("metrics"), addr, port)
	}
	if remote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return optname.Errorf("metrics", "%s %q would serve the metrics beyond this machine; give a loopback address (127.0.0.1:%s), or add %s to mean it",
			optname.Flag("metrics"), addr, port, optname.Flag("metrics-allow-remote"))
	}
	return nil
}

// Metrics is a mount's Prometheus registry (--metrics).
type Metrics struct {
	reg      *prometheus.Registry
	latency  prometheus.Histogram // every read's time in the daemon
	wait     prometheus.Histogram // the time waited, of reads that waited
	Snapshot func() Stats         // the mount's stats now; set once the mount is up
	record   int64                // bytes a record, 0 when records vary
}

// NewMetrics returns the registry of a mount of records of recordSize bytes (0: varying);
// its Snapshot is set once the mount is up.
func NewMetrics(recordSize int64) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), record: recordSize}
	buckets := prometheus.ExponentialBuckets(10e-6, 4, 10) // 10 us to 2.6 s
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "blockfs_read_duration_seconds",
		Help: "Time a FUSE read took in the daemon, waits included.", Buckets: buckets})
	m.wait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "blockfs_read_wait_duration_seconds",
		Help: "Time a FUSE read that waited for a load (disk or object store) waited.", Buckets: buckets})
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.latency, m.wait, (*statsCollector)(m))
	return m
}

// OnRead is fs.Options.OnRead.
func (m *Metrics) OnRead(took, waited time.Duration) {
	m.latency.Observe(took.Seconds())
	if waited > 0 {
		m.wait.Observe(waited.Seconds())
	}
}

// The metrics server's bounds: anyone on the machine can connect to it, and must not be able
// to take the descriptors, memory or goroutines the mount's reads need. Connections are
// capped at a share of the open-file limit (metricsConns); a client has metricsHeaderTime to
// send its request's headers and metricsReadTime for the whole request, a scrape is written
// within metricsWriteTime, and a kept-alive connection idle for metricsIdleTime is closed.
const (
	metricsHeaderTime = 5 * time.Second
	metricsReadTime   = 10 * time.Second
	metricsWriteTime  = 30 * time.Second
	metricsIdleTime   = 60 * time.Second
	metricsHeaderMax  = 8 << 10 // bytes of request headers; a scrape sends a few hundred
)

// metricsConns is how many connections the metrics server holds at once: 1/16 of the
// open-file limit, 4 to 32 (16 at ulimit -n 256, 32 from 512 up; Prometheus needs one). A
// connection past it closes the oldest idle one, or itself (connlimit).
func metricsConns() int { return fdlimit.Share(16, 4, 32) }

// Serve serves the registry on l until the listener is closed.
func (m *Metrics) Serve(l net.Listener) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: log.Default()}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "blockfs: the metrics are at /metrics", http.StatusNotFound)
	})
	capped := connlimit.New(l, metricsConns())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsHeaderTime, ReadTimeout: metricsReadTime,
		WriteTimeout: metricsWriteTime, IdleTimeout: metricsIdleTime, MaxHeaderBytes: metricsHeaderMax,
		ConnState: capped.ConnState}
	if err := srv.Serve(capped); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Printf("blockfs: %s: %v", optname.Flag("metrics"), err)
	}
}

// metric is one counter or gauge of the stats snapshot.
type metric struct {
	name, help string
	kind       prometheus.ValueType
	labels     []string
	desc       *prometheus.Desc
}

func counter(name, help string, labels ...string) *metric {
	return &metric{name: name, help: help, kind: prometheus.CounterValue, labels: labels}
}

func gauge(name, help string, labels ...string) *metric {
	return &metric{name: name, help: help, kind: prometheus.GaugeValue, labels: labels}
}

// The metrics of a stats snapshot (docs/USAGE.md, "Metrics").
var (
	mReadBytes    = counter("blockfs_read_bytes_total", "Bytes served to readers, by file: data (epoch and shard files, fields' values), ids, offsets, source.", "file")
	mReadRecords  = counter("blockfs_read_records_total", "Records served (data bytes over the record size; datasets of fixed-size records only).")
	mReads        = counter("blockfs_read_requests_total", "FUSE read requests answered.")
	mReadErrors   = counter("blockfs_read_errors_total", "Reads answered with an error, by kind: changed, gone, corrupt, denied, unavailable, disk, fds, memory, interrupted, missing, other (stats.json's last_errors says why).", "kind")
	mReadsWaited  = counter("blockfs_read_waits_total", "FUSE reads that waited for a load from the disk or the object store.")
	mWaitSeconds  = counter("blockfs_read_wait_seconds_total", "Seconds reads waited for loads, summed over readers: the data stall.")
	mReadSeconds  = counter("blockfs_read_seconds_total", "Seconds reads took in the daemon, waits included, summed over readers.")
	mReaderSecs   = counter("blockfs_reader_seconds_total", "Seconds readers have been reading (from each one's first read), summed: the stall fraction is read_wait_seconds over it.")
	mReaders      = gauge("blockfs_open_readers", "Files open for reading now.")
	mPCDrops      = counter("blockfs_page_cache_drops_total", "Ranges of epoch files readers had passed, dropped from the kernel's page cache.")
	mPCDropSecs   = counter("blockfs_page_cache_drop_seconds_total", "Seconds the kernel took to drop them, on the daemon's drop workers.")
	mPCSkipped    = counter("blockfs_page_cache_drops_skipped_total", "Ranges left in the kernel's page cache because the drop workers were behind.")
	mHits         = counter("blockfs_cache_hits_total", "Cache pages found loaded.")
	mMisses       = counter("blockfs_cache_misses_total", "Cache pages a reader had to load.")
	mMerged       = counter("blockfs_cache_merged_misses_total", "Cache pages a reader found loading and waited for.")
	mEvictions    = counter("blockfs_cache_evictions_total", "Cache pages dropped to make room.")
	mUncached     = counter("blockfs_cache_uncached_pages_total", "Pages served without a cache slot (every slot pinned).")
	mRAHits       = counter("blockfs_readahead_hits_total", "Prefetched pages later read.")
	mRAWasted     = counter("blockfs_readahead_wasted_total", "Prefetched pages evicted unread.")
	mRADropped    = counter("blockfs_readahead_dropped_total", "Readahead requests dropped (queue full, or every slot pinned).")
	mRALate       = counter("blockfs_readahead_late_total", "Readahead requests dropped because their reader had read past them (readahead behind the reads).")
	mDiskReads    = counter("blockfs_source_reads_total", "Reads issued below the cache (to local disk or to the object store).")
	mDiskBytes    = counter("blockfs_source_read_bytes_total", "Bytes read below the cache (from local disk or the object store).")
	mDiskErrors   = counter("blockfs_source_errors_total", "Failed reads below the cache.")
	mCacheBytes   = gauge("blockfs_cache_bytes", "Bytes of loaded pages the cache holds now.")
	mCacheCap     = gauge("blockfs_cache_capacity_bytes", "The cache's size, in whole pages.")
	mCacheShort   = gauge("blockfs_cache_short_bytes", "How much more cache the readers at once want than the budget allows; 0 when it holds them.")
	mStoreReqs    = counter("blockfs_store_requests_total", "Object store requests tried, retries included.", "source")
	mStoreRetries = counter("blockfs_store_retries_total", "Object store tries after a failed one.", "source")
	mStoreErrors  = counter("blockfs_store_errors_total", "Failed object store tries, by kind: throttled, server, timeout, network, client, other.", "source", "kind")
	mDCHits       = counter("blockfs_disk_cache_hits_total", "Reads served from a "+optname.Flag("disk-cache")+" file.", "source")
	mDCFetches    = counter("blockfs_disk_cache_fetches_total", "Files fetched from the object store through the "+optname.Flag("disk-cache")+".", "source")
	mDCFetchBytes = counter("blockfs_disk_cache_fetched_bytes_total", "Bytes fetched from the object store through the "+optname.Flag("disk-cache")+".", "source")
	mDCEvicted    = counter("blockfs_disk_cache_evictions_total", optname.Flag("disk-cache")+" files deleted to stay within its size.", "source")
	mDCBytes      = gauge("blockfs_disk_cache_bytes", "Bytes of "+optname.Flag("disk-cache")+" files now.", "source")
	mSrcLoads     = counter("blockfs_source_loads_total", "Reads a mixture's source or a dataset's field gave the cache (from disk, the disk cache or the store), by source index and name.", "source", "name")
	mSrcLoadBytes = counter("blockfs_source_loaded_bytes_total", "Bytes a mixture's source or a dataset's field gave the cache, by source index and name.", "source", "name")
	mGoroutines   = gauge("blockfs_goroutines", "The daemon's goroutines.")
	mDecFrames    = counter("blockfs_decompress_frames_total", "Compressed frames decompressed (pack "+optname.Flag("compress")+").", "source")
	mDecStored    = counter("blockfs_decompress_stored_bytes_total", "Compressed bytes of the frames decompressed.", "source")
	mDecBytes     = counter("blockfs_decompress_bytes_total", "Uncompressed bytes of the frames decompressed.", "source")
	mDecSeconds   = counter("blockfs_decompress_seconds_total", "Time spent decompressing frames, on the loads' goroutines.", "source")
	mDecErrors    = counter("blockfs_decompress_errors_total", "Damaged compressed headers and frames met (each an EIO).", "source")

	allMetrics = []*metric{mReadBytes, mReadRecords, mReads, mReadErrors, mReadsWaited, mWaitSeconds, mReadSeconds,
		mReaderSecs, mReaders, mPCDrops, mPCDropSecs, mPCSkipped, mHits, mMisses, mMerged, mEvictions, mUncached, mRAHits, mRAWasted, mRADropped, mRALate,
		mDiskReads, mDiskBytes, mDiskErrors, mCacheBytes, mCacheCap, mCacheShort, mStoreReqs, mStoreRetries, mStoreErrors,
		mDCHits, mDCFetches, mDCFetchBytes, mDCEvicted, mDCBytes, mSrcLoads, mSrcLoadBytes, mGoroutines,
		mDecFrames, mDecStored, mDecBytes, mDecSeconds, mDecErrors}
)

func init() {
	for _, m := range allMetrics {
		m.desc = prometheus.NewDesc(m.name, m.help, m.labels, nil)
	}
}

// statsCollector is the metrics of the stats snapshot, read at each scrape.
type statsCollector Metrics

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range allMetrics {
		ch <- m.desc
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.Snapshot == nil {
		return
	}
	s := c.Snapshot()
	put := func(m *metric, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, labels...)
	}
	put(mReadBytes, float64(s.DataServed), "data")
	put(mReadBytes, float64(s.IDsServed), "ids")
	put(mReadBytes, float64(s.OffsetsServed), "offsets")
	put(mReadBytes, float64(s.SourceServed), "source")
	if c.record > 0 {
		put(mReadRecords, float64(s.DataServed/uint64(c.record)))
	}
	put(mReads, float64(s.Reads))
	for kind, n := range s.ErrorsByKind {
		put(mReadErrors, float64(n), kind)
	}
	put(mReadsWaited, float64(s.ReadsWaited))
	put(mWaitSeconds, s.WaitSeconds)
	put(mReadSeconds, s.ReadSeconds)
	put(mReaderSecs, s.ReaderSeconds)
	put(mReaders, float64(len(s.Readers)))
	put(mPCDrops, float64(s.PageCacheDrops))
	put(mPCDropSecs, s.PageCacheDropSeconds)
	put(mPCSkipped, float64(s.PageCacheDropsSkipped))
	cs := s.Cache
	put(mHits, float64(cs.Hits))
	put(mMisses, float64(cs.Misses))
	put(mMerged, float64(cs.Merged))
	put(mEvictions, float64(cs.Evictions))
	put(mUncached, float64(cs.Overflow))
	put(mRAHits, float64(cs.ReadaheadHits))
	put(mRAWasted, float64(cs.ReadaheadWasted))
	put(mRADropped, float64(cs.PrefetchDropped))
	put(mRALate, float64(cs.ReadaheadLate))
	put(mDiskReads, float64(cs.DiskReads))
	put(mDiskBytes, float64(cs.DiskBytes))
	put(mDiskErrors, float64(cs.DiskErrors))
	put(mCacheBytes, float64(cs.CachedBytes))
	put(mCacheCap, float64(cs.CapacityBytes))
	put(mCacheShort, float64(cs.Short))
	put(mGoroutines, float64(s.Goroutines))
	collectSources(s, put)
}

// collectSources puts the metrics that are by source: stores, disk caches, loads, decompression.
func collectSources(s Stats, put func(m *metric, v float64, labels ...string)) {
	for i, st := range s.Stores() {
		if st == nil {
			continue
		}
		src := strconv.Itoa(i)
		put(mStoreReqs, float64(st.Requests), src)
		put(mStoreRetries, float64(st.Retries), src)
		for kind, n := range st.Errors {
			put(mStoreErrors, float64(n), src, kind)
		}
	}
	for _, src := range s.Sources {
		put(mSrcLoads, float64(src.Reads), strconv.Itoa(src.Index), src.Name)
		put(mSrcLoadBytes, float64(src.BytesRead), strconv.Itoa(src.Index), src.Name)
	}
	for i, st := range s.DiskCaches() {
		if st == nil {
			continue
		}
		src := strconv.Itoa(i)
		put(mDCHits, float64(st.Hits), src)
		put(mDCFetches, float64(st.Fetches), src)
		put(mDCFetchBytes, float64(st.FetchedBytes), src)
		put(mDCEvicted, float64(st.Evicted), src)
		put(mDCBytes, float64(st.Used), src)
	}
	for i, st := range s.Decompressions() {
		if st == nil {
			continue
		}
		src := strconv.Itoa(i)
		put(mDecFrames, float64(st.Frames), src)
		put(mDecStored, float64(st.Stored), src)
		put(mDecBytes, float64(st.Raw), src)
		put(mDecSeconds, st.Seconds, src)
		put(mDecErrors, float64(st.Errors), src)
	}
}

// Listen binds --metrics ADDR before the mount is made, so that an address in use is
// an error at once.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot listen there: %w", optname.Flag("metrics"), addr, err)
	}
	return l, nil
}
