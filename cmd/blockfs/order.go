package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
)

type orderFlags struct {
	seed    uint64
	epoch   uint64
	shuffle string
	mix     string
	version string // --order-version
	shard   string
	ids     bool
	stats   bool
	labels  string
	plot    string
	inPlace inPlaceFlags
	order   mount.Values // --seed, --shuffle, --mix as given (the schema's GroupOrder)
}

func newOrder() *cobra.Command {
	var f orderFlags
	c := &cobra.Command{
		Use:   "order DATA|MOUNTPOINT [--seed N] [--epoch N] [--shuffle M] [--mix K] [--shard R/W] (--ids | --stats [--labels FILE])",
		Short: "Compute an epoch's order without mounting: the record ids, or its quality figures",
		Long: `order computes an epoch's order with the same code the mount uses. DATA is a dataset
directory or a file served in place (with the mount's in-place and window flags); given a
MOUNTPOINT, it uses the data, flags and order options the mount was started with.

--ids prints the source id of each record of the epoch (or of shard R of W), one per line:
the same values as the mount's epoch-NNNN.ids.

--stats prints quality figures beside those of a uniform shuffle of the same records:
the mean number of distinct blocks in batches of 32, 256 and 1024 consecutive records; with
--labels (a .npy of one integer per record, or a text file of one integer per line, line i
the label of record id i), the mean
total-variation distance between a batch's labels and the dataset's; the entropy of the gaps
between consecutive record ids and between consecutive block ids, relative to a uniform
shuffle (1 = as random); and the correlation of record positions in this epoch and the next.
--stats holds the epoch in memory (O(records)); --ids does not.`,
		Args: exactArgs("DATA"),
		RunE: func(c *cobra.Command, args []string) error { return runOrder(c.Flags(), f, args[0]) },
	}
	fl := c.Flags()
	f.order = mount.Values{}
	registerOptions(fl, f.order, mount.GroupOrder)
	fl.Uint64Var(&f.epoch, "epoch", 0, "epoch")
	fl.StringVar(&f.shard, "shard", "", "only slice R of W, as R/W")
	fl.BoolVar(&f.ids, "ids", false, "print the record ids, one per line")
	fl.BoolVar(&f.stats, "stats", false, "print quality figures")
	fl.StringVar(&f.labels, "labels", "", "with --stats: a .npy of integer labels, or a file of one per line, by record id")
	fl.StringVar(&f.plot, "plot", "", "with --stats: draw the figures beside a uniform shuffle into this .png or .svg: blocks per batch, label balance per batch (--labels), where each record of the epoch lands in the next")
	f.inPlace.register(fl)
	return c
}

func runOrder(fl *pflag.FlagSet, f orderFlags, data string) error {
	o, err := mount.Decode("", "", f.order)
	if err != nil {
		return err
	}
	f.seed, f.shuffle, f.mix, f.version = o.Order.Seed, o.Order.Mode.String(), "auto", strconv.Itoa(o.Order.OrderVersion())
	if mix, ok := f.order["mix"]; ok {
		f.mix = mix
	}
	if f.ids == f.stats {
		return usagef("give exactly one of --ids and --stats")
	}
	if f.labels != "" && !f.stats {
		return usagef("--labels goes with --stats")
	}
	if f.plot != "" {
		if !f.stats {
			return usagef("--plot goes with --stats")
		}
		if err := checkPlotPath(f.plot); err != nil {
			return err
		}
	}
	if m, ok, err := readMountpoint(data); ok {
		if err != nil {
			return err
		}
		if err := m.refuseOrderFlags(fl); err != nil {
			return err
		}
		if m.Mixture != nil {
			if f.ids {
				return copyMixtureIDs(m.Dir, f.epoch, f.shard)
			}
			return runOrderMixture(fl, orderFlags{seed: m.Seed, epoch: f.epoch, shard: f.shard, stats: true, plot: f.plot}, m.OpenData, m.Sources)
		}
		if mount.IsRemote(m.OpenData) {
			if f.stats {
				return usagef("--stats: %s serves %s; run order --stats on a local copy of the dataset", data, m.OpenData)
			}
			return copyMountIDs(m.Dir, f.epoch, f.shard)
		}
		if f.inPlace, err = m.inPlace(); err != nil {
			return err
		}
		data, f.seed, f.shuffle, f.mix, f.version = m.OpenData, m.Seed, m.Shuffle, strconv.Itoa(m.Mix), orderVersion(m.OrderVersion)
	}
	return orderData(fl, f, data)
}

// orderData is blockfs order over data named: a dataset, a file in place, a dataset with
// fields or a mixture file.
func orderData(fl *pflag.FlagSet, f orderFlags, data string) error {
	loc := mount.Locate(data)
	if loc.Kind == mount.MixtureFile {
		return runOrderMixture(fl, f, data, nil)
	}
	opt, err := orderOptions(f.seed, f.epoch, f.shuffle, f.mix, f.version)
	if err != nil {
		return err
	}
	if loc.Kind == mount.Remote {
		return fmt.Errorf("%s is in an object store: mount it and run order on the mount point", data)
	}
	o, err := readOptions(data, f.inPlace, nil)
	if err != nil {
		return err
	}
	o.Order = opt
	d, err := mount.Open(o)
	if err != nil {
		return err
	}
	defer d.Close()
	for _, w := range d.Warnings() {
		fmt.Fprintln(os.Stderr, "blockfs: warning: "+w)
	}
	var sh mount.Shard
	if f.shard != "" {
		var ok bool
		if sh, ok = parseShard(f.shard); !ok {
			return usagef("--shard %q is not R/W with 0 <= R < W", f.shard)
		}
	}
	if f.ids {
		r, err := d.Column(f.epoch, mount.IDs, sh)
		if err != nil {
			return err
		}
		return printIDStream(r)
	}
	ds, ord := d.Order()
	ord.Epoch = f.epoch
	lo, hi := sh.Positions(ds.Records())
	return printStats(statsName(d, data), ds, ord, lo, hi, f)
}

// readOptions returns the options that open data for order and info: the options of a file in
// place given (a dataset with fields has none: they are left aside there) and, with s3f, the
// object store's.
func readOptions(data string, in inPlaceFlags, s3f *s3Flags) (mount.Options, error) {
	vals := mount.Values{}
	if mount.Locate(data).Kind != mount.FieldsDir {
		maps.Copy(vals, in.vals)
	}
	if s3f != nil {
		maps.Copy(vals, s3f.vals)
	}
	return decodeOptions(data, "", vals)
}

// parseShard reads --shard R/W.
func parseShard(s string) (sh mount.Shard, ok bool) {
	rs, ws, found := strings.Cut(s, "/")
	r, err1 := strconv.ParseUint(rs, 10, 64)
	w, err2 := strconv.ParseUint(ws, 10, 64)
	return mount.Shard{R: r, W: w}, found && err1 == nil && err2 == nil && w > 0 && r < w
}

// printIDStream prints a stream of little-endian uint64 ids (a .ids file), one per line.
func printIDStream(r io.Reader) error {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	in := bufio.NewReaderSize(r, 1<<20)
	var b [8]byte
	for {
		if _, err := io.ReadFull(in, b[:]); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		w.WriteString(strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 10))
		w.WriteByte('\n')
	}
	return w.Flush()
}

// statsName is what order --stats' header names: the file or directory data opened (a file
// in place, not its folder), or for a dataset with fields the dataset and the field whose
// order every field is served in.
func statsName(d *mount.Data, data string) string {
	ds, _ := d.Order()
	if man, dss := d.Fields(); man != nil {
		for i, fds := range dss {
			if fds == ds {
				return fmt.Sprintf("%s (its fields' order, cut at field %s's blocks)", data, man.Fields[i].Name)
			}
		}
	}
	return ds.Where()
}
