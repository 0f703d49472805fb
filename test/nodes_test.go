package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The simulated cluster of TestNodesCluster: nodes x local ranks over one dataset in MinIO,
// each node a mount of its own with its own disk cache and its own counting relay (a
// faultProxy) to the store.
const (
	clusterNodes   = 4
	clusterLocal   = 2
	clusterRecord  = 4096
	clusterRecords = 65536 // 256 MiB
	clusterBatch   = 32
)

// cluster is one run of the simulated cluster: its mounts, relays and disk caches.
type cluster struct {
	t       *testing.T
	py, raw string
	url     string
	minio   string // MinIO's host:port
	dir     string
	nodes   int
	mounts  []*mounted
	relays  []*faultProxy
	disks   []string
	args    []string // mount flags beyond the node's own
}

// start mounts node i (its relay to MinIO, its disk cache).
func (c *cluster) start(i int) {
	c.relays[i] = startProxy(c.t, c.minio)
	mnt := filepath.Join(c.dir, fmt.Sprintf("n%d-of-%d-%d", i, c.nodes, time.Now().UnixNano()))
	require.NoError(c.t, os.Mkdir(mnt, 0o755))
	args := append([]string{"--endpoint=" + c.relays[i].endpoint(), "--nodes", strconv.Itoa(c.nodes), "--node", strconv.Itoa(i),
		"--disk-cache", c.disks[i]}, c.args...)
	c.mounts[i] = mountAt(c.t, c.url, mnt, args...)
}

func newCluster(t *testing.T, py, raw, url, minio string, nodes int, disks []string, args ...string) *cluster {
	c := &cluster{t: t, py: py, raw: raw, url: url, minio: minio, dir: t.TempDir(), nodes: nodes,
		mounts: make([]*mounted, nodes), relays: make([]*faultProxy, nodes), disks: disks, args: args}
	for i := range nodes {
		c.start(i)
	}
	return c
}

func (c *cluster) stop() {
	for _, m := range c.mounts {
		m.stop()
	}
}

// ranks runs a Python process per rank (nodes_rank.py, torchrun's environment) with extra
// flags, and, with the barrier, calls between(e) once every rank is done with epoch e (before
// letting them on). It returns once every rank has exited 0.
func (c *cluster) ranks(out string, epochs [2]int, barrier bool, between func(e int), extra ...string) {
	t := c.t
	world := c.nodes * clusterLocal
	var procs []*exec.Cmd
	var outs []*bytes.Buffer
	port := freeAddr(t)[len("127.0.0.1:"):]
	for node := range c.nodes {
		for lr := range clusterLocal {
			rank := node*clusterLocal + lr
			args := append([]string{"testdata/nodes_rank.py", c.mounts[node].dir, "--raw", c.raw, "--record-size", strconv.Itoa(clusterRecord),
				"--epochs", fmt.Sprintf("%d:%d", epochs[0], epochs[1]), "--batch", strconv.Itoa(clusterBatch), "--out", out}, extra...)
			if barrier {
				args = append(args, "--barrier")
			}
			cmd := exec.Command(c.py, args...)
			cmd.Env = append(os.Environ(), "PYTHONPATH=../python", "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(world),
				"LOCAL_RANK="+strconv.Itoa(lr), "LOCAL_WORLD_SIZE="+strconv.Itoa(clusterLocal), "GROUP_RANK="+strconv.Itoa(node),
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
			var b bytes.Buffer
			cmd.Stdout, cmd.Stderr = &b, &b
			require.NoError(t, cmd.Start())
			procs, outs = append(procs, cmd), append(outs, &b)
		}
	}
	defer func() {
		for _, p := range procs {
			if p.ProcessState == nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
	}()
	if barrier {
		for e := epochs[0]; e <= epochs[1]; e++ {
			deadline := time.Now().Add(5 * time.Minute)
			for r := 0; r < world; {
				if _, err := os.Stat(filepath.Join(out, fmt.Sprintf("done-%d-%d", e, r))); err == nil {
					r++
					continue
				}
				for i, p := range procs {
					if p.ProcessState != nil && p.ProcessState.ExitCode() != 0 {
						t.Fatalf("rank %d failed: %s", i, outs[i])
					}
				}
				require.True(t, time.Now().Before(deadline), "epoch %d: rank %d not done after 5 minutes", e, r)
				time.Sleep(20 * time.Millisecond)
			}
			between(e)
			require.NoError(t, os.WriteFile(filepath.Join(out, fmt.Sprintf("go-%d", e)), nil, 0o644))
		}
	}
	for i, p := range procs {
		require.NoError(t, p.Wait(), "rank %d: %s", i, outs[i])
	}
}

// sent returns the bytes each node's relay has sent it from the store so far.
func (c *cluster) sent() []int64 {
	out := make([]int64, c.nodes)
	for i, r := range c.relays {
		out[i] = r.sent.Load()
	}
	return out
}

// nodeShare returns what node i's ranks read of an epoch from the store's objects: its
// records, and their ids files when the pack stored ids.
func nodeShare(t *testing.T, m *mounted) int64 {
	var info struct {
		Records     int64 `json:"records"`
		Preshuffled bool  `json:"preshuffled"`
	}
	b, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	n := info.Records * clusterRecord
	if info.Preshuffled {
		n += info.Records * 8
	}
	return n
}

// epochIDs returns the ids the ranks wrote for epoch e (files ids-E-RANK*.npy in out).
func epochIDs(t *testing.T, out string, e int) []int64 {
	files, err := filepath.Glob(filepath.Join(out, fmt.Sprintf("ids-%d-*.npy", e)))
	require.NoError(t, err)
	var all []int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		hl := int(binary.LittleEndian.Uint16(b[8:10]))
		body := b[10+hl:]
		for i := 0; i+8 <= len(body); i += 8 {
			all = append(all, int64(binary.LittleEndian.Uint64(body[i:])))
		}
	}
	return all
}

// requireExact fails unless ids are every record id of the cluster's data once.
func requireExact(t *testing.T, ids []int64, what string) {
	t.Helper()
	requireExactN(t, ids, clusterRecords, what)
}

// TestNodesCluster is the simulated 4-node cluster of issue 35: one dataset in MinIO (256 MiB
// of 4 KiB records in 1 MiB blocks), packed pre-shuffled and --no-shuffle; 4 node-aware
// mounts (24 parts, windows of 2 blocks), each with its own disk cache and relay to the store
// and a 24 MiB memory cache (less than its 64 MiB share); 2 Python ranks per node with torchrun's environment, reading epochs 0-3
// with blockfs.torch.Loader and checking every record against the raw file. Every epoch's
// union is every record once; the store sends a node at most 1.1x its share in epoch 0, and in
// epochs 1-3 at most 0.05 of it with a disk cache of the share (plus 12%) and at most 0.55 with
// half. Then, on the pre-shuffled data, epoch 4 is cut twice: a checkpoint after 20 steps, node
// 1's daemon killed (kill -9) and remounted, a resume at 4 nodes for 20 more steps, and a resume
// at 2 nodes to the end; the epoch is every record once.
func TestNodesCluster(t *testing.T) {
	requireFUSE(t)
	py := systemPython(t)
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	raw := filepath.Join(dir, "records.bin")
	r := rand.New(rand.NewPCG(35, 1))
	data := make([]byte, clusterRecords*clusterRecord)
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	require.NoError(t, os.WriteFile(raw, data, 0o644))
	data = nil
	ep := "--endpoint=" + srv.endpoint()
	for _, lay := range []struct {
		name  string
		flags []string
	}{{"preshuffled", nil}, {"in-order", []string{"--no-shuffle"}}} {
		url := "s3://data/" + lay.name
		mustRun(t, append(append([]string{"pack", "--quiet", ep, "--format", "raw", "--record-size", "4KiB", "--block-size", "1MiB"}, lay.flags...), raw, url)...)
		for _, frac := range []float64{1.12, 0.5} {
			t.Run(fmt.Sprintf("%s/disk-%.2f", lay.name, frac), func(t *testing.T) {
				// The disk cache bound: the share (64 MiB of records, and their ids) times frac.
				share := int64(clusterRecords / clusterNodes * clusterRecord)
				if lay.name == "preshuffled" {
					share += clusterRecords / clusterNodes * 8
				}
				var disks []string
				for i := range clusterNodes {
					disks = append(disks, filepath.Join(dir, fmt.Sprintf("dc-%s-%.2f-%d", lay.name, frac, i)))
				}
				c := newCluster(t, py, raw, url, srv.addr, clusterNodes, disks, "--cache-size", "48MiB", "--readahead", "6MiB", "--parts", "24", "--mix", "2",
					"--disk-cache-size", strconv.FormatInt(int64(float64(share)*frac), 10), "--seed", "5")
				defer c.stop()
				for i, m := range c.mounts {
					require.Equal(t, share, nodeShare(t, m), "node %d's share", i)
				}
				out := t.TempDir()
				prev := make([]int64, clusterNodes)
				logged := make([]int, clusterNodes)
				c.ranks(out, [2]int{0, 3}, true, func(e int) {
					now := c.sent()
					for i, rl := range c.relays {
						reqs := rl.requests()
						count := map[string]int{}
						for _, r := range reqs[logged[i]:] {
							count[r]++
						}
						t.Logf("node %d, epoch %d: %d requests to the store, for %d objects", i, e, len(reqs)-logged[i], len(count))
						logged[i] = len(reqs)
					}
					for i := range now {
						ratio := float64(now[i]-prev[i]) / float64(share)
						t.Logf("%s, disk cache %.2f x share: epoch %d: the store sent node %d %.3f x its share", lay.name, frac, e, i, ratio)
						switch {
						case e == 0:
							require.LessOrEqual(t, ratio, 1.1, "epoch 0, node %d", i)
						case frac >= 1:
							require.LessOrEqual(t, ratio, 0.05, "epoch %d, node %d, a disk cache of its share", e, i)
						default:
							require.LessOrEqual(t, ratio, 0.55, "epoch %d, node %d, a disk cache of half its share", e, i)
						}
					}
					prev = now
					requireExact(t, epochIDs(t, out, e), fmt.Sprintf("epoch %d", e))
				})
				if lay.name != "preshuffled" || frac < 1 {
					return
				}
				// Epoch 4, cut twice.
				state := filepath.Join(out, "state.json")
				c.ranks(out, [2]int{4, 4}, false, nil, "--stop-after", "20", "--state-out", state)
				m := c.mounts[1]
				m.kill()
				require.NoError(t, syscall.Unmount(m.dir, syscall.MNT_DETACH))
				c.start(1)
				state2 := filepath.Join(out, "state2.json")
				t.Setenv("BLOCKFS_TEST_TAG", "-b")
				c.ranks(out, [2]int{4, 4}, false, nil, "--state-in", state, "--stop-after", "20", "--state-out", state2)
				c.stop()
				two := newCluster(t, py, raw, url, srv.addr, 2, disks[:2], "--cache-size", "96MiB", "--readahead", "12MiB", "--parts", "24", "--mix", "2",
					"--disk-cache-size", strconv.FormatInt(2*share, 10), "--seed", "5")
				defer two.stop()
				t.Setenv("BLOCKFS_TEST_TAG", "-c")
				two.ranks(out, [2]int{4, 4}, false, nil, "--state-in", state2)
				requireExact(t, epochIDs(t, out, 4), "epoch 4, resumed after a killed node and at 2 nodes")
			})
		}
	}
}

// TestNodesLocal: a node-aware mount of a dataset on a (shared) filesystem reads only its own
// parts' block files, epoch after epoch, so the node's page cache keeps its part: after two
// epochs of node 0 read with --direct off, every page of its block files is resident and none
// of the other nodes'; each node's records are the data's, its epochs' ids are its parts' records, and the four nodes' are every
// record once. Then the refusals, each one line and exit 2.
func TestNodesLocal(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "records.bin")
	data := make([]byte, 16384*1024)
	r := rand.New(rand.NewPCG(35, 2))
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	require.NoError(t, os.WriteFile(raw, data, 0o644))
	ds := filepath.Join(dir, "ds")
	mustRun(t, "pack", "--quiet", "--format", "raw", "--record-size", "1KiB", "--block-size", "256KiB", "--no-shuffle", raw, ds)
	blocks, err := filepath.Glob(filepath.Join(ds, "blocks", "*.bin"))
	require.NoError(t, err)
	require.Len(t, blocks, 64)
	evictBlocks(t, blocks)
	var all []int64
	for node := range 4 {
		m := mount(t, ds, "--nodes", "4", "--node", strconv.Itoa(node), "--direct", "off", "--cache-size", "32MiB", "--mix", "1", "--seed", "9")
		for e := range 2 {
			b, err := os.ReadFile(m.path(fmt.Sprintf("epoch-%04d", e)))
			require.NoError(t, err)
			ids := idsOf(t, m.path(fmt.Sprintf("epoch-%04d.ids", e)))
			for i, id := range ids {
				require.Equal(t, data[id*1024:(id+1)*1024], b[i*1024:(i+1)*1024], "node %d epoch %d position %d", node, e, i)
			}
			if e == 0 {
				all = append(all, ids...)
			}
		}
		if node == 0 {
			// Node 0's files are in the page cache, whole; the others are not.
			var info struct {
				Nodes struct {
					Own []struct {
						Part int `json:"part"`
					} `json:"own_parts"`
				} `json:"nodes"`
			}
			b, err := os.ReadFile(m.path(".blockfs/info.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &info))
			mine := map[int64]bool{}
			for _, id := range all[len(all)-len(idsOf(t, m.path("epoch-0000.ids"))):] {
				mine[id/256] = true // 256 records of 1 KiB a block, stored in order
			}
			require.Len(t, info.Nodes.Own, 3, "64 blocks make 12 parts, 3 a node")
			require.Len(t, mine, 16, "node 0 reads 16 of the 64 blocks")
			for i, f := range blocks {
				pages := residentPages(t, f, 0, 256<<10)
				if mine[int64(i)] {
					require.EqualValues(t, 64, pages, "node 0's block %d is resident", i)
				} else {
					require.Zero(t, pages, "block %d is another node's", i)
				}
			}
		}
		m.stop()
	}
	requireExactN(t, all, 16384, "the 4 nodes' epoch 0")

	// A dataset packed from a folder: a node's mount serves the dataset's names file.
	folder := filepath.Join(dir, "folder")
	for i := range 40 {
		require.NoError(t, os.MkdirAll(filepath.Join(folder, fmt.Sprintf("c%d", i%3)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(folder, fmt.Sprintf("c%d", i%3), fmt.Sprintf("f%02d.bin", i)), data[i*20000:(i+1)*20000], 0o644))
	}
	named := filepath.Join(dir, "named")
	mustRun(t, "pack", "--quiet", "--block-size", "64KiB", folder, named)
	whole := mount(t, named)
	want, err := os.ReadFile(whole.path(".blockfs/names.txt"))
	require.NoError(t, err)
	nm := mount(t, named, "--nodes", "3", "--node", "2")
	got, err := os.ReadFile(nm.path(".blockfs/names.txt"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	nm.stop()
	whole.stop()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "5"}, "--nodes 5 does not divide the 12 canonical parts"},
		{[]string{"--nodes", "4", "--node", "4"}, "--node 4 of --nodes 4: need 0 <= node < nodes"},
		{[]string{"--nodes", "4", "--parts", "96"}, "--parts 96 is more than the dataset's 64 blocks"},
		{[]string{"--node", "1"}, "--node and --parts go with --nodes N"},
		{[]string{"--nodes", "-1"}, "--nodes -1: need a positive count"},
	} {
		_, errs, code := run(t, append([]string{"mount"}, append(tc.args, ds, t.TempDir())...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.want, "%v", tc.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %s", errs)
	}
}

// idsOf reads an .ids file.
func idsOf(t *testing.T, path string) []int64 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// requireExactN fails unless ids are 0..n-1, each once.
func requireExactN(t *testing.T, ids []int64, n int, what string) {
	t.Helper()
	require.Len(t, ids, n, what)
	s := append([]int64(nil), ids...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	for i, v := range s {
		require.EqualValues(t, i, v, "%s: record %d missing or twice", what, i)
	}
}
