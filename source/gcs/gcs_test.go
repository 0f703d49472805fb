package gcs

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

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

// TestAnswer: the JSON API's answers as the kinds objstore retries (or not) and reports; a
// 404 whose message says the bucket is missing is a wrong location, not a missing object; the
// token service's refusal is the credentials'.
func TestAnswer(t *testing.T) {
	c := &client{bucket: "b", endpoint: "http://127.0.0.1:1"}
	reply := func(status int, body string) error {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/storage/v1/b/b/o/x", nil)
		return serviceError(&http.Response{StatusCode: status, Status: http.StatusText(status), Request: req,
			Body: io.NopCloser(strings.NewReader(body))})
	}
	for _, tc := range []struct {
		err  error
		want objstore.Kind
	}{
		{errors.New("connection reset by peer"), objstore.Other},
		{reply(404, `{"error":{"code":404,"message":"No such object: b/o"}}`), objstore.NotFound},
		{reply(404, `{"error":{"code":404,"message":"No such object: my-bucket/no such bucket"}}`), objstore.NotFound},
		{reply(404, `{"error":{"code":404,"message":"The specified bucket does not exist."}}`), objstore.NoBucket},
		{reply(412, `{"error":{"code":412,"message":"conditionNotMet"}}`), objstore.Changed},
		{reply(403, `{"error":{"code":403,"message":"denied"}}`), objstore.Denied},
		{reply(429, ``), objstore.Throttled},
		{reply(503, ``), objstore.Throttled},
		{reply(500, ``), objstore.Transient},
		{fmt.Errorf("Get: %w", &oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, ErrorCode: "invalid_grant"}), objstore.Denied},
		{fmt.Errorf("Get: %w", &oauth2.RetrieveError{Response: &http.Response{StatusCode: 503}}), objstore.Transient},
	} {
		assert.Equal(t, tc.want, c.Answer(tc.err).Kind, tc.err.Error())
	}
	assert.Contains(t, c.Answer(reply(404, `{"error":{"message":"The specified bucket does not exist."}}`)).Hint, `no bucket "b"`)
	assert.Contains(t, c.Answer(reply(400, ``)).Code, "Bad Request")
}
