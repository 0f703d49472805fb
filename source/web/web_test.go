package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/objstore"
)

// server serves objects from memory with ranges, as a static host does: with a strong ETag
// each (etags), or with only a Last-Modified, or ignoring Range altogether.
type server struct {
	mu      sync.Mutex
	objs    map[string][]byte
	mod     map[string]time.Time
	etags   bool
	noRange bool
}

func (s *server) put(path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[path] = data
	s.mod[path] = time.Now().Add(time.Duration(len(s.mod)) * time.Second).Truncate(time.Second)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.objs[r.URL.Path]
	mod := s.mod[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if s.etags {
		w.Header().Set("ETag", fmt.Sprintf(`"%08x-%d"`, crc32c.Checksum(data), mod.Unix()))
	}
	if s.noRange {
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, "", mod, bytes.NewReader(data))
}

func newServer(t *testing.T, etags bool) (*server, *httptest.Server) {
	s := &server{objs: map[string][]byte{}, mod: map[string]time.Time{}, etags: etags}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// table is a source.Table of one file per extent.
type table []source.Extent

func (tb table) Extent(id source.FileID) (source.Extent, bool) {
	if int(id) >= len(tb) {
		return source.Extent{}, false
	}
	return tb[id], true
}

// open opens the dataset at ts's /data with small parts, and a table of its object rel.
func open(t *testing.T, ts *httptest.Server, rel string, crc uint32) (*objstore.Store, *objstore.Blocks) {
	st, err := Open(ts.URL+"/data", objstore.Options{PartSize: objstore.MinPartSize, Retries: -1})
	require.NoError(t, err)
	key, id, err := st.Stat(rel)
	require.NoError(t, err)
	id.CRC32C, id.HasCRC = crc, true
	return st, objstore.NewBlocks(st, table{{Name: key, Size: id.Size, Ident: id}})
}

// TestWebReads: a dataset's files read whole and in ranges, checked by their CRC32C, pinned
// by ETag or by Last-Modified: a replaced object is ErrChanged, never its new bytes.
func TestWebReads(t *testing.T) {
	for _, etags := range []bool{true, false} {
		t.Run(fmt.Sprintf("etags=%v", etags), func(t *testing.T) {
			srv, ts := newServer(t, etags)
			data := bytes.Repeat([]byte("0123456789abcdef"), 800_000) // 12.2 MiB: three parts
			srv.put("/data/blocks/b0.bin", data)
			srv.put("/data/blockfs.json", []byte(`{}`))
			st, b := open(t, ts, "blocks/b0.bin", crc32c.Checksum(data))
			m, err := st.ReadManifest()
			require.NoError(t, err)
			assert.Equal(t, `{}`, string(m))
			ok, err := st.Exists("nothing.bin")
			require.NoError(t, err)
			assert.False(t, ok)

			whole := make([]byte, len(data))
			require.NoError(t, b.Fill(context.Background(), 0, 0, [][]byte{whole}, source.Read{}))
			assert.Equal(t, data, whole)
			part := make([]byte, 1000)
			require.NoError(t, b.Fill(context.Background(), 0, 7_000_001, [][]byte{part}, source.Read{CallerChecks: true}))
			assert.Equal(t, data[7_000_001:7_001_001], part)

			srv.put("/data/blocks/b0.bin", bytes.ToUpper(data)) // replaced, same size
			err = b.Fill(context.Background(), 0, 7_000_001, [][]byte{part}, source.Read{CallerChecks: true})
			require.ErrorIs(t, err, source.ErrChanged)
			t.Log(err)
		})
	}
}

// TestWebRefusals: a server that ignores ranges, a missing object, a bad URL, and the writes
// a web server does not take, each said plainly.
func TestWebRefusals(t *testing.T) {
	srv, ts := newServer(t, true)
	data := bytes.Repeat([]byte("x"), 6<<20)
	srv.put("/data/b.bin", data)
	_, b := open(t, ts, "b.bin", crc32c.Checksum(data))
	srv.noRange = true
	err := b.Fill(context.Background(), 0, 10, [][]byte{make([]byte, 10)}, source.Read{CallerChecks: true})
	require.ErrorIs(t, err, source.ErrUnavailable)
	assert.Contains(t, err.Error(), "ignores range requests")

	st, err := Open(ts.URL+"/data", objstore.Options{})
	require.NoError(t, err)
	_, _, err = st.Stat("missing.bin")
	assert.ErrorContains(t, err, "not exist")
	_, err = st.Objects(context.Background())
	require.ErrorIs(t, err, objstore.ErrNoListing)
	err = st.PutBytes(context.Background(), "x", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrReadOnly)
	for _, bad := range []string{"https://", "https://h/p?x=1", "https://h/a/../b", "ftp://h/p", "https://u:p@h/p"} {
		_, err := Open(bad, objstore.Options{})
		assert.Error(t, err, bad)
	}
	_, err = Open("https://h/p", objstore.Options{Endpoint: "http://127.0.0.1:9000"})
	assert.ErrorContains(t, err, "--endpoint")
}

// TestWebFileServer: Go's own file server (Last-Modified, no ETag) as the web server.
func TestWebFileServer(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("blockfs "), 1<<20)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "f.bin"), data, 0o644))
	ts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer ts.Close()
	_, b := open(t, ts, "f.bin", crc32c.Checksum(data))
	got := make([]byte, len(data))
	require.NoError(t, b.Fill(context.Background(), 0, 0, [][]byte{got}, source.Read{}))
	assert.Equal(t, data, got)
	st, err := Open(ts.URL+"/data", objstore.Options{})
	require.NoError(t, err)
	body, err := st.OpenObject(context.Background(), "f.bin", "")
	require.NoError(t, err)
	all, err := io.ReadAll(body)
	body.Close()
	require.NoError(t, err)
	assert.Equal(t, data, all)
}
