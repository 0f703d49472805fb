package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShmSameBytes: for every shape a mount serves, the shared-memory path (docs/SHM.md) gives
// the bytes of the mount's files (test/testdata/shm_checks.py: every file of two epochs and
// a shard of them, at random ranges and across their ends), and blockfs.torch.Loader's batches
// are the same with it and without it.
func TestShmSameBytes(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // one core's work (a Python reader and the daemon taking turns): beside the tests that mostly wait
	py := systemPython(t)
	small := []string{"--cache-size", "16MiB", "--readahead", "1MiB"}
	check := func(t *testing.T, data string, args ...string) {
		m := mount(t, data, append(append([]string{}, small...), args...)...)
		t.Log(pyCheckScript(t, py, "testdata/shm_checks.py", m.dir))
	}
	dir := t.TempDir()
	t.Run("packed", func(t *testing.T) {
		check(t, packRaw(t, 3000, "256KiB").dir, "--seed", "3")
	})
	t.Run("lines", func(t *testing.T) {
		check(t, linesSource(t, dir, "lines", 0, 3000).dir)
	})
	t.Run("in-place", func(t *testing.T) {
		check(t, float32Npy(t, dir, 5000, 3, func(r, c int) float32 { return float32(r*3 + c) }), "--block-size", "16KiB")
	})
	t.Run("windows", func(t *testing.T) {
		check(t, writeTokens(t, dir, 300_000), "--dtype", "uint16", "--window", "1025", "--stride", "1024")
	})
	t.Run("mixture", func(t *testing.T) {
		rawSource(t, dir, "a", 0, 2000, 512)
		rawSource(t, dir, "b", 1, 1500, 512)
		check(t, writeMixture(t, dir, "mix.json", `{"epoch_records": 3000, "sources": [
			{"data": "a", "weight": 0.6}, {"data": "b", "weight": 0.4}]}`), "--seed", "2")
	})
	t.Run("fields", func(t *testing.T) {
		glob, _ := writeShards(t, dir, 600, 200)
		ds := filepath.Join(dir, "fields")
		mustRun(t, "pack", "--quiet", "--block-size", "256KiB", glob, ds)
		check(t, ds)
	})
	t.Run("node", func(t *testing.T) {
		check(t, packRaw(t, 3000, "64KiB").dir, "--nodes", "2", "--node", "1", "--mix", "1", "--cache-size", "64MiB")
	})
	t.Run("compressed", func(t *testing.T) {
		tokens := writeTokens(t, dir, 1_000_000)
		ds := filepath.Join(dir, "zstd")
		mustRun(t, "pack", "--quiet", "--compress", "zstd:3", "--format", "raw", "--record-size", "8", "--block-size", "256KiB", tokens, ds)
		check(t, ds)
	})
	t.Run("s3", func(t *testing.T) {
		srv := startMinio(t)
		srv.bucket("shm")
		raw, _ := s3Sources(t, t.TempDir(), 3000, 0)
		ep := "--endpoint=" + srv.endpoint()
		mustRun(t, "pack", "--quiet", ep, "--format", "raw", "--record-size", "1000", "--block-size", "256KiB", raw, "s3://shm/ds")
		check(t, "s3://shm/ds", ep)
		check(t, "s3://shm/ds", ep, "--disk-cache", filepath.Join(t.TempDir(), "dc"))
	})
}

// shmClient runs Python as a client of the mount's shared-memory path (blockfs._shm).
func shmClient(py, script string, args ...string) *exec.Cmd {
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH=../python", "PYTHONDONTWRITEBYTECODE=1")
	return cmd
}

// shmStats reads the shared-memory path's counters from stats.json.
func shmStats(t *testing.T, m *mounted) (clients, mapped int64) {
	t.Helper()
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	var st struct {
		Clients int64 `json:"shm_clients"`
		Mapped  int64 `json:"shm_mapped_bytes"`
	}
	require.NoError(t, json.Unmarshal(b, &st))
	return st.Clients, st.Mapped
}

// TestShmKilledClient: a client killed while it reads costs the daemon nothing it keeps (its
// connection and buffers go at once), and the mount serves the next client.
func TestShmKilledClient(t *testing.T) {
	requireFUSE(t)
	py := systemPython(t)
	m := mount(t, packRaw(t, 3000, "256KiB").dir, "--cache-size", "16MiB")
	reader := `import sys, blockfs._shm as s, blockfs._files as f
m = sys.argv[1]
ch = s.Channel(m, f.read_info(m))
print("reading", flush=True)
while True:
    for e in range(4):
        ch.read("epoch-%04d" % e, 0, 3000 * 4096)`
	cmd := shmClient(py, reader, m.dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make([]byte, 8)
	_, err = out.Read(line)
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	clients, mapped := shmStats(t, m)
	assert.EqualValues(t, 1, clients)
	assert.Positive(t, mapped)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		c, b := shmStats(t, m)
		return c == 0 && b == 0
	}, 5*time.Second, 20*time.Millisecond, "the killed client's connection and buffers went")
	res, err := shmClient(py, `import sys, blockfs._shm as s, blockfs._files as f
m = sys.argv[1]
a = s.Channel(m, f.read_info(m)).read("epoch-0002", 4096, 8192)
assert bytes(a) == open(m + "/epoch-0002", "rb").read()[4096:12288]
print("ok")`, m.dir).CombinedOutput()
	require.NoError(t, err, "%s", res)
}

// TestShmKilledDaemon: a Loader reading when its daemon dies gets a clear error at once, not a
// hang, and a mount without the path (--shm=false, or a socket this process cannot reach) is
// read through the files, which the Loader says once.
func TestShmKilledDaemon(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // one core's work (a Python reader and the daemon taking turns): beside the tests that mostly wait
	py := systemPython(t)
	p := packRaw(t, 3000, "256KiB")
	m := mount(t, p.dir, "--cache-size", "16MiB")
	loader := `import sys, time, blockfs.torch
ld = blockfs.torch.Loader(sys.argv[1], 64, shm=True)
print("reading", flush=True)
try:
    while True:
        for _ in ld:
            time.sleep(0.01)
except OSError as e:
    print("error:", e, flush=True)`
	cmd := shmClient(py, loader, m.dir)
	var outb strings.Builder
	pipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &outb
	require.NoError(t, cmd.Start())
	first := make([]byte, 8)
	_, err = pipe.Read(first)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	m.kill()
	done := make(chan error, 1)
	var rest []byte
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := pipe.Read(b)
			rest = append(rest, b[:n]...)
			if err != nil {
				break
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the Loader hung after its daemon died: %s %s", rest, outb.String())
	}
	_ = syscall.Unmount(m.dir, syscall.MNT_DETACH)
	assert.Contains(t, string(rest), "error:", "stderr: %s", outb.String())
	assert.Contains(t, string(rest), "daemon is gone")

	// No path offered, or none reachable: the files, said once.
	fallback := `import sys, warnings, blockfs.torch
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    n = sum(len(ids) for ids, _ in blockfs.torch.Loader(sys.argv[1], 64, epoch=1))
    n += sum(len(ids) for ids, _ in blockfs.torch.Loader(sys.argv[1], 64, epoch=2))
msgs = [str(x.message) for x in w if "shared memory" in str(x.message)]
print(n, len(msgs), msgs[0] if msgs else "")`
	off := mount(t, p.dir, "--cache-size", "16MiB", "--shm=false")
	res, err := shmClient(py, fallback, off.dir).CombinedOutput()
	require.NoError(t, err, "%s", res)
	assert.Contains(t, string(res), "6000 1 blockfs: reading through the mount's files, not shared memory: the daemon offers none")
	if os.Geteuid() == 0 {
		on := mount(t, p.dir, "--cache-size", "16MiB")
		cmd := exec.Command("unshare", "-n", py, "-c", fallback, on.dir)
		cmd.Env = append(os.Environ(), "PYTHONPATH=../python", "PYTHONDONTWRITEBYTECODE=1")
		res, err = cmd.CombinedOutput()
		require.NoError(t, err, "%s", res)
		assert.Contains(t, string(res), "6000 1 blockfs: reading through the mount's files, not shared memory: cannot reach the daemon's socket")
	}
	// A client whose buffers the daemon refuses (one from before the daemon sealed them,
	// which set F_SEAL_SEAL itself): the files, said once.
	on := mount(t, p.dir, "--cache-size", "16MiB")
	res, err = shmClient(py, "import fcntl; fcntl.F_SEAL_GROW |= fcntl.F_SEAL_SEAL\n"+fallback, on.dir).CombinedOutput()
	require.NoError(t, err, "%s", res)
	assert.Contains(t, string(res), "6000 1 blockfs: reading through the mount's files, not shared memory: the daemon refused a buffer")
}

// TestShmOtherUsers: the path serves another user only where the mount's files do (--allow-
// other), and then the same bytes.
func TestShmOtherUsers(t *testing.T) {
	requireFUSE(t)
	requireRoot(t, "to run a reader as another user")
	py := systemPython(t)
	p := packForAll(t)
	py2 := dirForAll(t)
	src, err := filepath.Abs("../python")
	require.NoError(t, err)
	out, err := exec.Command("cp", "-r", src, py2).CombinedOutput()
	require.NoError(t, err, "%s", out)
	client := `import sys, blockfs._shm as s, blockfs._files as f
m = sys.argv[1]
try:
    a = s.Channel(m, f.read_info(m)).read("epoch-0000", 0, 100000)
except s.ShmUnavailable as e:
    print("unavailable:", e); sys.exit(0)
assert bytes(a) == open(m + "/epoch-0000", "rb").read(100000)
print("same bytes")`
	for _, allow := range []bool{false, true} {
		mnt := filepath.Join(dirForAll(t), "mnt")
		require.NoError(t, os.Mkdir(mnt, 0o755))
		args := []string{"--cache-size", "4MiB", "--readahead", "512KiB"}
		if allow {
			args = append(args, "--allow-other")
		}
		m := mountAt(t, p.dir, mnt, args...)
		if !allow {
			// nobody cannot read info.json, nor stat the mount: it asks the socket the files'
			// info.json names, with the protocol written out (docs/SHM.md), and is refused.
			info, err := os.ReadFile(m.path(".blockfs/info.json"))
			require.NoError(t, err)
			cmd := asNobody(py, "-c", rawHello, socketOf(t, info))
			res, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", res)
			assert.Contains(t, string(res), fmt.Sprintf("errno 13: uid %d may not read this mount (it is uid 0's; mount with --allow-other to let other users read)", nobody))
			crowdedOut(t, py, socketOf(t, info))
			continue
		}
		cmd := asNobody(py, "-c", client, m.dir)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(py2, "python"))
		res, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", res)
		assert.Contains(t, string(res), "same bytes")
	}
}

// crowdedOut: while a user who may not read the mount holds more connections to its socket
// than the daemon serves at once, saying nothing, the owner is still served.
func crowdedOut(t *testing.T, py, socket string) {
	holder := asNobody(py, "-c", holdConnections, socket)
	out, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "holding 1100\n", line)
	res, err := exec.Command(py, "-c", rawHello, socket).CombinedOutput()
	require.NoError(t, err, "%s", res)
	assert.Contains(t, string(res), "errno 0: ", "the owner's hello while another user holds 1100 connections")
}

// holdConnections opens 1100 connections to the socket named by its argument, says so, and
// holds them for a minute.
const holdConnections = `import resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
cs = []
for _ in range(1100):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect("\0" + sys.argv[1][1:])
    cs.append(c)
print("holding", len(cs), flush=True)
time.sleep(60)`

// rawHello sends one hello to the socket named by its argument and prints the reply's errno
// and message: a client written from docs/SHM.md alone.
const rawHello = `import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect("\0" + sys.argv[1][1:])
s.send(struct.pack("<IIIIQQQ", 0x31534642, 4, 0, 0, 0, 0, 0))
r = s.recv(4096)
magic, errno, n = struct.unpack_from("<IIQ", r)
assert magic == 0x31534642, hex(magic)
print("errno %d: %s" % (errno, r[16:].decode()))`

// socketOf is info.json's shm_socket.
func socketOf(t *testing.T, info []byte) string {
	var v struct {
		Socket string `json:"shm_socket"`
	}
	require.NoError(t, json.Unmarshal(info, &v))
	require.True(t, strings.HasPrefix(v.Socket, "@"), "info.json's shm_socket %q", v.Socket)
	return v.Socket
}

// TestShmHostileClients: requests a careless or malicious client might send
// (test/testdata/shm_hostile.py, raw packets) are refused one by one with their errno and
// reason; a flood of connections past the bound is closed; the daemon serves on, holds no
// client's buffers once they are gone, and its RSS leaves the clients' buffers out.
func TestShmHostileClients(t *testing.T) {
	requireFUSE(t)
	py := systemPython(t)
	m := mount(t, packRaw(t, 500, "256KiB").dir, "--cache-size", "16MiB")
	info, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	t.Log(pyCheckScript(t, py, "testdata/shm_hostile.py", socketOf(t, info), m.dir))
	require.Eventually(t, func() bool {
		c, b := shmStats(t, m)
		return c == 0 && b == 0
	}, 5*time.Second, 20*time.Millisecond, "every client's connection and buffers went")
}
