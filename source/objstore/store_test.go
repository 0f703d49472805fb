package objstore

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		a    Answer
		want bool
	}{
		{io.ErrUnexpectedEOF, Answer{}, true},
		{errors.New("connection reset by peer"), Answer{}, true},
		{errors.New("slow down"), Answer{Status: 503, Kind: Throttled}, true},
		{errors.New("internal"), Answer{Status: 500, Kind: Transient}, true},
		{errors.New("bad gateway"), Answer{Status: 502}, true},
		{errors.New("too many"), Answer{Status: 429}, true},
		{errors.New("no such key"), Answer{Status: 404, Kind: NotFound}, false},
		{errors.New("changed"), Answer{Status: 412, Kind: Changed}, false},
		{errors.New("denied"), Answer{Status: 403, Kind: Denied}, false},
		{ErrReadOnly, Answer{}, false},
		{ErrNoListing, Answer{}, false},
	} {
		if got := retryable(c.err, c.a); got != c.want {
			t.Errorf("retryable(%v, %+v) = %v, want %v", c.err, c.a, got, c.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	var o Options
	if err := o.Validate(); err != nil || o.Concurrency != DefaultConcurrency || o.PartSize != DefaultPartSize || o.Retries != DefaultRetries {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o = Options{Retries: -1}
	if err := o.Validate(); err != nil || o.Retries != 0 {
		t.Fatalf("no retries: %+v, %v", o, err)
	}
	for _, bad := range []Options{{PartSize: 1 << 20}, {Concurrency: 1000}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestRedirectsAndRanges: a web server's redirect from https to http is refused (the manifest
// would cross the network in the clear); a 206 for a request of the whole object, or of
// another range, is refused; messages carry no query (a redirect's signature).
func TestRedirectsAndRanges(t *testing.T) {
	get := func(u string) *http.Request { return httptest.NewRequest(http.MethodGet, u, nil) }
	require.Error(t, SameSchemeRedirects(get("http://cdn/x"), []*http.Request{get("https://h/x")}))
	require.NoError(t, SameSchemeRedirects(get("https://cdn/x"), []*http.Request{get("https://h/x")}))
	require.NoError(t, SameSchemeRedirects(get("http://cdn/x"), []*http.Request{get("http://h/x")}))
	require.ErrorIs(t, NoRedirects(get("https://cdn/x"), nil), http.ErrUseLastResponse)

	resp := func(status int, cr string, n int64) *http.Response {
		h := http.Header{}
		if cr != "" {
			h.Set("Content-Range", cr)
		}
		return &http.Response{StatusCode: status, Header: h, ContentLength: n, Request: get("https://h/x?X-Amz-Signature=secret")}
	}
	require.NoError(t, CheckRange(resp(206, "bytes 10-19/100", 10), 10, 10, true))
	require.Error(t, CheckRange(resp(206, "bytes 0-9/100", 10), 0, -1, false), "a part for the whole")
	require.Error(t, CheckRange(resp(206, "bytes 20-29/100", 10), 10, 10, true), "another range")
	require.NoError(t, CheckRange(resp(200, "", 10), 0, 10, true), "the whole object, which is the range")
	err := CheckRange(resp(200, "", 100), 10, 10, true)
	require.ErrorContains(t, err, "ignores range requests")
	require.NotContains(t, err.Error(), "secret")
}

func TestSplitURL(t *testing.T) {
	names, prefix, err := SplitURL("az://acct/ctr/a/b/", "az://ACCOUNT/CONTAINER/PREFIX")
	require.NoError(t, err)
	require.Equal(t, []string{"acct", "ctr"}, names)
	require.Equal(t, "a/b", prefix)
	names, prefix, err = SplitURL("s3://b", "s3://BUCKET/PREFIX")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, names)
	require.Equal(t, "", prefix)
	for in, msg := range map[string]string{
		"s3:///x":      "s3:///x: no bucket (give s3://BUCKET/PREFIX)",
		"gs://b/p":     "not a URL of the form s3://",
		"s3://b/a//c":  "not a valid bucket and prefix",
		"s3://b/a/../": "not a valid bucket and prefix",
		"s3://b c/p":   "not a valid bucket and prefix",
	} {
		_, _, err := SplitURL(in, "s3://BUCKET/PREFIX")
		require.ErrorContains(t, err, msg, in)
	}
	_, _, err = SplitURL("az://acct", "az://ACCOUNT/CONTAINER/PREFIX")
	require.ErrorContains(t, err, "no container")
	_, _, err = SplitURL("az://a%2f/c/p", "az://ACCOUNT/CONTAINER/PREFIX")
	require.ErrorContains(t, err, "not a valid account, container and prefix")
}
