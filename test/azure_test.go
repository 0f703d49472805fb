package test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Azure Blob tests run against Azurite, Microsoft's emulator of the Blob API (npm), with
// Microsoft's JavaScript SDK as an independent client (test/testdata/azblob.js), both
// installed once per machine by scripts/azurite.sh (make test passes the directory in
// BLOCKFS_AZURITE).

// azuriteKey is the emulator's well-known account key (devstoreaccount1's, documented by
// Microsoft): not a secret.
const azuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// azuriteDir finds the install: $BLOCKFS_AZURITE, else where scripts/azurite.sh puts it.
// Missing, the test skips, or fails when BLOCKFS_REQUIRE_FUSE=1 (CI never passes by skipping).
func azuriteDir(t *testing.T) string {
	return findServer(t, "Azurite", "scripts/azurite.sh", "BLOCKFS_AZURITE", filepath.Join("node_modules", ".bin", "azurite-blob"),
		os.Getenv("BLOCKFS_AZURITE"), "/var/cache/blockfs/azurite")
}

// azuriteServer is Azurite's blob service on a free port of 127.0.0.1, in memory, stopped
// when the test ends; blockfs's processes get the account key from the environment.
type azuriteServer struct {
	t         *testing.T
	dir, addr string
}

func startAzurite(t *testing.T, containers ...string) *azuriteServer {
	t.Helper()
	s := &azuriteServer{t: t, dir: azuriteDir(t), addr: freeAddr(t)}
	host, port, _ := strings.Cut(s.addr, ":")
	var log strings.Builder
	cmd := exec.Command(filepath.Join(s.dir, "node_modules", ".bin", "azurite-blob"), "--blobHost", host, "--blobPort", port,
		"--inMemoryPersistence", "--silent", "--skipApiVersionCheck")
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.endpoint() + "/devstoreaccount1?comp=list")
		if err == nil {
			resp.Body.Close()
			break // any answer (403: not signed) means it listens
		}
		select {
		case <-done:
			t.Fatalf("azurite exited before it was ready: %s", log.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "azurite not ready after 60 s: %s", log.String())
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range containers {
		s.sdk("mkcontainer", c)
	}
	return s
}

func (s *azuriteServer) endpoint() string { return "http://" + s.addr }

// sdk runs test/testdata/azblob.js (Microsoft's SDK) and returns its output.
func (s *azuriteServer) sdk(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("node", append([]string{"testdata/azblob.js"}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(s.dir, "node_modules"),
		"AZ_CONN=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="+azuriteKey+
			";BlobEndpoint="+s.endpoint()+"/devstoreaccount1;")
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "azblob.js %v: %s", args, out)
	return string(out)
}

// TestAzureMountMatchesLocal packs the same inputs into a local directory and into Azurite,
// and mounts both: the epochs, sidecars and names are the same byte for byte (fixed records;
// variable, compressed, with --disk-cache); the blobs pack wrote read back through
// Microsoft's SDK as the local files; verify and info read az://; a second pack needs
// --force; a blob replaced under the mount (by the SDK: a new ETag) reads as EIO, never as
// its new bytes.
func TestAzureMountMatchesLocal(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // it mostly waits for the store's answers and timeouts: beside the other tests that do (make test's -parallel)
	srv := startAzurite(t, "data")
	dir := t.TempDir()
	raw, folder := s3Sources(t, dir, 6000, 300)
	ep := "--endpoint=" + srv.endpoint()
	for _, c := range storePacks(raw, folder, dir) {
		t.Run(c.name, func(t *testing.T) {
			local, u := filepath.Join(dir, c.name), "az://devstoreaccount1/data/sets/"+c.name
			packToStore(t, c, local, u, ep)
			// What pack uploaded, read back by another client, is the local pack's files.
			got := filepath.Join(t.TempDir(), "blockfs.json")
			srv.sdk("get", "data", "sets/"+c.name+"/blockfs.json", got)
			want, err := os.ReadFile(filepath.Join(local, "blockfs.json"))
			require.NoError(t, err)
			have, err := os.ReadFile(got)
			require.NoError(t, err)
			require.Equal(t, string(want), string(have))
			storeMatchesLocal(t, c, local, u, ep)
		})
	}
	// Every block blob replaced under a mount by the SDK: a new ETag.
	replacedUnderMount(t, filepath.Join(dir, "fixed"), "az://devstoreaccount1/data/sets/fixed", []string{ep}, func() {
		require.NotEqual(t, "0", strings.TrimSpace(srv.sdk("flip", "data", "sets/fixed/blocks/")))
	})

	// Without the key, the emulator refuses, and the message says what to set.
	_, errs, code := runEnv(t, []string{"AZURE_STORAGE_KEY="}, "info", ep, "az://devstoreaccount1/data/sets/fixed")
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, "AZURE_STORAGE_KEY")
}

// TestAzureFaults: Azurite behind the tests' fault proxy (checkStoreFaults).
func TestAzureFaults(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // it mostly waits for the store's answers and timeouts: beside the other tests that do (make test's -parallel)
	srv := startAzurite(t, "data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 8000, 0)
	ep := "--endpoint=" + proxy.endpoint()
	flags := []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "2"}
	local := filepath.Join(dir, "local")
	u := "az://devstoreaccount1/data/faults"
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), raw, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", ep}, flags...), raw, u)...)
	checkStoreFaults(t, mount(t, local, "--seed", "1"), mount(t, u, append([]string{ep}, faultsFlags...)...), proxy)
}
