"""The tables bench.py prints and writes: the main table with its floors (report), the steady
state's (steady_lines, report_steady), emit, which prints lines and writes them as Markdown
(nodes_bench.py's table too), and human, a size in MiB or GiB."""
import os
import time

MiB = 1 << 20


def human(n):
    return "%.0f MiB" % (n / MiB) if n < 1 << 30 else "%.1f GiB" % (n / (1 << 30))


def report(rows, small, facts, srows, sfacts, size, blocks, elapsed, markdown):
    by = {r.name: r for r in rows}
    g = lambda name, mode, i=0: by[name].rate[mode][i]
    dd1m, lbk, rawr = "blockfs epoch: dd bs=1M", "loopback FUSE daemon: dd bs=1M", "raw: dd bs=1M of the block files"
    py, shards = "blockfs epoch: Python read(4096) per record", "blockfs: 4 readers on shard-R-of-4"
    naive, inproc = "naive: Python pread per record, random order", "in-process block shuffle (Python)"
    checks = [
        ("epoch dd bs=1M / loopback, cold", g(dd1m, "cold") / g(lbk, "cold"), 0.9),
        ("epoch dd bs=1M / raw, cold", g(dd1m, "cold") / g(rawr, "cold"), 0.7),
        ("Python read(4096) / dd bs=1M, re-read", g(py, "warm") / g(dd1m, "warm"), 0.5),
        ("Python read(4096) / dd bs=1M, cold", g(py, "cold") / g(dd1m, "cold"), 0.5),
        ("Python read(4096) / naive, cold, records/s", g(py, "cold", 1) / g(naive, "cold", 1), 10),
        ("Python read(4096) / in-process, cold, records/s", g(py, "cold", 1) / g(inproc, "cold", 1), 1.2),
        ("Python read(4096) / in-process, re-read, records/s", g(py, "warm", 1) / g(inproc, "warm", 1), 0.8),
        ("average disk read, MiB", facts["avg_disk_read_mib"], 1.0),
    ]
    lines = []
    out = lines.append
    out("blockfs bench, %s, %s, %d blocks; %s; %.0f s" % (time.strftime("%Y-%m-%d"), human(size), blocks,
                                                        os.uname().release, elapsed))
    out("")
    out("Cold: page cache dropped and the daemon remounted before each run (median of 3). Re-read: the")
    out("same file read again at once (median of 5); no training run does this. The loopback re-reads from")
    out("the kernel's cache of its file; blockfs has dropped what its readers passed and serves it again.")
    out("")
    out("| row | cold MB/s | cold rec/s | re-read MB/s | re-read rec/s |")
    out("|---|---|---|---|---|")
    for r in rows + small:
        out("| %s | %.0f | %.0f | %.0f | %.0f |" % (r.name, *r.rate["cold"], *r.rate["warm"]))
    out("")
    out("| ratio | measured | floor | |")
    out("|---|---|---|---|")
    for name, v, floor in checks:
        out("| %s | %.2f | %.2f | %s |" % (name, v, floor, "ok" if v >= floor else "BELOW"))
    out("")
    out("Daemon, one cold epoch plus 4 shard readers (4 KiB set, default options): peak RSS %.0f MiB, "
        "%.2f CPU s per GiB served, %d disk reads averaging %.2f MiB."
        % (facts["peak_rss_mib"], facts["cpu_s_per_gib"], facts["disk_reads"], facts["avg_disk_read_mib"]))
    out("")
    lines += [""] + steady_lines(srows, sfacts)
    emit(lines, markdown)


def emit(lines, markdown):
    text = "\n".join(lines)
    print()
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text + "\n")


def report_steady(srows, sfacts, elapsed, markdown):
    lines = ["blockfs bench --steady-only, %s; %s; %.0f s" % (time.strftime("%Y-%m-%d"), os.uname().release, elapsed), ""]
    emit(lines + steady_lines(srows, sfacts), markdown)


def steady_lines(srows, sfacts):
    """The steady-state table and its floors (issue 11), as Markdown lines."""
    by = {r.name: r for r in srows}
    sdd, spy = "steady: blockfs new epoch, dd bs=1M", "steady: blockfs new epoch, Python read(4096)"
    snaive, sinproc = "steady: naive Python pread per record, warm", "steady: in-process block shuffle (Python), warm"
    slb = "steady: loopback FUSE daemon, dd bs=1M, warm"
    n = lambda name, i=0: by[name].rate["new"][i]
    # (ratio, value, floor, higher is better)
    steady_checks = [
        ("new epoch dd bs=1M / loopback warm", n(sdd) / n(slb), 0.9, True),
        ("new epoch Python read(4096) / naive pread warm, records/s", n(spy, 1) / n(snaive, 1), 0.7, True),
        ("new epoch Python read(4096) / in-process warm, records/s", n(spy, 1) / n(sinproc, 1), 0.8, True),
        ("disk MiB read in epochs 1-3", sfacts["disk_mib_epochs_1_3"], 64, False),
        ("30 epochs: last five / first five", sfacts["last5_mbs"] / sfacts["first5_mbs"], 0.8, True),
        ("30 epochs: page cache growth, MiB", sfacts["cached_growth_mib"], 2048, False),
        ("30 epochs: peak RSS - cache budget, MiB", sfacts["rss_mib"] - sfacts["budget_mib"], 64, False),
        ("larger than the cache: disk bytes per epoch / data size", sfacts["large_disk_per_epoch"], 1.05, False),
    ]
    lines = []
    out = lines.append
    out("Steady state (1 GiB of 4 KiB records, default flags: cache %.0f MiB, %s; direct I/O %s, %s). "
        "Each blockfs run reads an epoch never read before, after one warm-up epoch; baselines read "
        "the same bytes from the page cache (median of 3):"
        % (sfacts["budget_mib"], sfacts["cache_size_reason"], sfacts["direct_io"], sfacts["direct_io_reason"]))
    out("")
    out("| row | MB/s | rec/s |")
    out("|---|---|---|")
    for r in srows:
        out("| %s | %.0f | %.0f |" % (r.name, *r.rate["new"]))
    out("")
    out("30 epochs in a row: first five %.0f MB/s, last five %.0f MB/s (medians); page cache growth %.0f MiB; "
        "daemon peak RSS %.0f MiB with a %.0f MiB cache. Larger than the cache (--cache-size 256MiB, direct I/O %s, "
        "page cache dropped between epochs): %.3f x the data size read from disk per epoch, worst of 3."
        % (sfacts["first5_mbs"], sfacts["last5_mbs"], sfacts["cached_growth_mib"], sfacts["rss_mib"],
           sfacts["budget_mib"], sfacts["large_direct_io"], sfacts["large_disk_per_epoch"]))
    out("")
    out("| steady-state ratio | measured | floor | |")
    out("|---|---|---|---|")
    for name, v, floor, higher in steady_checks:
        ok = v >= floor if higher else v <= floor
        out("| %s | %.2f | %s %.2f | %s |" % (name, v, ">=" if higher else "<=", floor, "ok" if ok else "MISSED"))
    return lines
