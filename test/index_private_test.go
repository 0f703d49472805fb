package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// TestAutomaticIndexIsPrivate: a mount of shards without --index keeps their index only in a
// directory of its user's own, and uses an index again only from there. An index another user
// planted where the mount would look (a shared /tmp when $HOME is unset, another user's $HOME
// under sudo -E) was served, values and checksums agreeing with each other and not with the
// shards; now the mount indexes into a private directory, or says in one line that it has none.
func TestAutomaticIndexIsPrivate(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	shards := filepath.Join(dir, "shards")
	require.NoError(t, os.Mkdir(shards, 0o755))
	glob, samples := writeShards(t, shards, 300, 100)
	wds := func(id uint64, f string) []byte { return samples[id][f] }
	fields := []string{"jpg", "cls", "json"}
	sum := sha256.Sum256([]byte(shards))
	name := hex.EncodeToString(sum[:8])
	me := os.Geteuid()

	// plant puts an index of these shards at place, as another user would: top and all below
	// it owned by nobody where the test runs as root, else writable by anyone.
	plant := func(top, place string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(place), 0o755))
		mustRun(t, "index", "--block-size", "64KiB", glob, place)
		require.NoError(t, filepath.Walk(top, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if me == 0 {
				return os.Lchown(p, nobody, nobody)
			}
			return os.Chmod(p, info.Mode().Perm()|0o222)
		}))
	}
	env := func(home, cache, tmp string) {
		t.Setenv("HOME", home)
		t.Setenv("XDG_CACHE_HOME", cache)
		t.Setenv("TMPDIR", tmp)
	}
	mountLog := func() (*mounted, string) {
		m := mount(t, shards, "--seed", "3", "--cache-size", "64MiB")
		checkSampleEpochs(t, m, []int{0}, fields, wds, 300)
		m.stop()
		return m, m.stderr.String()
	}
	indexedInto := func(log, want string) {
		t.Helper()
		assert.Contains(t, log, fmt.Sprintf("indexing the shards at %s into %s ", shards, want), "the mount made its own index")
	}

	t.Run("no HOME: not the shared temporary directory's", func(t *testing.T) {
		tmp := filepath.Join(dir, "tmp1")
		require.NoError(t, os.Mkdir(tmp, 0o1777))
		require.NoError(t, os.Chmod(tmp, 0o1777))
		planted := filepath.Join(tmp, "blockfs", "index", name) // where the mount looked before
		plant(filepath.Join(tmp, "blockfs"), planted)
		before, err := os.ReadFile(filepath.Join(planted, "blockfs-index.json"))
		require.NoError(t, err)
		env("", "", tmp)
		_, log := mountLog()
		own := filepath.Join(tmp, fmt.Sprintf("blockfs-%d", me), "index", name)
		indexedInto(log, own)
		after, err := os.ReadFile(filepath.Join(planted, "blockfs-index.json"))
		require.NoError(t, err)
		assert.Equal(t, before, after, "the planted index is left as it was")
		st, err := os.Stat(filepath.Dir(own))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

		// Made once, used again: the next mount indexes nothing.
		_, log = mountLog()
		assert.NotContains(t, log, "indexing the shards", "the mount's own index is used again")
	})

	t.Run("another user's cache directory", func(t *testing.T) {
		tmp := filepath.Join(dir, "tmp2")
		require.NoError(t, os.Mkdir(tmp, 0o700))
		theirs := filepath.Join(dir, "theirs", ".cache")
		plant(filepath.Dir(theirs), filepath.Join(theirs, "blockfs", "index", name))
		env(filepath.Dir(theirs), theirs, tmp)
		_, log := mountLog()
		assert.Contains(t, log, "not keeping the shards' index in the cache directory: "+theirs)
		indexedInto(log, filepath.Join(tmp, fmt.Sprintf("blockfs-%d", me), "index", name))
	})

	t.Run("no private directory: one line", func(t *testing.T) {
		tmp := filepath.Join(dir, "tmp3")
		require.NoError(t, os.Mkdir(tmp, 0o1777))
		require.NoError(t, os.Chmod(tmp, 0o1777))
		target := filepath.Join(dir, "target")
		require.NoError(t, os.Mkdir(target, 0o700))
		require.NoError(t, os.Symlink(target, filepath.Join(tmp, fmt.Sprintf("blockfs-%d", me))))
		env("", "", tmp)
		mnt := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "mount", shards, mnt).CombinedOutput()
		if isMounted(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			t.Fatalf("mounted with its index in a symlinked directory: %s", out)
		}
		require.Error(t, err, "%s", out)
		msg := strings.TrimSpace(string(out))
		assert.Equal(t, 1, strings.Count(msg, "\n")+1, "one line: %q", msg)
		assert.Contains(t, msg, "is a symlink")
		assert.Contains(t, msg, "--index DIR")
		entries, err := os.ReadDir(target)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing written where the symlink leads")
	})
}
