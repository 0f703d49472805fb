// Package report is what a mount reports: stats.json's schema (Stats, composed of each layer's
// typed counters: fs.Counters, cache.Stats, diskcache.Stats, objstore.Counters, stack.FramesStats, a
// mixture's or fields' SourceStats), made at each open of the file by Mount from the stacks'
// typed handles, and the Prometheus endpoint of --metrics (Metrics: client_golang, the same
// snapshot at each scrape). `blockfs stats` and the Python package read stats.json.
package report
