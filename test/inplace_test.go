package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInPlaceOffsetRecords: --offset and --records serve the records of a raw file that has a
// header before them and a trailer after them, in place: the epoch holds exactly those records
// (never a header or trailer byte), blockfs order agrees with the mount, and info.json says
// where the records start. Bad values are refused in one line.
func TestInPlaceOffsetRecords(t *testing.T) {
	const rs, n, header, trailer = 64, 1000, 100, 37
	dir := t.TempDir()
	p := filepath.Join(dir, "data.bin")
	var buf bytes.Buffer
	buf.Write(bytes.Repeat([]byte{'H'}, header))
	for i := 0; i < n; i++ {
		rec := make([]byte, rs)
		binary.LittleEndian.PutUint64(rec, uint64(i))
		for j := 8; j < rs; j++ {
			rec[j] = byte(i*7 + j)
		}
		buf.Write(rec)
	}
	buf.Write(bytes.Repeat([]byte{'T'}, trailer))
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	records := buf.Bytes()[header : header+n*rs]
	flags := []string{"--record-size", "64", "--offset", "100", "--records", "1000", "--block-size", "4KiB"}

	m := mount(t, p, append(flags, "--seed", "3")...)
	epoch, err := os.ReadFile(m.path("epoch-0002"))
	require.NoError(t, err)
	require.Len(t, epoch, n*rs)
	ids, err := os.ReadFile(m.path("epoch-0002.ids"))
	require.NoError(t, err)
	seen := make([]bool, n)
	for k := 0; k < n; k++ {
		id := binary.LittleEndian.Uint64(ids[8*k:])
		require.Equal(t, records[id*rs:(id+1)*rs], epoch[k*rs:(k+1)*rs], "position %d is record %d", k, id)
		require.False(t, seen[id])
		seen[id] = true
	}
	order := mustRun(t, append([]string{"order", "--ids", "--seed", "3", "--epoch", "2", p}, flags...)...)
	lines := strings.Fields(order)
	require.Len(t, lines, n)
	for k, s := range lines {
		require.Equal(t, s, strconv.FormatUint(binary.LittleEndian.Uint64(ids[8*k:]), 10), "blockfs order agrees with the mount at %d", k)
	}
	raw, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	var info map[string]any
	require.NoError(t, json.Unmarshal(raw, &info))
	assert.EqualValues(t, header, info["in_place_offset"])
	assert.EqualValues(t, n, info["records"])

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--record-size", "64", "--offset", "100", "--records", "1001"}, 1, "--records 1001 of 64 bytes from --offset 100 pass the end of the file: there are 64037 bytes after the offset (1000 whole records)"},
		{[]string{"--record-size", "64", "--offset", "100"}, 1, "the file after --offset 100 is 64037 bytes, not a multiple of the record size 64 (37 bytes left over); check --record-size, or give --records for a file with a trailer"},
		{[]string{"--record-size", "64", "--offset", "1MiB"}, 1, "--offset 1048576 is outside the file (64137 bytes)"},
		{[]string{"--offset", "lots"}, 2, "is not a size"},
	} {
		_, errs, code := run(t, append([]string{"order", "--ids", p}, c.args...)...)
		assert.Equal(t, c.code, code, c.args)
		assert.Contains(t, errs, c.want, c.args)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %s", errs)
	}
	pk := packRaw(t, 16, "64KiB")
	_, errs, code := run(t, "order", "--ids", "--offset", "8", pk.dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--offset is for a file served in place")
}

// TestHDF5InPlace uses the package's HDF5 helper, blockfs.hdf5, on a real .h5 file (Debian's
// python3-h5py): mount_options gives blockfs.Mount the options that serve an uncompressed
// contiguous dataset in place, and blockfs.torch.Loader's typed rows equal h5py's; the shell form
// (python3 -m blockfs.hdf5 flags) mounts the same rows with blockfs mount; a compressed dataset is
// refused in one line (NotInPlaceError from Python, exit 1 from the shell) and to-npy converts it
// to a .npy with the same rows; docs/examples/hdf5_in_place.py runs both ways.
func TestHDF5InPlace(t *testing.T) {
	requireFUSE(t)
	py := requirePython(t, "numpy", "torch", "h5py")
	dir := t.TempDir()
	h5 := filepath.Join(dir, "train.h5")
	make5 := `import h5py, numpy as np, sys
x = (np.arange(5000 * 16, dtype=np.float32) * 0.5).reshape(5000, 16)
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("meta/labels", data=np.arange(5000, dtype=np.int64))
    f.create_dataset("x", data=x)
    f.create_dataset("z", data=x, chunks=(500, 16), compression="gzip")
`
	out, err := exec.Command(py, "-c", make5, h5).CombinedOutput()
	require.NoError(t, err, string(out))
	runtime := runtimeDir(t)
	python := func(args ...string) *exec.Cmd {
		cmd := exec.Command(py, args...)
		cmd.Env = append(os.Environ(), "PYTHONPATH=../python", "BLOCKFS_BIN="+bin, "BLOCKFS_RUNTIME_DIR="+runtime, "PYTHONDONTWRITEBYTECODE=1")
		return cmd
	}

	// From Python: Mount(file, **mount_options(file, name)), typed rows through the Loader.
	typed := `import sys, h5py, numpy as np, torch, blockfs, blockfs.hdf5, blockfs.torch
h5 = sys.argv[1]
opts = blockfs.hdf5.mount_options(h5, "x")
assert {k: opts[k] for k in ("record_size", "records", "dtype", "shape")} == {"record_size": 64, "records": 5000, "dtype": "<f4", "shape": "16"}, opts
want = h5py.File(h5, "r")["x"][:]
with blockfs.Mount(h5, seed=4, **opts) as m:
    assert (m.info["dtype"], m.info["in_place_offset"]) == ("<f4", opts["offset"]), m.info
    seen = np.zeros(len(want), dtype=bool)
    for ids, x in blockfs.torch.Loader(m, batch_size=512):
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (16,), (x.dtype, x.shape)
        assert (x.numpy() == want[ids.numpy()]).all(), "rows differ from h5py's"
        seen[ids.numpy()] = True
    assert seen.all(), "every row once"
try:
    blockfs.hdf5.mount_options(h5, "z")
    raise AssertionError("a compressed dataset was accepted")
except blockfs.hdf5.NotInPlaceError as e:
    assert "is compressed: it is not one run of bytes in the file" in str(e), e
for name, want_err in (("nope", "has no dataset 'nope' (it has: meta/labels, x, z)"), ("meta", "is a group")):
    try:
        blockfs.hdf5.mount_options(h5, name)
        raise AssertionError(name)
    except ValueError as e:
        assert want_err in str(e) and not isinstance(e, blockfs.hdf5.NotInPlaceError), e
print("ok")`
	out, err = python("-c", typed, h5).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "ok", strings.TrimSpace(string(out)))

	// From the shell: the same options as blockfs mount flags.
	flags, err := python("-m", "blockfs.hdf5", "flags", h5, "x").Output()
	require.NoError(t, err)
	assert.Contains(t, string(flags), "--record-size 64 --offset ")
	assert.Contains(t, string(flags), " --records 5000 --dtype <f4 --shape 16")
	m := mount(t, h5, append(strings.Fields(string(flags)), "--shuffle", "none")...)
	info, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	assert.Contains(t, string(info), `"dtype": "<f4"`, "readers get float32 rows of 16")
	check := `import h5py, numpy as np, sys
want = h5py.File(sys.argv[1], "r")["x"][:]
got = np.frombuffer(open(sys.argv[2], "rb").read(), dtype=np.float32).reshape(-1, 16)
assert got.shape == want.shape and (got == want).all(), "epoch differs from the HDF5 rows"
print("ok")`
	out, err = exec.Command(py, "-c", check, h5, m.path("epoch-0000")).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "ok", strings.TrimSpace(string(out)))

	cmd := python("-m", "blockfs.hdf5", "flags", h5, "z")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Contains(t, stderr.String(), "blockfs.hdf5: 'z' in "+h5+" is compressed: it is not one run of bytes in the file")
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %s", stderr.String())
	// Where h5py is missing: one line naming the package to install, exit 1 (ERRORS.md H3).
	cmd = python("-m", "blockfs.hdf5", "flags", h5, "x")
	cmd.Env = append(cmd.Env, "PYTHONPATH="+hideModules(t, "h5py")+":../python")
	stderr.Reset()
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Equal(t, "blockfs.hdf5: blockfs.hdf5 needs h5py: pip install h5py (Debian: apt-get install python3-h5py)\n", stderr.String())
	npy := filepath.Join(dir, "z.npy")
	out, err = python("-m", "blockfs.hdf5", "to-npy", h5, "z", npy, "--chunk-mib", "1").CombinedOutput()
	require.NoError(t, err, string(out))
	m2 := mount(t, npy, "--shuffle", "none")
	out, err = exec.Command(py, "-c", strings.Replace(check, `["x"]`, `["z"]`, 1), h5, m2.path("epoch-0000")).CombinedOutput()
	require.NoError(t, err, string(out))

	// The example: in place, and converted when it cannot be.
	for name, want := range map[string]string{"x": "from " + h5, "z": "from " + filepath.Join(dir, "train.z.npy")} {
		out, err = python("../docs/examples/hdf5_in_place.py", h5, name).CombinedOutput()
		require.NoError(t, err, "hdf5_in_place.py %s: %s", name, out)
		assert.Contains(t, string(out), "epoch 0: 5000 rows of torch.float32 (16,) "+want+", in 20 batches")
	}
	mounts, err := os.ReadFile("/proc/mounts")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), runtime, "nothing left mounted")
}

// TestStatefulStreams: the recipe of docs/USAGE.md for stateful sequence models. With
// --shuffle blocks on data stored in order, batch position b reading shard-b-of-B front to back
// sees one stream: runs of consecutive records in stored order, each run inside one block, and
// a jump only where one block ends and the next block of the epoch's order begins. The B
// streams together hold every record of the epoch once (less the remainder), and a new epoch
// visits the blocks in a new order.
func TestStatefulStreams(t *testing.T) {
	const perBlock, blocks, B = 16, 40, 4
	p := packRaw(t, perBlock*blocks, "64KiB", "--no-shuffle") // storage index = source id
	m := mount(t, p.dir, "--shuffle", "blocks", "--seed", "8", "--cache-size", "8MiB", "--readahead", "256KiB")
	firstBlocks := map[uint64][]uint64{}
	for _, epoch := range []string{"epoch-0000", "epoch-0001"} {
		seen := map[uint64]bool{}
		for b := 0; b < B; b++ {
			raw, err := os.ReadFile(m.path(filepath.Join("shard-"+strconv.Itoa(b)+"-of-"+strconv.Itoa(B), epoch+".ids")))
			require.NoError(t, err)
			data, err := os.ReadFile(m.path(filepath.Join("shard-"+strconv.Itoa(b)+"-of-"+strconv.Itoa(B), epoch)))
			require.NoError(t, err)
			n := len(raw) / 8
			require.Equal(t, perBlock*blocks/B, n)
			prev := uint64(0)
			for k := 0; k < n; k++ {
				id := binary.LittleEndian.Uint64(raw[8*k:])
				require.Equal(t, p.records[id], data[k*recordSize:(k+1)*recordSize], "%s shard %d position %d", epoch, b, k)
				if k > 0 && id != prev+1 {
					require.Zero(t, id%perBlock, "%s shard %d: a jump at %d lands mid-block (id %d after %d)", epoch, b, k, id, prev)
					require.Equal(t, uint64(perBlock-1), prev%perBlock, "%s shard %d: a jump at %d leaves a block unfinished", epoch, b, k)
				}
				if k == 0 {
					firstBlocks[uint64(b)] = append(firstBlocks[uint64(b)], id/perBlock)
				}
				require.False(t, seen[id], "record %d twice", id)
				seen[id] = true
				prev = id
			}
		}
		assert.Len(t, seen, perBlock*blocks)
	}
	assert.NotEqual(t, firstBlocks[0][0], firstBlocks[0][1], "a new epoch starts stream 0 in another block")
}

// TestInPlaceDType: a raw file served in place with --dtype and --shape says them in
// info.json (a type string as numpy writes it, not JSON-escaped), its record size follows from
// them, `blockfs info` on the mount point reopens it with them, and a .npy refuses a dtype that
// disagrees with its own.
func TestInPlaceDType(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "tokens.bin")
	data := make([]byte, 8*1000) // 1000 records of 4 uint16
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(raw, data, 0o644))
	m := mount(t, raw, "--dtype", "uint16", "--shape", "4", "--block-size", "4KiB")
	info, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	assert.Contains(t, string(info), `"dtype": "<u2"`)
	var facts map[string]any
	require.NoError(t, json.Unmarshal(info, &facts))
	assert.Equal(t, []any{4.0}, facts["shape"])
	assert.EqualValues(t, 8, facts["record_size"])
	assert.Equal(t, "<u8", facts["ids_dtype"])
	epoch, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	assert.Len(t, epoch, len(data))
	out := mustRun(t, "info", m.dir)
	assert.Contains(t, out, "<u2")

	npy := float32Npy(t, dir, 10, 3, func(r, c int) float32 { return float32(r) })
	_, errs, code := run(t, "info", "--dtype", "float64", npy)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--dtype float64 disagrees with the .npy's <f4")
	// A pack of raw records takes a type as a raw file does (windows over it too), of its
	// records' size.
	pk := packRaw(t, 5, "64KiB") // records of 4096 bytes
	_, errs, code = run(t, "info", "--dtype", "uint16", pk.dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--dtype <u2 and --shape [] make records of 2 bytes; this dataset's are 4096 bytes")
	assert.Contains(t, mustRun(t, "info", "--dtype", "uint16", "--shape", "2048", pk.dir), "<u2")
}
