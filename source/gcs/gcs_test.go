package gcs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/source/objstore"
)

func TestOpenURL(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	st, err := Open("gs://bkt/a/b/", objstore.Options{})
	require.NoError(t, err)
	assert.Equal(t, "gs://bkt/a/b", st.Location())
	assert.Equal(t, "gs://bkt/a/b/blockfs.json", st.Path("blockfs.json"))
	for _, bad := range []string{"gs://", "gs:///x", "gs://b/a//c", "gs://b/a/../c", "s3://b/p"} {
		_, err := Open(bad, objstore.Options{})
		assert.Error(t, err, bad)
	}
	_, err = Open("gs://b/p", objstore.Options{Endpoint: "ftp://x"})
	assert.ErrorContains(t, err, "--endpoint")
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")
	st, err = Open("gs://b/p", objstore.Options{})
	require.NoError(t, err)
	assert.Equal(t, "gs://b/p", st.Location())
}

// TestAnswer: the JSON API's statuses as the kinds objstore retries (or not) and reports; a
// 404 that names the bucket is a wrong location, not a missing object.
func TestAnswer(t *testing.T) {
	c := &client{bucket: "b", endpoint: "http://127.0.0.1:1"}
	for _, tc := range []struct {
		err  error
		want objstore.Kind
	}{
		{errors.New("connection reset by peer"), objstore.Other},
		{&objstore.HTTPError{Status: 404, What: "GET ...: No such object: b/o"}, objstore.NotFound},
		{&objstore.HTTPError{Status: 404, What: "GET ...: No such object: my-bucket/o"}, objstore.NotFound},
		{&objstore.HTTPError{Status: 404, What: "GET ...: The specified bucket does not exist."}, objstore.NoBucket},
		{&objstore.HTTPError{Status: 412, What: "Precondition Failed"}, objstore.Changed},
		{&objstore.HTTPError{Status: 403, What: "denied"}, objstore.Denied},
		{&objstore.HTTPError{Status: 429, What: "rate"}, objstore.Throttled},
		{&objstore.HTTPError{Status: 503, What: "backend"}, objstore.Throttled},
		{&objstore.HTTPError{Status: 500, What: "backend"}, objstore.Transient},
	} {
		assert.Equal(t, tc.want, c.Answer(tc.err).Kind, tc.err.Error())
	}
	assert.Contains(t, c.Answer(&objstore.HTTPError{Status: 404, What: "bucket does not exist"}).Hint, `no bucket "b"`)
}
