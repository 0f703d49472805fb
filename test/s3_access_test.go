package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestS3AccessErrors: wrong credentials and a missing bucket get one line that says what is
// wrong and what to check, exit code 1, at once (a refusal is not retried), from mount, info,
// verify and pack; nothing is mounted and nothing is written.
func TestS3AccessErrors(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 500, 1)
	ep := "--endpoint=" + srv.endpoint()
	packArgs := []string{"pack", "--quiet", ep, "--format", "raw", "--record-size", "1000", "--block-size", "64KiB"}
	mustRun(t, append(packArgs, raw, "s3://data/set")...)
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))

	cases := []struct {
		name, keyID, secret string
		args                []string
		want                []string
	}{
		{"wrong secret, info", minioUser, "not-the-secret", []string{"info", ep, "s3://data/set"},
			[]string{"s3://data/set/blockfs.json: the store refused access", "AWS_SECRET_ACCESS_KEY"}},
		{"unknown key, mount", "nobody-here", minioPass, []string{"mount", ep, "s3://data/set", mnt},
			[]string{"the store refused access", "AWS_ACCESS_KEY_ID"}},
		{"wrong secret, verify", minioUser, "not-the-secret", []string{"verify", ep, "s3://data/set"},
			[]string{"the store refused access"}},
		{"wrong secret, pack", minioUser, "not-the-secret", append(packArgs, raw, "s3://data/other"),
			[]string{"the store refused access", "AWS_SECRET_ACCESS_KEY"}},
		{"no bucket, mount", minioUser, minioPass, []string{"mount", ep, "s3://nobucket/set", mnt},
			[]string{`there is no bucket "nobucket" at ` + srv.endpoint(), "--endpoint"}},
		{"no bucket, pack", minioUser, minioPass, append(packArgs, raw, "s3://nobucket/set"),
			[]string{`there is no bucket "nobucket"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", c.keyID)
			t.Setenv("AWS_SECRET_ACCESS_KEY", c.secret)
			start := time.Now()
			_, errs, code := run(t, c.args...)
			assert.Less(t, time.Since(start), 10*time.Second, "a refusal is final: no retries")
			assert.Equal(t, 1, code, errs)
			assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
			assert.True(t, strings.HasPrefix(errs, "blockfs: "), errs)
			for _, w := range c.want {
				assert.Contains(t, errs, w)
			}
			assert.NotContains(t, errs, "goroutine")
			assert.False(t, isMounted(mnt), "nothing mounted")
		})
	}
	// Nothing was written by the refused packs, and the dataset is whole.
	for o := range srv.cl.ListObjects(t.Context(), "data", minioListAll("other/")) {
		require.NoError(t, o.Err)
		t.Errorf("a refused pack left %s", o.Key)
	}
	mustRun(t, "verify", ep, "s3://data/set")
}
